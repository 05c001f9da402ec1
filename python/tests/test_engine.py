"""The step loop of a call (engine.py), through generate_parallel and generate: results, stopping, text, stats, progress, logging."""

import logging

import pytest

import newrllama4 as nl
from conftest import random_prompts
from newrllama4.testing import write_tiny_model


def test_one_completion_per_prompt_in_order(ctx):
    prompts = random_prompts(9, seed=4)
    result = ctx.generate_parallel(prompts, max_tokens=5, temperature=0)
    assert len(result) == 9 and isinstance(result, nl.ParallelResult)
    for prompt, completion in zip(prompts, result):
        assert isinstance(completion, nl.Completion)
        assert completion.n_prompt_tokens == len(ctx.model.tokenize(prompt, parse_special=True))
        assert completion.n_tokens == len(completion.tokens) <= 5
        assert completion.finish_reason in ("stop", "length") and completion.error is None
    assert result.texts == [c.text for c in result]


def test_generate_is_generate_parallel_of_one_prompt(ctx):
    single = ctx.generate("once upon a time", max_tokens=10, temperature=0)
    assert single == ctx.generate_parallel(["once upon a time"], max_tokens=10, temperature=0)[0]


def test_token_id_prompts_match_text_prompts(ctx, model):
    text = "tell me a story"
    assert ctx.generate(model.tokenize(text), max_tokens=8, temperature=0).text == \
        ctx.generate(text, max_tokens=8, temperature=0).text


CONVERSATION = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "tell me a story"}]


def test_a_conversation_is_laid_out_with_the_models_chat_template(ctx, model, tmp_path):
    rendered = model.apply_chat_template(CONVERSATION, add_generation_prompt=True)
    as_messages = ctx.generate_parallel([CONVERSATION, "hello"], max_tokens=8, temperature=0)
    as_text = ctx.generate(rendered, max_tokens=8, temperature=0)
    assert as_messages[0].tokens == as_text.tokens and as_messages[0].n_prompt_tokens == as_text.n_prompt_tokens
    assert as_messages[1].text == ctx.generate("hello", max_tokens=8, temperature=0).text
    # the key names the tokens, so the rendered text finds the conversation's answer
    cache = tmp_path / "answers.sqlite"
    ctx.generate(CONVERSATION, max_tokens=8, temperature=0, cache=cache)
    assert ctx.generate(rendered, max_tokens=8, temperature=0, cache=cache).from_cache


def test_a_conversation_needs_a_model_with_a_chat_template(tmp_path):
    with nl.Model(write_tiny_model(tmp_path / "base.gguf", chat_template=False)) as base, \
            nl.Context(base, n_ctx=128, n_seq_max=1) as ctx:
        with pytest.raises(nl.ChatTemplateError):
            ctx.generate_parallel(["hello", CONVERSATION], max_tokens=2)


def test_max_tokens_stops_with_length(ctx):
    completion = ctx.generate("hello", max_tokens=3, temperature=0, penalty_repeat=1.0)
    assert completion.n_tokens <= 3
    if completion.n_tokens == 3:
        assert completion.finish_reason == "length"


def test_end_of_generation_token_stops_and_is_not_in_the_output(model):
    # the tiny model's end-of-generation tokens come from the vocabulary, not hard-coded ids
    eog = [t for t in range(model.n_vocab) if model.is_eog(t)]
    assert eog and 0 not in eog
    with nl.Context(model, n_ctx=256, n_seq_max=8) as ctx:
        result = ctx.generate_parallel(random_prompts(40, seed=5), max_tokens=60, temperature=1.5, top_k=0, top_p=1.0)
    stopped = [c for c in result if c.finish_reason == "stop"]
    assert stopped, "no prompt met an end-of-generation token"
    assert all(not any(model.is_eog(t) for t in c.tokens) for c in result)


