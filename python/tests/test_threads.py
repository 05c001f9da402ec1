"""Several threads on one context, and contexts of one model on several threads."""

from concurrent.futures import ThreadPoolExecutor

import newrllama4 as nl
from conftest import random_prompts

PROMPT_SETS = [random_prompts(6, seed=s) for s in range(6)]


def expected(model):
    with nl.Context(model, n_ctx=256, n_seq_max=3) as ctx:
        return [ctx.generate_parallel(p, max_tokens=10, temperature=0).texts for p in PROMPT_SETS]


def test_threads_sharing_one_context_get_correct_results(model):
    reference = expected(model)
    with nl.Context(model, n_ctx=256, n_seq_max=3) as ctx:
        with ThreadPoolExecutor(max_workers=6) as pool:
            results = list(pool.map(lambda p: ctx.generate_parallel(p, max_tokens=10, temperature=0).texts, PROMPT_SETS))
        assert ctx.cached_tokens() == 0
    assert results == reference


def test_contexts_of_one_model_run_on_threads_at_once(model):
    reference = expected(model)

    def run_own_context(prompts):
        with nl.Context(model, n_ctx=256, n_seq_max=3, n_threads=1) as ctx:
            return ctx.generate_parallel(prompts, max_tokens=10, temperature=0).texts

    with ThreadPoolExecutor(max_workers=3) as pool:
        assert list(pool.map(run_own_context, PROMPT_SETS)) == reference
