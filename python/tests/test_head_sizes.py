"""Models of unusual shapes (head sizes 16 and 80, 3 and 5 layers, an odd vocabulary)
keep identity with the F16 cache and its three attention kernels (attention.py).

Prompts of up to ~150 tokens have tiled parts (64+ tokens) and one-row ones; a long
prompt decoding alone goes past 512 cells, where a lone token would take the KV-split
kernel without its companion row. The models' matrices are Q8_0, as most of a real
model's are: with F16 matrices a one-token batch (ggml's vec_dot) and a longer one
(llamafile's sgemm) round differently, whatever the cache.
"""

import pytest

import newrllama4 as nl
from newrllama4.testing import write_tiny_model
from conftest import random_prompts
from test_prefix_plan import grouped_prompts

SHAPES = {  # head size: (heads, layers, tokens only the model writes)
    16: (4, 3, 37),
    80: (2, 5, 0),
}
PROMPTS = random_prompts(24, seed=5, max_words=150)  # up to ~150 tokens: tiled parts and one-row prompts
LABELS = ["yes", "no", "happy", "sad"]
SHARED = grouped_prompts(24, seed=6)


@pytest.fixture(scope="module", params=sorted(SHAPES), ids=lambda size: f"head{size}")
def odd_model(request, tmp_path_factory):
    n_head, n_layer, extra = SHAPES[request.param]
    path = write_tiny_model(
        tmp_path_factory.mktemp("odd") / f"head{request.param}.gguf", seed=request.param, head_dim=request.param,
        n_head=n_head, n_layer=n_layer, extra_tokens=extra, quantized=True,
    )
    with nl.Model(path) as model:
        yield model


def run(model, prompts, n_seq_max, n_batch=512, prefix_cache=False, ctx=None, **params):
    if ctx is None:
        with nl.Context(model, n_ctx=512, n_seq_max=n_seq_max, n_batch=n_batch, prefix_cache=prefix_cache) as ctx:
            return run(model, prompts, n_seq_max, ctx=ctx, **params)
    result = ctx.generate_parallel(prompts, **{"max_tokens": 20, "temperature": 0, **params})
    assert all(c.finish_reason in ("stop", "length") for c in result)
    return result


def numbers(result):
    """Each prompt's tokens, or its label probabilities: floats that any other rounding would change."""
    return [c.label_probs if c.label_probs is not None else c.tokens for c in result]


def test_the_cache_is_f16(odd_model):
    result = run(odd_model, PROMPTS[:2], n_seq_max=2)
    assert result.stats.kv_cache == "f16/f16"
    assert result.stats.identity_guaranteed and result.stats.batch_invariant


def test_a_long_prompt_decoding_alone_past_512_cells_matches_decoding_beside_others(odd_model):
    # alone, every step is one token over 512+ cells: the KV-split kernel, but for the companion row
    long_prompt = " ".join(PROMPTS[:8])
    others = PROMPTS[:3]
    with nl.Context(odd_model, n_ctx=1024, n_seq_max=1) as ctx:
        alone = ctx.generate_parallel([long_prompt], max_tokens=30, temperature=0)[0]
    assert alone.n_prompt_tokens > 300 and alone.n_tokens == 30
    with nl.Context(odd_model, n_ctx=1024, n_seq_max=4) as ctx:
        beside = ctx.generate_parallel(others + [long_prompt], max_tokens=30, temperature=0)[3]
    assert beside.tokens == alone.tokens


def test_batched_and_chunked_prompts_match_solo(odd_model):
    solo = [c.tokens for c in run(odd_model, PROMPTS, n_seq_max=1)]
    assert len({tuple(t) for t in solo}) > len(solo) // 2  # the model does not say one thing to all
    assert [c.tokens for c in run(odd_model, PROMPTS, n_seq_max=8)] == solo
    assert [c.tokens for c in run(odd_model, PROMPTS, n_seq_max=6, n_batch=16)] == solo  # chunks of 2


@pytest.mark.parametrize("n_seq_max, n_batch", [(8, 512), (6, 16), (3, 200)])
def test_label_probabilities_are_bit_identical_batched_and_chunked(odd_model, n_seq_max, n_batch):
    solo = numbers(run(odd_model, PROMPTS, n_seq_max=1, labels=LABELS))
    assert numbers(run(odd_model, PROMPTS, n_seq_max, n_batch, labels=LABELS)) == solo


@pytest.mark.parametrize("labels", [None, LABELS], ids=["tokens", "label probabilities"])
def test_prefix_reuse_cold_and_warm_matches_solo(odd_model, labels):
    solo = numbers(run(odd_model, SHARED, n_seq_max=1, labels=labels))
    with nl.Context(odd_model, n_ctx=512, n_seq_max=5, n_batch=40) as ctx:
        cold = run(odd_model, SHARED, 5, ctx=ctx, labels=labels)
        warm = run(odd_model, SHARED, 5, ctx=ctx, labels=labels)
    assert numbers(cold) == solo and numbers(warm) == solo
    assert cold.stats.cached_prompt_tokens > 0.5 * cold.stats.prompt_tokens
    assert warm.stats.cached_prompt_tokens > cold.stats.cached_prompt_tokens


def test_a_context_llama_cpp_refuses_says_why_and_not_try_smaller(odd_model, monkeypatch):
    # a Q8_0 cache forced on a head size it cannot hold (blocks of 32): llama.cpp's own reason comes back
    import llama_cpp

    from newrllama4 import context

    monkeypatch.setattr(context, "KV_CACHE_TYPE", llama_cpp.GGML_TYPE_Q8_0)
    with pytest.raises(nl.ContextError) as caught:
        nl.Context(odd_model, n_ctx=64, n_seq_max=1)
    message = str(caught.value)
    assert "head sizes" in message and "does not divide n_embd_head_k" in message
    assert "smaller" not in message


@pytest.mark.parametrize("n_seq_max", [1, 4])
def test_the_fast_lane_runs_these_shapes_in_its_worker(odd_model, n_seq_max):
    with nl.Context(odd_model, n_ctx=512, n_seq_max=n_seq_max, batch_invariant=False) as fast:
        assert fast.worker_pid is not None  # this process forces the tiled matmul: the worker has ggml's own
        answers = fast.generate_parallel(PROMPTS[:6], max_tokens=8, temperature=0)
        labelled = fast.generate_parallel(PROMPTS[:6], labels=LABELS, temperature=0)
    assert all(c.finish_reason in ("stop", "length") and c.tokens for c in answers)
    assert all(abs(sum(c.label_probs.values()) - 1) < 1e-9 for c in labelled)
    assert not answers.stats.identity_guaranteed
