"""A prompt's features, its last token's final hidden state (features.py): the same bits
whatever shares its batch, on Gemma and on tiny models of unusual shapes; the answers the
same with or without them; kept in the result cache."""

import numpy as np
import pytest

import newrllama4 as nl
from newrllama4.errors import InvalidArgumentError
from newrllama4.features import state_array
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
