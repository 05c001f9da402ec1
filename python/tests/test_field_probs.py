"""field_probs=True: each enum and boolean field of a JSON answer scored as labels where its value starts."""

import json

import pytest

import newrllama4 as nl
from newrllama4.attention import TILE
from newrllama4.constraints import check_constraints, text_error
from newrllama4.errors import IncompleteOutputError
from newrllama4.field_probs import scored_fields
from newrllama4.testing import write_tiny_model
from conftest import random_prompts

SCHEMA = {
    "type": "object",
    "properties": {
        "topic": {"type": "string", "maxLength": 12},
        "relevant": {"type": "boolean"},
        "tone": {"enum": ["king", "queen", "river mountain", "red", "re"]},  # multi-token, "re" a prefix of "red"
        "year": {"type": "integer", "minimum": 0, "maximum": 99},
        "mentions": {"type": "boolean"},
    },
    "required": ["topic", "relevant", "tone", "year", "mentions"],
    "additionalProperties": False,
}
SCORED = {"relevant": ["true", "false"], "tone": SCHEMA["properties"]["tone"]["enum"], "mentions": ["true", "false"]}
PROMPTS = random_prompts(10, seed=31, max_words=40)
GREEDY = dict(json_schema=SCHEMA, field_probs=True, temperature=0, max_tokens=200)


def answers(result):
    return [(c.text, c.field_probs) for c in result]


def value_prefix(model, completion, field):
    """The answer's tokens up to the colon after `field`'s key, as generated."""
    cut = completion.text.index(json.dumps(field) + ":") + len(json.dumps(field)) + 1
    written = completion.text[:cut].encode()
    for k in range(len(completion.tokens) + 1):
        if b"".join(map(model.token_piece, completion.tokens[:k])) == written:
            return completion.tokens[:k]
    raise AssertionError(f"no token boundary at {completion.text[:cut]!r}")


def check_fields_are_labels_on_the_same_prefix(model, ctx, prompts):
    result = ctx.generate_parallel(prompts, **GREEDY)
    for prompt, completion in zip(prompts, result):
        assert completion.finish_reason == "stop", completion.error
        assert text_error(check_constraints(SCHEMA, None, 1, None)[0], completion.text) is None
        assert set(completion.field_probs) == set(SCORED)
        for field, values in SCORED.items():
            probs = completion.field_probs[field]
            assert list(probs) == values and sum(probs.values()) == pytest.approx(1, abs=1e-9)
            # the value written is the most likely one, as a label would be
            assert json.dumps(completion.parsed[field]).strip('"') == max(probs, key=probs.get)
            written = [json.dumps(v) if field == "tone" else v for v in values]
            direct = ctx.generate(model.prompt_tokens(prompt) + value_prefix(model, completion, field),
                                  labels=written, temperature=0)
            for value, label in zip(values, written):
                assert probs[value] == pytest.approx(direct.label_probs[label], abs=1e-6)
    return result


def test_fields_are_scored_as_labels_on_the_answer_so_far(model):
    with nl.Context(model, n_ctx=512, n_seq_max=4) as ctx:
        check_fields_are_labels_on_the_same_prefix(model, ctx, PROMPTS[:4])


@pytest.mark.parametrize("head_dim", [16, 80])
def test_fields_on_a_model_of_an_unusual_shape(tmp_path, head_dim):
    path = write_tiny_model(tmp_path / f"head{head_dim}.gguf", seed=head_dim, head_dim=head_dim)
    with nl.Model(path) as model, nl.Context(model, n_ctx=512, n_seq_max=3) as ctx:
        check_fields_are_labels_on_the_same_prefix(model, ctx, PROMPTS[:3])


def test_fields_on_gemma(gemma):
    prompts = [f"Classify the text as JSON.\nText: {text}\nJSON:" for text in
               ("The king rode to the river.", "Prices rose by 3% in 1999.", "I love red apples.")]
    with nl.Context(gemma, n_ctx=512, n_seq_max=3) as ctx:
        result = check_fields_are_labels_on_the_same_prefix(gemma, ctx, prompts)
        assert result.stats.identity_guaranteed
        solo = [ctx.generate_parallel([p], **GREEDY)[0] for p in prompts]
        assert answers(solo) == answers(result)


