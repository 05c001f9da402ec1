"""No state survives a call: KV cache empty afterwards, however the call ended."""

import pytest

import newrllama4 as nl
from conftest import random_prompts

PROMPTS = random_prompts(10, seed=2)


def test_kv_cache_is_empty_after_a_call(ctx):
    ctx.generate_parallel(PROMPTS, max_tokens=8)
    assert ctx.cached_tokens() == 0


def test_kv_cells_of_a_finished_sequence_are_freed_at_once(ctx):
    seen = []
    ctx.generate_parallel(PROMPTS, max_tokens=8, on_progress=lambda done, total: seen.append(ctx.cached_tokens()))
    # when the last prompt finishes, nothing else holds cells
    assert seen[-1] == 0


def test_kv_cache_is_empty_after_the_progress_callback_raises(ctx):
    class Stop(Exception):
        pass

    def interrupt(done, total):
        if done == 3:
            raise Stop

    with pytest.raises(Stop):
        ctx.generate_parallel(PROMPTS, max_tokens=16, on_progress=interrupt)
    assert ctx.cached_tokens() == 0


def ctrl_c(done, total):
    raise KeyboardInterrupt


def test_kv_cache_is_empty_after_keyboard_interrupt(ctx):
    with pytest.raises(KeyboardInterrupt):
        ctx.generate_parallel(PROMPTS, max_tokens=16, on_progress=ctrl_c)
    assert ctx.cached_tokens() == 0


def test_after_an_interrupt_the_context_gives_the_same_outputs_as_a_fresh_one(model, ctx):
    with pytest.raises(KeyboardInterrupt):
        ctx.generate_parallel(PROMPTS, max_tokens=16, on_progress=ctrl_c)
    after = ctx.generate_parallel(PROMPTS, max_tokens=16, temperature=0).texts
    with nl.Context(model, n_ctx=512, n_seq_max=4) as fresh:
        assert fresh.generate_parallel(PROMPTS, max_tokens=16, temperature=0).texts == after


def work(result):
    return result.stats.llama_decode_calls, result.stats.decoded_tokens, result.stats.generated_tokens


@pytest.mark.parametrize("prefix_cache", [False, True])
def test_successive_calls_give_identical_results(model, prefix_cache):
    prompts = random_prompts(10, seed=2, max_words=150)  # some of 64+ tokens: a whole tile to reuse
    with nl.Context(model, n_ctx=512, n_seq_max=4, prefix_cache=prefix_cache) as ctx:
        if prefix_cache:  # the same texts asked again: the opt-in that keeps each prompt's snapshot
            ctx._prefix_cache.keep_prompts = True
        results = [ctx.generate_parallel(prompts, max_tokens=12, temperature=0.7, seed=7) for _ in range(20)]
    assert all(r.texts == results[0].texts for r in results)
    # every call does the same work: nothing is re-sent or left over from the previous one;
    # with the prefix cache the first call leaves prefixes that every later call restores
    assert len({work(r) for r in results[1:]}) == 1
    assert len({r.stats.decoded_tokens + r.stats.cached_prompt_tokens for r in results}) == 1
    assert (work(results[0]) == work(results[1])) == (not prefix_cache)


def test_more_prompts_than_slots_all_complete_in_order(model):
    prompts = random_prompts(25, seed=3)
    with nl.Context(model, n_ctx=256, n_seq_max=3) as ctx:
        result = ctx.generate_parallel(prompts, max_tokens=6, temperature=0)
        solo = [ctx.generate(p, max_tokens=6, temperature=0).text for p in prompts]
    assert len(result) == 25 and result.texts == solo
    assert result.stats.peak_active_sequences == 3


def test_close_is_idempotent_and_use_after_close_raises(model):
    ctx = nl.Context(model, n_ctx=128, n_seq_max=1)
    ctx.close()
    ctx.close()
    with pytest.raises(nl.ClosedError):
        ctx.generate("hello")


def test_closing_the_model_closes_its_contexts(tiny_model_path):
    model = nl.Model(tiny_model_path)
    ctx = nl.Context(model, n_ctx=128, n_seq_max=1)
    model.close()
    model.close()
    assert ctx.closed
    with pytest.raises(nl.ClosedError):
        ctx.generate("hello")
    with pytest.raises(nl.ClosedError):
        model.tokenize("hello")
    with pytest.raises(nl.ClosedError):
        nl.Context(model)


def test_context_managers_close(tiny_model_path):
    with nl.Model(tiny_model_path) as model, nl.Context(model, n_ctx=128, n_seq_max=1) as ctx:
        assert ctx.generate("hello", max_tokens=2).n_tokens > 0
    assert ctx.closed and model.closed


def test_a_callback_cannot_reenter_or_close_its_own_context(ctx):
    for reenter in (lambda d, t: ctx.generate("hello"), lambda d, t: ctx.close()):
        with pytest.raises(nl.ContextError):
            ctx.generate_parallel(PROMPTS, max_tokens=4, on_progress=reenter)
        assert not ctx.closed and ctx.cached_tokens() == 0
    assert ctx.generate("hello", max_tokens=2).n_tokens > 0


def test_closing_the_model_from_a_callback_leaves_everything_usable(tiny_model_path):
    with nl.Model(tiny_model_path) as model, nl.Context(model, n_ctx=128, n_seq_max=2) as ctx:
        with pytest.raises(nl.ContextError):
            ctx.generate_parallel(PROMPTS[:3], max_tokens=2, on_progress=lambda d, t: model.close())
        assert not model.closed and ctx.generate("hello", max_tokens=2).n_tokens > 0
    assert ctx.closed and model.closed