def _stop_across_tokens(model, completion):
    """(where, stop): a two-character stop string made of the last character of one
    token and the first of the next, at its first occurrence in the text; or None."""
    raw = [model.token_piece(t) for t in completion.tokens]
    for k in range(2, len(raw)):
        before, after = b"".join(raw[:k]), raw[k]
        if before[-1:].isalpha() and after[:1].isalpha():
            i = len(before.decode("utf-8", errors="replace"))
            stop = completion.text[i - 1:i + 1]
            if completion.text.find(stop) == i - 1:
                return i - 1, stop
    return None


def test_stop_string_is_matched_across_tokens_and_cut(ctx):
    params = dict(max_tokens=30, temperature=0, penalty_repeat=1.0)
    # the first prompt whose greedy output has two letters from different tokens side by side
    found = ((p, full, _stop_across_tokens(ctx.model, full))
             for p in random_prompts(20, seed=12) for full in [ctx.generate(p, **params)])
    prompt, full, (cut, stop) = next(f for f in found if f[2] is not None)
    stopped = ctx.generate(prompt, stop=["never appears", stop], **params)
    assert stopped.finish_reason == "stop"
    assert stopped.text == full.text[:cut] and stop not in stopped.text


def test_text_is_the_utf8_decoding_of_the_generated_tokens(model):
    # the tiny model emits byte tokens that split multi-byte characters
    with nl.Context(model, n_ctx=256, n_seq_max=8) as ctx:
        result = ctx.generate_parallel(random_prompts(16, seed=6), max_tokens=40, temperature=2.0, top_k=0, top_p=1.0)
    byte_tokens = range(5, 5 + 256)
    assert any(t in byte_tokens for c in result for t in c.tokens), "no byte tokens were generated"
    for completion in result:
        raw = b"".join(model.token_piece(t) for t in completion.tokens)
        assert completion.text == raw.decode("utf-8", errors="replace")


def test_stats_are_complete_and_consistent(ctx):
    result = ctx.generate_parallel(random_prompts(6, seed=7) + [""], max_tokens=4, temperature=0)
    stats = result.stats
    assert isinstance(stats, nl.Stats)
    assert stats.prompts == 7 and stats.failures == 1
    assert stats.prompt_tokens == sum(c.n_prompt_tokens for c in result)
    assert stats.generated_tokens == sum(c.n_tokens for c in result)
    assert stats.llama_decode_calls >= 2 and stats.retries == 0
    assert stats.peak_active_sequences == 4
    assert stats.prefill_seconds > 0 and stats.decode_seconds > 0 and stats.total_seconds > 0
    assert stats.prompt_tokens_per_s > 0 and stats.generation_tokens_per_s > 0
    assert set(stats.to_dict()) >= {"prompts", "failures", "prompt_tokens", "generated_tokens", "prefill_seconds",
                                    "decode_seconds", "prompt_tokens_per_s", "generation_tokens_per_s",
                                    "llama_decode_calls", "decoded_tokens", "retries", "peak_active_sequences", "seed"}


def test_prefill_then_one_token_per_step(ctx):
    # after prefill each step feeds only each sequence's newest token: one prompt of
    # n tokens generating k tokens costs one prefill and k-1 decode calls
    result = ctx.generate_parallel(["hello how are you"], max_tokens=10, temperature=0, penalty_repeat=1.0)
    assert result.stats.llama_decode_calls == max(result[0].n_tokens, 1)
    assert result.stats.decoded_tokens == tokens_decoded_once_each(result)


def test_no_token_is_decoded_twice_with_many_sequences(ctx):
    result = ctx.generate_parallel(random_prompts(11, seed=5), max_tokens=9, temperature=0.5, seed=3)
    assert result.stats.decoded_tokens == tokens_decoded_once_each(result)


def tokens_decoded_once_each(completions):
    # every prompt and generated token goes through llama_decode once; only a token
    # that ends its sequence by length is never fed back
    return sum(c.n_prompt_tokens + c.n_tokens - (c.finish_reason == "length") for c in completions)


def test_progress_is_reported_once_per_prompt(ctx):
    calls = []
    ctx.generate_parallel(random_prompts(7, seed=8) + [""], max_tokens=3, on_progress=lambda d, t: calls.append((d, t)))
    assert calls == [(i, 8) for i in range(1, 9)]


