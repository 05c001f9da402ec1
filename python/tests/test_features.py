"""A prompt's features (features.py): its last token's final hidden state, a middle
layer's state of it, the mean of that layer's states over the text's tokens. The same
bits whatever shares its batch, on Gemma and on tiny models of unusual shapes; the
answers the same with or without them; what llama.cpp computes (a model cut after the
layer, each text token as the last token of a prompt of its own); kept in the result
cache."""

import numpy as np
import pytest

import newrllama4 as nl
from newrllama4.errors import InvalidArgumentError
from newrllama4.features import default_layer, micro_batches, state_array, text_span
from newrllama4.testing import write_tiny_model
from conftest import random_prompts
from test_prefix_plan import grouped_prompts

LABELS = ["yes", "no", "happy"]
GREEDY = dict(temperature=0, max_tokens=4)


@pytest.fixture(scope="module", params=[(16, 4, 3), (80, 2, 5)], ids=lambda shape: f"head{shape[0]}")
def odd_model(request, tmp_path_factory):
    head_dim, n_head, n_layer = request.param
    path = write_tiny_model(tmp_path_factory.mktemp("odd") / f"head{head_dim}.gguf", seed=head_dim,
                            head_dim=head_dim, n_head=n_head, n_layer=n_layer, extra_tokens=5)
    with nl.Model(path) as model:
        yield model


def states(result):
    return [c.hidden_state for c in result]


def alone_and_together(model, prompts, n_seq_max, **params):
    """Each prompt's answer alone in a context of one sequence, and all of them together
    with a shared prefix cache."""
    with nl.Context(model, n_ctx=512, n_seq_max=1, prefix_cache=False) as ctx:
        alone = [ctx.generate(p, hidden_states=True, **params) for p in prompts]
    with nl.Context(model, n_ctx=512, n_seq_max=n_seq_max) as ctx:
        together = ctx.generate_parallel(prompts, hidden_states=True, **params)
    return alone, together


def test_a_prompts_state_is_the_same_bits_whatever_shares_its_batch(odd_model):
    prompts = grouped_prompts(7, seed=3)  # shared instructions of whole tiles, restored from the prefix cache
    alone, together = alone_and_together(odd_model, prompts, 4, labels=LABELS, temperature=0)
    assert states(alone) == states(together)
    n_embd = len(state_array(together[0].hidden_state))
    assert n_embd == odd_model.n_embd and len(set(states(together))) == len(prompts)
    assert all(np.isfinite(state_array(s)).all() for s in states(together))


def test_gemmas_states_are_the_same_bits_whatever_shares_its_batch(gemma):
    prompts = random_prompts(3, seed=11, max_words=12)
    alone, together = alone_and_together(gemma, prompts, 2, labels=LABELS, temperature=0)
    assert states(alone) == states(together)
    assert len(state_array(together[0].hidden_state)) == 640


def test_states_leave_the_answers_alone_and_generation_keeps_the_label_passs_state(model):
    prompts = random_prompts(6, seed=12)
    with nl.Context(model, n_ctx=256, n_seq_max=3) as ctx:
        without = ctx.generate_parallel(prompts, labels=LABELS, temperature=0)
        labelled = ctx.generate_parallel(prompts, labels=LABELS, temperature=0, hidden_states=True)
        generated = ctx.generate_parallel(prompts, **GREEDY, hidden_states=True)
        assert [c.label_probs for c in labelled] == [c.label_probs for c in without]
        assert states(without) == [None] * 6
        assert [c.tokens for c in generated] == [c.tokens for c in ctx.generate_parallel(prompts, **GREEDY)]
    # the state of the prompt's last token, from which its first answer token is read either way
    assert states(generated) == states(labelled)


def test_the_fast_lane_keeps_states_too(model):
    prompts = random_prompts(3, seed=13)
    with nl.Context(model, n_ctx=256, n_seq_max=2, batch_invariant=False) as ctx:
        result = ctx.generate_parallel(prompts, labels=LABELS, temperature=0, hidden_states=True)
    assert all(len(state_array(s)) == model.n_embd for s in states(result))


