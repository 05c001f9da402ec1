"""Answers restricted to labels: exactly a label, the model's probabilities, identity and seeds."""

import math

import llama_cpp as llama
import numpy as np
import pytest

import newrllama4 as nl
from newrllama4._llama import TokenBatch
from newrllama4.labels import check_labels
from conftest import random_prompts

LABELS = ["king", "queen", "river mountain", "red", "re"]  # multi-token, and "re" a prefix of "red"
PROMPTS = random_prompts(14, seed=21, max_words=40)


def run(model, prompts, n_seq_max, prefix_cache=True, **params):
    with nl.Context(model, n_ctx=256, n_seq_max=n_seq_max, prefix_cache=prefix_cache) as ctx:
        return ctx.generate_parallel(prompts, **{"labels": LABELS, "temperature": 0, **params})


def reference_probs(model, prompt, labels):
    """Each label's probability from logits read one decode at a time, alone, in float64."""
    with nl.Context(model, n_ctx=256, n_seq_max=1, prefix_cache=False) as ctx:
        handle, batch = ctx._live_handle(), TokenBatch(256)
        memory = llama.llama_get_memory(handle)
        prompt_tokens = model.tokenize(prompt, parse_special=True)

        def log_prob(tokens):
            total = 0.0
            for j, token in enumerate(tokens):
                context = prompt_tokens + list(tokens[:j])
                llama.llama_memory_clear(memory, True)
                batch.clear()
                batch.add(context, 0, 0, True)
                assert batch.decode(handle) == 0
                row = np.ctypeslib.as_array(llama.llama_get_logits_ith(handle, -1), shape=(model.n_vocab,))
                row = row.astype(np.float64)
                total += row[token] - (row.max() + math.log(np.exp(row - row.max()).sum()))
            return total

        weights = []
        for label in labels:
            spellings = {tuple(model.tokenize(t, add_special=False)) for t in (label, " " + label)}
            weights.append(sum(math.exp(log_prob(s)) for s in spellings if s))
        batch.free()
    return [w / sum(weights) for w in weights]


def test_every_answer_is_a_label_with_probabilities_that_sum_to_one(model):
    result = run(model, PROMPTS, n_seq_max=4)
    for completion in result:
        assert completion.finish_reason == "stop" and completion.error is None
        assert completion.text == completion.label in LABELS
        assert list(completion.label_probs) == LABELS
        assert math.isclose(sum(completion.label_probs.values()), 1.0, rel_tol=1e-9)
        probs = completion.label_probs
        assert completion.label == max(LABELS, key=lambda label: (probs[label], -LABELS.index(label)))
    assert len({c.label for c in result}) > 1  # the prompts do not all get the same label


def test_probabilities_are_the_models_likelihood_of_each_labels_tokens(model):
    for prompt in PROMPTS[:3]:
        completion = run(model, [prompt], n_seq_max=1)[0]
        expected = reference_probs(model, prompt, LABELS)
        assert np.allclose([completion.label_probs[label] for label in LABELS], expected, rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("n_seq_max", [3, 8])
def test_labels_and_probabilities_in_a_batch_are_identical_to_solo(model, n_seq_max):
    solo = run(model, PROMPTS, n_seq_max=1, prefix_cache=False)
    batch = run(model, PROMPTS, n_seq_max=n_seq_max)
    assert [c.label_probs for c in batch] == [c.label_probs for c in solo]


def test_sampled_labels_are_reproducible_and_independent_of_n_seq_max(model):
    params = dict(temperature=1.0, seed=31)
    first = run(model, PROMPTS, n_seq_max=2, **params)
    again = run(model, PROMPTS, n_seq_max=7, prefix_cache=False, **params)
    assert first.texts == again.texts
    draws = {run(model, PROMPTS[:1], n_seq_max=1, temperature=5.0, seed=s)[0].label for s in range(40)}
    assert len(draws) > 1  # a high temperature spreads the draws over the labels


def test_per_prompt_labels_and_free_text_in_one_call(model):
    labels = [LABELS, None, ["yes", "no"], None]
    with nl.Context(model, n_ctx=256, n_seq_max=3) as ctx:
        mixed = ctx.generate_parallel(PROMPTS[:4], labels=labels, max_tokens=8, temperature=0)
        free = ctx.generate_parallel(PROMPTS[:4], max_tokens=8, temperature=0)
    assert mixed[0].label in LABELS and mixed[2].label in ("yes", "no")
    assert mixed[1].label is None and mixed[1].text == free[1].text and mixed[3].tokens == free[3].tokens


def test_a_bad_prompt_with_labels_fails_alone_and_progress_counts_prompts(model):
    calls = []
    with nl.Context(model, n_ctx=256, n_seq_max=4) as ctx:
        result = ctx.generate_parallel(
            [PROMPTS[0], "", PROMPTS[1]], labels=LABELS, temperature=0, on_progress=lambda d, t: calls.append((d, t))
        )
    assert [c.finish_reason for c in result] == ["stop", "error", "stop"]
    assert isinstance(result[1].error, nl.EmptyPromptError) and result[1].label is None
    assert calls == [(1, 3), (2, 3), (3, 3)]


@pytest.mark.parametrize("labels", [["only"], ["a", "a"], ["a", ""], "ab", [["a", "b"]], [1, 2], [["a", "b"], 3]])
def test_bad_labels_name_the_argument(ctx, labels):
    with pytest.raises(nl.InvalidArgumentError, match="labels"):
        ctx.generate_parallel(PROMPTS[:2], labels=labels)


def test_labels_given_once_are_one_tuple_for_every_prompt():
    # a call of 100,000 prompts holds one copy of its labels, not one per prompt
    once = check_labels(["yes", "no"], 4)
    assert once == [("yes", "no")] * 4 and all(labels is once[0] for labels in once)
    assert check_labels([["a", "b"], None, ["c", "d"]], 3) == [("a", "b"), None, ("c", "d")]
