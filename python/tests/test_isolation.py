"""Isolation: a prompt's output depends on nothing but the prompt, the seed and its index."""

import pytest

import newrllama4 as nl
from conftest import random_prompts

PROMPTS = random_prompts(36, seed=1)  # 36 prompts of 1 to 60 words


def run(model, prompts, n_seq_max, n_batch=512, **params):
    with nl.Context(model, n_ctx=256, n_seq_max=n_seq_max, n_batch=n_batch) as ctx:
        result = ctx.generate_parallel(prompts, max_tokens=24, **params)
    assert all(c.finish_reason in ("stop", "length") for c in result)
    return [c.tokens for c in result]


@pytest.fixture(scope="module")
def greedy_solo(model):
    return run(model, PROMPTS, n_seq_max=1, temperature=0)


@pytest.mark.parametrize("n_seq_max", [1, 3, 8])
def test_greedy_batch_is_token_identical_to_solo(model, greedy_solo, n_seq_max):
    assert run(model, PROMPTS, n_seq_max, temperature=0) == greedy_solo


def test_greedy_identity_holds_when_prompts_are_chunked_across_batches(model, greedy_solo):
    # n_batch=16 splits long prompts over several prefill batches, next to other prompts
    assert run(model, PROMPTS, n_seq_max=8, n_batch=16, temperature=0) == greedy_solo


def test_greedy_identity_holds_for_any_order_of_the_other_prompts(model, greedy_solo):
    order = list(reversed(range(len(PROMPTS))))
    reversed_out = run(model, [PROMPTS[i] for i in order], n_seq_max=8, temperature=0)
    assert [reversed_out[order.index(i)] for i in range(len(PROMPTS))] == greedy_solo


def test_outputs_are_not_all_the_same(greedy_solo):
    # guards the identity tests against a model that says the same thing to everyone
    assert len({tuple(t) for t in greedy_solo}) > len(greedy_solo) // 2


SAMPLED = dict(temperature=1.0, top_k=0, top_p=1.0, seed=42)


def test_sampling_with_a_seed_is_reproducible(model):
    first = run(model, PROMPTS[:12], n_seq_max=4, **SAMPLED)
    assert run(model, PROMPTS[:12], n_seq_max=4, **SAMPLED) == first


def test_sampled_output_does_not_depend_on_n_seq_max(model):
    assert run(model, PROMPTS[:12], n_seq_max=1, **SAMPLED) == run(model, PROMPTS[:12], n_seq_max=5, **SAMPLED)


def test_appending_prompts_leaves_earlier_outputs_unchanged(model):
    alone = run(model, PROMPTS[:6], n_seq_max=3, **SAMPLED)
    extended = run(model, PROMPTS[:6] + PROMPTS[20:30], n_seq_max=3, **SAMPLED)
    assert extended[:6] == alone


def test_duplicated_prompts_at_different_indices_sample_differently(model):
    out = run(model, ["hello how are you"] * 4, n_seq_max=4, **SAMPLED)
    assert len({tuple(t) for t in out}) == 4


def test_a_different_seed_changes_sampled_output(model):
    assert run(model, PROMPTS[:4], 4, **SAMPLED) != run(model, PROMPTS[:4], 4, **{**SAMPLED, "seed": 43})


def test_random_seed_is_reported_so_the_call_can_be_replayed(model):
    with nl.Context(model, n_ctx=256, n_seq_max=2) as ctx:
        first = ctx.generate_parallel(PROMPTS[:3], max_tokens=8, temperature=1.0, seed=-1)
        again = ctx.generate_parallel(PROMPTS[:3], max_tokens=8, temperature=1.0, seed=first.stats.seed)
    assert first.texts == again.texts
