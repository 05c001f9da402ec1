"""A llama.cpp context (context.py): where it runs, and its arguments."""

import pytest

import newrllama4 as nl
from conftest import random_prompts


def test_context_needs_a_model():
    with pytest.raises(nl.InvalidArgumentError, match="model"):
        nl.Context("model.gguf")


def test_fast_mode_runs_and_completes(model):
    prompts = random_prompts(10, seed=9)
    with nl.Context(model, n_ctx=256, n_seq_max=4, batch_invariant=False) as ctx:
        result = ctx.generate_parallel(prompts, max_tokens=6, temperature=0)
    assert [c.finish_reason != "error" for c in result] == [True] * 10


def test_an_invariant_context_runs_here_and_the_fast_lane_where_ggml_keeps_its_settings(model, monkeypatch):
    with nl.Context(model, n_ctx=64, n_seq_max=2) as invariant:
        assert type(invariant) is nl.Context and invariant.worker_pid is None
    monkeypatch.setattr("newrllama4.context.ggml_forces_tiled_matmul", lambda: False)
    with nl.Context(model, n_ctx=64, n_seq_max=2, batch_invariant=False) as fast:
        assert type(fast) is nl.Context and fast.worker_pid is None
    monkeypatch.setattr("newrllama4.context.ggml_forces_tiled_matmul", lambda: True)
    with nl.Context(model, n_ctx=64, n_seq_max=2, batch_invariant=False) as fast:
        assert isinstance(fast, nl.worker.WorkerContext) and fast.worker_pid is not None
        assert (fast.n_ctx, fast.n_seq_max, fast.batch_invariant, fast.model) == (64, 2, False, model)