def test_states_come_back_from_the_result_cache(model, tmp_path):
    cache = tmp_path / "answers.sqlite"
    prompts = random_prompts(5, seed=14)
    with nl.Context(model, n_ctx=256, n_seq_max=2) as ctx:
        # an answer kept without its state cannot serve a call that wants it
        ctx.generate_parallel(prompts, labels=LABELS, temperature=0, cache=cache)
        first = ctx.generate_parallel(prompts, labels=LABELS, temperature=0, hidden_states=True, cache=cache)
        assert first.stats.result_cache_hits == 0
        again = ctx.generate_parallel(prompts, labels=LABELS, temperature=0, hidden_states=True, cache=cache)
    assert again.stats.result_cache_hits == 5
    assert states(again) == states(first) and None not in states(first)


def test_states_are_refused_with_field_probs_and_on_a_server(ctx, tiny_server):
    schema = {"type": "object", "properties": {"a": {"enum": ["x", "y"]}}, "required": ["a"],
              "additionalProperties": False}
    with pytest.raises(InvalidArgumentError, match="hidden_states"):
        ctx.generate_parallel(["hello"], json_schema=schema, field_probs=True, hidden_states=True)
    with nl.RemoteContext(tiny_server.url) as remote:
        with pytest.raises(InvalidArgumentError, match="hidden state"):
            remote.generate_parallel(["hello"], hidden_states=True)


# An annotation as users run one: a long instruction with worked examples (about 230 of
# Gemma's tokens, shared by every prompt), then a short text of a few to 70 words.
INSTRUCTION = (
    "You are coding customer reviews for a study of product satisfaction. Read each review and decide "
    "whether the customer is satisfied with the product. Answer 'yes' when the review is mainly positive "
    "about the product itself, 'no' when it is mainly negative, and 'happy' only when the customer says "
    "outright that the product made them happy. Complaints about delivery or packaging alone do not make "
    "a review negative; judge the product. Sarcasm counts as what it means, not as what it says.\n\n"
) + "".join(f"Review: {text}\nAnswer: {label}\n\n" for text, label in [
    ("The kettle boils fast and looks great on the counter. Would buy again.", "yes"),
    ("Stopped working after two weeks and the support line never answered.", "no"),
    ("Arrived late in a crushed box, but the blender itself is excellent.", "yes"),
    ("Oh great, another charger that charges nothing. Brilliant.", "no"),
    ("This lamp made me so happy, my reading corner finally feels cosy.", "happy"),
    ("It does the job, nothing more, nothing less; fair for the price.", "yes"),
])


def annotation_prompts(n, seed, max_words):
    return [f"{INSTRUCTION}Review: {text}\nAnswer:" for text in random_prompts(n, seed=seed, max_words=max_words)]


def test_gemmas_states_of_long_annotation_prompts_are_the_same_bits_in_every_batch(gemma):
    prompts = annotation_prompts(4, seed=21, max_words=40)
    others = annotation_prompts(4, seed=22, max_words=70)
    assert min(len(gemma.tokenize(p)) for p in prompts) > 220  # past three tiles of 64

    def states_in(n_seq_max, batch, prefix_cache=True):
        with nl.Context(gemma, n_ctx=768, n_seq_max=n_seq_max, prefix_cache=prefix_cache) as ctx:
            result = ctx.generate_parallel(batch, labels=LABELS, temperature=0, hidden_states=True)
        return {prompt: completion.hidden_state for prompt, completion in zip(batch, result)}

    # one at a time (the instruction read once, then restored from the prefix cache), and
    # the first prompt read whole, from its first token
    with nl.Context(gemma, n_ctx=768, n_seq_max=1) as ctx:
        alone = {p: ctx.generate(p, labels=LABELS, temperature=0, hidden_states=True).hidden_state for p in prompts}
    whole = states_in(1, prompts[:1], prefix_cache=False)
    eight = states_in(8, prompts + others)  # all at once
    mixed = states_in(3, [others[0], *prompts[::-1]])  # in another order, three at a time
    for batch in (whole, eight, mixed):
        assert [batch[p] for p in batch if p in alone] == [alone[p] for p in batch if p in alone]
    assert len(set(alone.values())) == len(prompts)


# -- a middle layer's state and the text's mean (features.py) ---------------------------

KINDS = ["last", "middle", "mean"]


# for the tiny models, whose tokens are a few letters each
SHORT_INSTRUCTION = "Is the review happy? Answer yes or no.\n\nReview: the king was happy\nAnswer: yes\n\n"