def test_fields_on_gemma_after_a_long_shared_instruction_over_windows(gemma):
    # the users' case at realistic sizes: an instruction with worked examples of some 250
    # tokens (whole tiles of the tiled kernel, restored from the prefix cache), 14 texts
    # through the rounds in windows of 4 x n_seq_max = 12 (one boundary), each round going
    # on from the prompt's snapshot of the previous one
    worked = "".join(f"Text: {text}\nJSON: {answer}\n\n" for text, answer in [
        ("The queen opened the new bridge over the river.",
         '{"topic": "royalty", "relevant": true, "tone": "queen", "year": 12, "mentions": true}'),
        ("Wheat prices fell again after the harvest of 1987.",
         '{"topic": "markets", "relevant": false, "tone": "red", "year": 87, "mentions": false}'),
        ("The old king and his court rode north through the mountains at dawn.",
         '{"topic": "history", "relevant": true, "tone": "king", "year": 45, "mentions": true}'),
        ("Rivers and mountains cover most of the northern region of the country.",
         '{"topic": "geography", "relevant": false, "tone": "river mountain", "year": 3, "mentions": false}'),
    ])
    instruction = ("Code each text as JSON: its topic in a word, whether it is relevant to the monarchy, its "
                   "tone (king, queen, river mountain, red or re), a year from 0 to 99, and whether it mentions "
                   "a person.\n\n" + worked)
    texts = ["The king rode to the river.", "Prices rose by 3% in 1999.", "I love red apples.",
             "The queen spoke to parliament about the budget.", "A storm crossed the mountains last night.",
             "The prince visited a school in the north.", "Stocks of copper rose sharply this week.",
             "Her majesty's ship sailed from the harbour.", "Farmers expect a good harvest this year.",
             "The crown jewels were shown to visitors again.", "A new road links the two valleys.",
             "The royal family attended the ceremony.", "Rain is expected over the weekend.",
             "The king's speech was broadcast at noon."]
    prompts = [f"{instruction}Text: {text}\nJSON:" for text in texts]
    assert len(gemma.tokenize(instruction)) > 3 * TILE
    with nl.Context(gemma, n_ctx=1024, n_seq_max=3) as ctx:
        result = check_fields_are_labels_on_the_same_prefix(gemma, ctx, prompts)
        assert result.stats.identity_guaranteed and result.stats.cached_prompt_tokens > 0
    with nl.Context(gemma, n_ctx=1024, n_seq_max=1) as ctx:
        solo = [ctx.generate_parallel([p], **GREEDY)[0] for p in (prompts[0], prompts[-1])]
    assert answers(solo) == [answers(result)[0], answers(result)[-1]]


@pytest.mark.parametrize("n_seq_max", [1, 4])
def test_fields_in_a_batch_are_identical_to_solo(model, n_seq_max):
    with nl.Context(model, n_ctx=512, n_seq_max=n_seq_max) as ctx:
        batched = ctx.generate_parallel(PROMPTS, **GREEDY)
    with nl.Context(model, n_ctx=512, n_seq_max=1) as ctx:
        solo = [ctx.generate_parallel([p], **GREEDY)[0] for p in PROMPTS[:3]]
    assert answers(batched)[:3] == answers(solo)
    assert all(c.finish_reason == "stop" for c in batched)


def test_later_rounds_restore_each_prompt_from_the_prefix_cache(model):
    # each round's prompts are the previous round's, longer: a round restores each prompt's
    # own snapshot of the previous round instead of decoding the prompt and the answer so
    # far again, with the same answers as without the cache; the rounds go over windows
    # (of 4 x n_seq_max prompts here: 8 of 10 and 2) and leave no snapshot of a prompt's behind
    prompts = [" ".join(["Code the text below."] * 6) + " " + p for p in PROMPTS]  # a shared instruction
    with nl.Context(model, n_ctx=512, n_seq_max=2, prefix_cache=False) as ctx:
        cold = ctx.generate_parallel(prompts, **GREEDY)
    with nl.Context(model, n_ctx=512, n_seq_max=2) as ctx:
        warm = ctx.generate_parallel(prompts, **GREEDY)
        left = len(ctx._prefix_cache)
    assert answers(warm) == answers(cold)
    assert warm.stats.decoded_tokens < cold.stats.decoded_tokens / 10  # measured 5,100 against 101,200
    assert left == 1  # the instruction