def test_debug_logging_shows_requests_and_stats(ctx, caplog):
    with caplog.at_level(logging.DEBUG, logger="newrllama4"):
        ctx.generate_parallel(["hello", "once upon"], max_tokens=2)
    messages = [r.getMessage() for r in caplog.records if r.name == "newrllama4"]
    assert any("request 1 started" in m for m in messages)
    assert any("request 0 finished" in m for m in messages)
    assert any(m.startswith("stats:") for m in messages)


def test_llama_cpp_log_lines_are_silent_by_default(tiny_model_path, capfd):
    with nl.Model(tiny_model_path) as model, nl.Context(model, n_ctx=128, n_seq_max=1) as ctx:
        ctx.generate("hello", max_tokens=2)
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == ""


def test_a_call_longer_than_a_window_gives_what_one_window_gives(ctx, monkeypatch, tmp_path):
    """A call runs its prompts a window at a time (call_driver.WINDOW_PER_SLOT x n_seq_max), so that
    its memory does not grow with its rows: answers, probabilities, progress and counters are those of one window."""
    import newrllama4.call_driver as call_driver

    prompts = random_prompts(11, seed=12) + [""]
    labelled = [None, ["yes", "no"]] * 6
    arguments = dict(max_tokens=6, temperature=0, labels=labelled)
    whole = ctx.generate_parallel(prompts, **arguments)
    monkeypatch.setattr(call_driver, "WINDOW_PER_SLOT", 1)  # windows of 4 prompts (n_seq_max = 4)
    seen = []
    windowed = ctx.generate_parallel(prompts, on_progress=lambda done, total: seen.append((done, total)), **arguments)
    assert [c.text for c in windowed] == [c.text for c in whole]
    assert [c.label_probs for c in windowed] == [c.label_probs for c in whole]
    assert [type(c.error) for c in windowed] == [type(c.error) for c in whole]
    assert seen == [(k, 12) for k in range(1, 13)]
    for counter in ("prompts", "failures", "prompt_tokens", "generated_tokens"):
        assert getattr(windowed.stats, counter) == getattr(whole.stats, counter), counter
    # a result cache across windows: the second call finds every answer
    cache = tmp_path / "answers.sqlite"
    ctx.generate_parallel(prompts, cache=cache, **arguments)
    again = ctx.generate_parallel(prompts, cache=cache, **arguments)
    assert again.stats.result_cache_hits == 11 and [c.text for c in again] == [c.text for c in whole]


def test_windows_on_gemma_after_a_long_shared_instruction(gemma, monkeypatch):
    # the users' case at realistic sizes across window boundaries: an instruction of some
    # 300 tokens, restored from the prefix cache in every window, labels scored and text
    # generated, each answer what the call in one window gives it (windows of 2 prompts)
    import newrllama4.call_driver as call_driver

    instruction = "Decide whether each sentence below is about the weather. " * 30
    texts = ["It rained all day.", "The bank raised its rates.", "Snow fell on the hills.",
             "She read a long novel.", "A storm is coming.", "Prices of wheat went up.", "The sun came out."]
    prompts = [f"{instruction}\nSentence: {t}\nAnswer:" for t in texts]
    assert len(gemma.tokenize(prompts[0])) > 256
    arguments = dict(max_tokens=4, temperature=0, labels=[["yes", "no"], None] * 3 + [["yes", "no"]])
    with nl.Context(gemma, n_ctx=512, n_seq_max=2) as ctx:
        whole = ctx.generate_parallel(prompts, **arguments)
    monkeypatch.setattr(call_driver, "WINDOW_PER_SLOT", 1)
    with nl.Context(gemma, n_ctx=512, n_seq_max=2) as ctx:
        windowed = ctx.generate_parallel(prompts, **arguments)
    assert [c.text for c in windowed] == [c.text for c in whole]
    assert [c.label_probs for c in windowed] == [c.label_probs for c in whole]
    assert windowed.stats.identity_guaranteed and windowed.stats.cached_prompt_tokens > 0