def annotated(n, seed, max_words, instruction=SHORT_INSTRUCTION):
    """Annotation prompts and their texts."""
    texts = random_prompts(n, seed=seed, max_words=max_words)
    return [f"{instruction}Review: {text}\nAnswer:" for text in texts], texts


def kept(context, prompts, texts, kinds=KINDS, **params):
    result = context.generate_parallel(prompts, hidden_states=kinds, feature_texts=texts, **params)
    assert result.stats.failures == 0
    return result, [state_array(c.hidden_state) for c in result]


def test_each_kind_is_the_same_bits_whatever_shares_its_batch(odd_model):
    prompts, texts = annotated(6, seed=31, max_words=30)
    with nl.Context(odd_model, n_ctx=512, n_seq_max=1, prefix_cache=False) as ctx:
        alone = [kept(ctx, [p], [t], labels=LABELS, temperature=0)[0][0].hidden_state for p, t in zip(prompts, texts)]
    with nl.Context(odd_model, n_ctx=512, n_seq_max=4) as ctx:
        together, arrays = kept(ctx, prompts, texts, labels=LABELS, temperature=0)
    assert [c.hidden_state for c in together] == alone
    assert all(len(a) == 3 * odd_model.n_embd and np.isfinite(a).all() for a in arrays)


def test_the_mean_is_the_mean_of_each_text_tokens_state_taken_alone(odd_model):
    prompts, texts = annotated(2, seed=32, max_words=20)
    with nl.Context(odd_model, n_ctx=512, n_seq_max=3) as ctx:
        _, means = kept(ctx, prompts, texts, kinds=["mean"], max_tokens=1, temperature=0)
        for prompt, text, mean in zip(prompts, texts, means):
            tokens = odd_model.prompt_tokens(prompt)
            first, end = text_span(odd_model, tokens, text)
            assert b"".join(odd_model.token_piece(t) for t in tokens[first:end]).strip() == text.encode()
            # token k's state is that of the last token of the prompt cut after it
            _, rows = kept(ctx, [tokens[:k + 1] for k in range(first, end)], None, kinds=["middle"], max_tokens=1,
                           temperature=0)
            expected = (np.sum(np.asarray(rows, dtype=np.float64), axis=0) / len(rows)).astype(np.float32)
            assert np.array_equal(mean, expected)


def test_gemmas_mean_is_the_mean_of_each_text_tokens_state_and_answers_stay(gemma):
    prompts, texts = annotated(3, seed=33, max_words=25, instruction=INSTRUCTION)
    with nl.Context(gemma, n_ctx=768, n_seq_max=3) as ctx:
        without = ctx.generate_parallel(prompts, labels=LABELS, temperature=0)
        for kinds in (["last"], ["middle"], ["mean"], KINDS):
            result, arrays = kept(ctx, prompts, texts, kinds=kinds, labels=LABELS, temperature=0)
            assert [c.label_probs for c in result] == [c.label_probs for c in without]
            assert all(len(a) == 640 * len(kinds) for a in arrays)
        tokens = gemma.prompt_tokens(prompts[0])
        first, end = text_span(gemma, tokens, texts[0])
        assert end - first >= len(texts[0].split())
        _, rows = kept(ctx, [tokens[:k + 1] for k in range(first, end)], None, kinds=["middle"], max_tokens=1,
                       temperature=0)
        expected = (np.sum(np.asarray(rows, dtype=np.float64), axis=0) / len(rows)).astype(np.float32)
        assert np.array_equal(arrays[0][1280:], expected)
        assert np.array_equal(arrays[0][640:1280], rows[-1] if end == len(tokens) else
                              kept(ctx, [tokens], None, kinds=["middle"], max_tokens=1, temperature=0)[1][0])
    assert default_layer(gemma.n_layer) == 9