def test_sampled_fields_are_reproducible(model):
    sampled = dict(GREEDY, temperature=1.0, seed=5)
    with nl.Context(model, n_ctx=512, n_seq_max=4) as ctx:
        first = ctx.generate_parallel(PROMPTS[:6], **sampled)
    with nl.Context(model, n_ctx=512, n_seq_max=2) as ctx:
        again = ctx.generate_parallel(PROMPTS[:6], **sampled)
    assert answers(first) == answers(again)
    assert all(c.finish_reason == "stop" for c in first)


def test_the_result_cache_gives_the_same_probabilities(ctx, tmp_path):
    cache = tmp_path / "answers.sqlite"
    first = ctx.generate_parallel(PROMPTS[:4], **GREEDY, cache=cache)
    again = ctx.generate_parallel(PROMPTS[:4], **GREEDY, cache=cache)
    assert again.stats.result_cache_hits == 4 and all(c.from_cache for c in again)
    assert answers(again) == answers(first)
    assert [c.parsed for c in again] == [c.parsed for c in first]
    # without field_probs the same schema is another answer
    assert ctx.generate_parallel(PROMPTS[:4], **dict(GREEDY, field_probs=False), cache=cache) \
        .stats.result_cache_hits == 0


def test_a_failing_prompt_fails_alone(model):
    prompts = [PROMPTS[0], "", "the " * 300, PROMPTS[1]]
    done = []
    with nl.Context(model, n_ctx=256, n_seq_max=4) as ctx:
        result = ctx.generate_parallel(prompts, **GREEDY, on_progress=lambda d, n: done.append((d, n)))
        alone = ctx.generate_parallel([PROMPTS[0], PROMPTS[1]], **GREEDY)
        # an answer cut off in a later round fails as the answer would, numbered as its prompt
        short = ctx.generate_parallel([PROMPTS[2], PROMPTS[0]], **dict(GREEDY, max_tokens=12))
    assert [c.finish_reason for c in result] == ["stop", "error", "error", "stop"]
    assert [c.error.index for c in result[1:3]] == [1, 2]
    assert answers([result[0], result[3]]) == answers(alone)
    assert done[-1] == (4, 4) and len(done) == 4
    assert all(isinstance(c.error, IncompleteOutputError) for c in short)
    assert [c.error.index for c in short] == [0, 1]


def test_other_prompts_and_schemas_without_such_fields_are_generated_as_without(ctx):
    plain = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}},
             "required": ["n"], "additionalProperties": False}
    mixed = ctx.generate_parallel(PROMPTS[:3], json_schema=[SCHEMA, plain, None], labels=[None, None, ["a", "b"]],
                                  field_probs=True, temperature=0, max_tokens=200)
    assert mixed[0].field_probs is not None
    assert mixed[1].field_probs is None and mixed[1].text == ctx.generate(PROMPTS[1], json_schema=plain,
                                                                           temperature=0, max_tokens=200).text
    assert mixed[2].label in ("a", "b") and mixed[2].field_probs is None


@pytest.mark.parametrize("change", [dict(required=["tone"]), dict(additionalProperties=True)])
def test_a_schema_whose_layout_is_not_fixed_is_refused(ctx, change):
    with pytest.raises(nl.InvalidArgumentError, match="field_probs"):
        ctx.generate_parallel(PROMPTS[:1], json_schema=dict(SCHEMA, **change), field_probs=True)


def test_scored_fields_writes_the_rounds_between_the_values():
    fields = scored_fields(SCHEMA)
    assert fields.names == ("relevant", "tone", "mentions")
    assert fields.texts[1][0] == '"king"' and fields.values[0] == ("true", "false")
    assert len(fields.rounds) == 4 and '"{\\"topic\\": " %json' in fields.rounds[0]
    assert scored_fields({"type": "object", "properties": {"n": {"type": "integer"}}}) is None