def test_a_middle_layers_state_is_the_last_state_of_the_model_cut_after_it(tmp_path):
    # the same seed draws the same first layers (and an output norm of ones): the model cut
    # after layer 1 computes layer 1's output of the whole one, then only normalises it
    whole = write_tiny_model(tmp_path / "four.gguf", seed=5, n_layer=4)
    cut = write_tiny_model(tmp_path / "two.gguf", seed=5, n_layer=2)
    prompts = random_prompts(4, seed=34, max_words=30)

    def states(path, kinds, **features):
        with nl.Model(path) as model, nl.Context(model, n_ctx=256, n_seq_max=2) as ctx:
            return kept(ctx, prompts, None, kinds=kinds, max_tokens=1, temperature=0, **features)[1]

    middle = states(whole, ["middle"], feature_layer=1)
    last = states(cut, ["last"])
    for state, final in zip(middle, last):
        normalised = state / np.sqrt(np.mean(state.astype(np.float64) ** 2) + 1e-5)
        np.testing.assert_allclose(normalised, final, rtol=1e-3, atol=1e-3)
    # another layer is another state
    assert not np.allclose(states(whole, ["middle"], feature_layer=2)[0], middle[0])


def test_a_sequence_keeping_the_mean_restores_nothing_of_its_text(model):
    # two texts that open alike after the instruction: their common opening would be restored
    texts = ["the river and the mountain were red " * 3 + "once", "the river and the mountain were red " * 3 + "king"]
    prompts = [f"{SHORT_INSTRUCTION}Review: {t}\nAnswer:" for t in texts]
    with nl.Context(model, n_ctx=512, n_seq_max=1, prefix_cache=False) as ctx:
        alone = [kept(ctx, [p], [t], kinds=["mean"], labels=LABELS, temperature=0)[0][0].hidden_state
                 for p, t in zip(prompts, texts)]
    with nl.Context(model, n_ctx=512, n_seq_max=2) as ctx:
        together = kept(ctx, prompts, texts, kinds=["mean"], labels=LABELS, temperature=0)[0]
        again = kept(ctx, prompts, texts, kinds=["mean"], labels=LABELS, temperature=0)[0]  # the prefix cache warm
    assert [c.hidden_state for c in together] == [c.hidden_state for c in again] == alone


def test_micro_batches_follow_llama_cpps_split():
    # consecutive sequence ids, equal rows of each, sequence after sequence
    assert micro_batches([0, 0, 0, 1, 1, 3, 3, 3], 8) == [[0, 1, 3, 4], [2], [5, 6, 7]]
    assert micro_batches([0, 0, 1, 1, 2, 2], 4) == [[0, 2, 4], [1, 3, 5]]  # a row of each, while two more fit
    assert micro_batches([2] * 5, 4) == [[0, 1, 2, 3], [4]]


def test_kinds_are_checked(ctx, model):
    for wrong in (["first"], ["last", "last"], [], 3):
        with pytest.raises(InvalidArgumentError, match="hidden_states"):
            ctx.generate_parallel(["hello"], hidden_states=wrong)
    with pytest.raises(InvalidArgumentError, match="feature_layer"):
        ctx.generate_parallel(["hello"], hidden_states=["middle"], feature_layer=model.n_layer - 1)
    with pytest.raises(InvalidArgumentError, match="feature_texts"):
        ctx.generate_parallel(["hello", "you"], hidden_states=["mean"], feature_texts=["hello"])


def test_the_result_cache_keeps_each_kind_apart(tmp_path):
    cache = tmp_path / "answers.sqlite"
    prompts, texts = annotated(3, seed=35, max_words=10)
    with nl.Model(write_tiny_model(tmp_path / "four.gguf", n_layer=4)) as model, \
            nl.Context(model, n_ctx=512, n_seq_max=2) as ctx:
        first = kept(ctx, prompts, texts, labels=LABELS, temperature=0, cache=cache)[0]
        again = kept(ctx, prompts, texts, labels=LABELS, temperature=0, cache=cache)[0]
        assert again.stats.result_cache_hits == 3 and [c.hidden_state for c in again] == [c.hidden_state for c in first]
        assert kept(ctx, prompts, texts, kinds=["mean"], labels=LABELS, temperature=0, cache=cache)[0] \
            .stats.result_cache_hits == 0
        assert kept(ctx, prompts, texts[::-1], labels=LABELS, temperature=0, cache=cache)[0] \
            .stats.result_cache_hits == 1  # the middle prompt keeps its text
        assert kept(ctx, prompts, texts, labels=LABELS, temperature=0, cache=cache, feature_layer=1)[0] \
            .stats.result_cache_hits == 0
