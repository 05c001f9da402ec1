"""Answers constrained by a JSON schema or a GBNF grammar (constraints.py), on the tiny model.

Its random weights make every answer a random walk through what the constraint allows:
a harder test of the masks than a model that already writes the expected shape."""

import json
import re

import llguidance.numpy
import numpy as np
import pytest

import newrllama4 as nl
from newrllama4.constraints import ConstrainedAnswer, check_constraints, mask_logits, text_error, tokenizer

from conftest import random_prompts

SCHEMA = {
    "type": "object",
    "properties": {
        "stance": {"enum": ["for", "against", "neutral"]},
        "year": {"type": "integer", "minimum": 1900, "maximum": 2030},
        "party": {"type": "string", "maxLength": 12},
        "sure": {"type": "boolean"},
    },
    "required": ["stance", "year", "party", "sure"],
    "additionalProperties": False,
}
LIST_GRAMMAR = 'root ::= "(" word ("," word){0,3} ")"\nword ::= [a-z]{1,4}'
LIST_PATTERN = re.compile(r"\([a-z]{1,4}(,[a-z]{1,4}){0,3}\)")


def conforms(value):
    return (
        isinstance(value, dict) and set(value) == {"stance", "year", "party", "sure"}
        and value["stance"] in ("for", "against", "neutral")
        and type(value["year"]) is int and 1900 <= value["year"] <= 2030
        and isinstance(value["party"], str) and len(value["party"]) <= 12
        and isinstance(value["sure"], bool)
    )


def test_every_json_answer_is_valid_json_that_conforms(model):
    with nl.Context(model, n_ctx=512, n_seq_max=8) as ctx:
        result = ctx.generate_parallel(random_prompts(24, seed=3), max_tokens=120, temperature=1.0, json_schema=SCHEMA)
    assert [c.finish_reason for c in result] == ["stop"] * 24
    for completion in result:
        assert completion.parsed == json.loads(completion.text)
        assert conforms(completion.parsed), completion.text
    assert len({c.text for c in result}) > 12  # sampled, not one answer for all


def test_a_schema_given_as_a_json_string_is_the_same_schema(ctx):
    prompts = random_prompts(4, seed=4)
    as_dict = ctx.generate_parallel(prompts, max_tokens=120, temperature=0, json_schema=SCHEMA)
    as_text = ctx.generate_parallel(prompts, max_tokens=120, temperature=0, json_schema=json.dumps(SCHEMA))
    assert [c.text for c in as_dict] == [c.text for c in as_text]


def test_every_grammar_answer_is_in_the_grammars_language(ctx):
    result = ctx.generate_parallel(random_prompts(16, seed=5), max_tokens=60, temperature=1.0, grammar=LIST_GRAMMAR)
    for completion in result:
        assert completion.finish_reason == "stop"
        assert LIST_PATTERN.fullmatch(completion.text), completion.text
        assert completion.parsed is None
    assert len({c.text for c in result}) > 3


def test_an_open_ended_grammar_ends_where_the_model_ends_it(ctx):
    # the answer may stop after any digit: it ends when the model picks an end-of-generation token
    result = ctx.generate_parallel(random_prompts(16, seed=6), max_tokens=40, temperature=1.5,
                                   grammar='root ::= [0-9]+ | "none"')
    for completion in result:
        if completion.finish_reason == "stop":
            assert re.fullmatch(r"[0-9]+|none", completion.text), completion.text
        else:
            assert isinstance(completion.error, nl.IncompleteOutputError)


def test_an_answer_cut_off_by_max_tokens_fails_alone_as_incomplete(ctx):
    prompts = random_prompts(3, seed=7)
    result = ctx.generate_parallel(prompts, max_tokens=4, temperature=0, json_schema=[SCHEMA, None, SCHEMA])
    assert [c.finish_reason for c in result] == ["error", "length", "error"]
    error = result[0].error
    assert isinstance(error, nl.IncompleteOutputError) and isinstance(error, nl.PromptError)
    assert (error.index, error.constraint, error.n_tokens) == (0, "json_schema", 4)
    assert "max_tokens" in str(error) and result[0].parsed is None


def test_an_answer_cut_by_a_stop_string_is_incomplete(ctx):
    result = ctx.generate_parallel(random_prompts(2, seed=8), max_tokens=120, temperature=0, json_schema=SCHEMA,
                                   stop='"')
    for completion in result:
        assert completion.finish_reason == "error"
        assert "stop string" in str(completion.error)


def test_constrained_greedy_answers_in_a_batch_are_token_identical_to_solo(model):
    prompts = random_prompts(10, seed=9)
    constraints = dict(json_schema=[SCHEMA, None] * 5, grammar=[None, LIST_GRAMMAR] * 5)
    with nl.Context(model, n_ctx=512, n_seq_max=4) as ctx:
        batched = ctx.generate_parallel(prompts, max_tokens=60, temperature=0, penalty_repeat=1.1, **constraints)
    with nl.Context(model, n_ctx=512, n_seq_max=1) as ctx:
        solo = [
            ctx.generate(p, max_tokens=60, temperature=0, penalty_repeat=1.1, json_schema=s, grammar=g)
            for p, s, g in zip(prompts, constraints["json_schema"], constraints["grammar"])
        ]
    assert [c.tokens for c in batched] == [c.tokens for c in solo]
    assert sum(c.finish_reason == "stop" for c in batched) >= 5


def test_seeded_constrained_sampling_is_reproducible_and_independent_of_n_seq_max(model):
    prompts = random_prompts(8, seed=10)
    texts = []
    for n_seq_max in (1, 3, 8, 8):
        with nl.Context(model, n_ctx=512, n_seq_max=n_seq_max) as ctx:
            result = ctx.generate_parallel(prompts, max_tokens=120, temperature=0.9, top_k=5, seed=42,
                                           json_schema=SCHEMA)
        texts.append([c.text for c in result])
    assert texts[0] == texts[1] == texts[2] == texts[3]


def test_each_prompt_follows_its_own_constraint_in_one_call(ctx):
    prompts = random_prompts(5, seed=11)
    result = ctx.generate_parallel(
        prompts, max_tokens=120, temperature=0.7,
        json_schema=[SCHEMA, None, None, {"type": "integer", "minimum": 0, "maximum": 999}, None],
        grammar=[None, 'root ::= "yes" | "no"', None, None, None],
        labels=[None, None, ["left", "right"], None, None],
    )
    assert conforms(result[0].parsed)
    assert result[1].text in ("yes", "no")
    assert result[2].label in ("left", "right") and sum(result[2].label_probs.values()) == pytest.approx(1)
    assert type(result[3].parsed) is int
    assert result[4].parsed is None and result[4].label is None  # free text


@pytest.mark.parametrize("arguments, name, says", [
    (dict(json_schema={"type": "objekt"}), "json_schema", "objekt"),
    (dict(json_schema="{not json"), "json_schema", "JSON schema"),
    (dict(json_schema=["not", "a", "schema"]), "json_schema", "one per prompt"),
    (dict(json_schema=[None, {"type": "string", "pattern": "(["}]), "json_schema[1]", "JSON schema"),
    (dict(json_schema=42), "json_schema", "a JSON schema"),
    (dict(grammar="root ::= word"), "grammar", "word"),
    (dict(grammar='root ::= "a" (('), "grammar", "GBNF"),
    (dict(grammar=[None, None, "x"]), "grammar", "one per prompt"),
    (dict(grammar='root ::= "a"', json_schema=SCHEMA), "grammar", "one constraint per prompt"),
    (dict(labels=["a", "b"], json_schema=SCHEMA), "labels", "one constraint per prompt"),
])
def test_a_bad_constraint_is_an_invalid_argument_before_any_decoding(ctx, arguments, name, says):
    progress = []
    with pytest.raises(nl.InvalidArgumentError) as caught:
        ctx.generate_parallel(["one", "two"], max_tokens=8, on_progress=lambda *a: progress.append(a), **arguments)
    assert caught.value.argument == name
    assert says in str(caught.value)
    assert progress == [] and ctx.cached_tokens() == 0


def test_one_schema_for_many_prompts_compiles_once(model):
    constraints = check_constraints(SCHEMA, None, 100, model)
    assert len({id(c) for c in constraints}) == 1


@pytest.mark.parametrize("grammar", [
    'root ::= "yes" | "no" | "maybe"',  # a few tokens allowed: the row is rebuilt from them
    'root ::= [^"]* "."',  # nearly every token allowed: only the refused ones are set to -inf
])
def test_masking_keeps_exactly_the_allowed_tokens(model, grammar):
    answers = [ConstrainedAnswer(check_constraints(None, grammar, 1, model)[0], model) for _ in range(2)]
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((5, model.n_vocab)).astype(np.float32)
    bitmask = llguidance.numpy.allocate_token_bitmask(2, model.n_vocab)
    for j in range(2):
        llguidance.numpy.fill_next_token_bitmask(answers[j].matcher, bitmask, j)
    reference = logits.copy()
    masked_rows = reference[[1, 3]]
    llguidance.numpy.apply_token_bitmask_inplace(masked_rows, bitmask)  # llguidance's own, slow masking
    reference[[1, 3]] = masked_rows
    mask_logits(logits, [1, 3], answers)
    np.testing.assert_array_equal(logits, reference)
    allowed = np.isfinite(logits[1]).sum()
    assert 0 < allowed < model.n_vocab


def test_the_vocabulary_bridge_is_built_once_per_model(model):
    assert tokenizer(model) is tokenizer(model)


# -- on the default model (Gemma 3 270M), at the size of a real annotation job ----------

INSTRUCTION = (
    "You read short statements from a survey about public policy. For each, give the stance of "
    "the speaker towards the policy (for, against or neutral), the year the statement mentions, "
    "and the party of the speaker if the statement names one, else an empty string. "
    "Answer with one JSON object.\n\n"
    'Statement: "As a Green, I fully back the 2015 climate levy."\n'
    'Answer: {"stance": "for", "year": 2015, "party": "Green", "sure": true}\n\n'
    'Statement: "The 1998 reform was a disaster for farmers, says the Labour member."\n'
    'Answer: {"stance": "against", "year": 1998, "party": "Labour", "sure": true}\n\n'
    'Statement: "I have no view on the 2004 tax change."\n'
    'Answer: {"stance": "neutral", "year": 2004, "party": "", "sure": false}\n\n'
)
STATEMENTS = [
    "Our Liberal group will vote for the 2021 housing plan.", "The 1979 budget ruined small shops.",
    "Nobody I know cares about the 2012 rail bill.", "The Conservatives were right to cut taxes in 2019.",
    "In 2008 the bank rescue saved my job.", "The 1990 water law was written badly.",
    "Socialists welcome the 2023 pension increase.", "I am unsure about the 2017 school reform.",
    "The 2001 airport expansion should never have happened.", "As a farmer I liked the 1995 subsidy.",
    "Greens oppose the 2022 motorway.", "The 2010 census was fine, I suppose.",
    "Labour's 2005 health plan worked well.", "The 1985 strike law hurt workers.",
    "Maybe the 2016 vote was a mistake, maybe not.", "Centrists backed the 2009 stimulus.",
]


@pytest.fixture(scope="module")
def statement_prompts():
    return [f'{INSTRUCTION}Statement: "{s}"\nAnswer: ' for s in STATEMENTS]


@pytest.mark.slow
def test_gemma_json_answers_conform_and_match_solo_with_prefix_reuse(gemma, statement_prompts):
    with nl.Context(gemma, n_ctx=1024, n_seq_max=8) as ctx:
        batched = ctx.generate_parallel(statement_prompts, max_tokens=48, temperature=0, json_schema=SCHEMA)
        assert batched.stats.cached_prompt_tokens > 0  # the instruction was decoded once
    with nl.Context(gemma, n_ctx=1024, n_seq_max=1, prefix_cache=False) as ctx:
        solo = [ctx.generate(p, max_tokens=48, temperature=0, json_schema=SCHEMA) for p in statement_prompts]
    assert [c.tokens for c in batched] == [c.tokens for c in solo]
    for completion, statement in zip(batched, STATEMENTS):
        assert completion.finish_reason == "stop" and conforms(completion.parsed), completion.text
    # a working model, not only a valid shape: it reads most years off the statement
    assert sum(str(c.parsed["year"]) in s for c, s in zip(batched, STATEMENTS)) >= 12


@pytest.mark.slow
def test_gemma_seeded_constrained_sampling_is_independent_of_n_seq_max(gemma, statement_prompts):
    runs = []
    for n_seq_max in (8, 3):
        with nl.Context(gemma, n_ctx=1024, n_seq_max=n_seq_max) as ctx:
            result = ctx.generate_parallel(statement_prompts[:9], max_tokens=48, temperature=0.8, seed=7,
                                           json_schema=SCHEMA, grammar=None)
        runs.append([c.text for c in result])
        assert all(conforms(c.parsed) for c in result)
    assert runs[0] == runs[1]


@pytest.mark.slow
def test_gemma_grammar_answers_are_in_the_language(gemma, statement_prompts):
    grammar = 'root ::= ("for" | "against" | "neutral") ", because " [a-z ,]{1,60} "."'
    with nl.Context(gemma, n_ctx=1024, n_seq_max=8) as ctx:
        result = ctx.generate_parallel(statement_prompts[:8], max_tokens=40, temperature=0, grammar=grammar)
    pattern = re.compile(r"(for|against|neutral), because [a-z ,]{1,60}\.")
    assert all(c.finish_reason == "stop" and pattern.fullmatch(c.text) for c in result), [c.text for c in result]


# -- on the instruction model (SmolLM2 135M Instruct), prompts in its chat template -----

REVIEWS = [
    "Absolutely love this kettle, it boils in a minute.", "Broke after two days, waste of money.",
    "It is a toaster. It toasts.", "Best headphones I have ever owned!", "The lamp flickers and the seller ignored me.",
    "Arrived on time, does what it says.", "Terrible smell, returned it.", "My kids adore this game.",
    "Average quality for the price.", "The strap snapped on the first day.", "Five stars, would buy again.",
    "Neither good nor bad, just fine.",
]
REVIEW_SCHEMA = {
    "type": "object",
    "properties": {
        "sentiment": {"enum": ["positive", "negative", "neutral"]},
        "stars": {"type": "integer", "minimum": 1, "maximum": 5},
        "product": {"type": "string", "maxLength": 24},
    },
    "required": ["sentiment", "stars", "product"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def review_prompts(smollm2):
    return [smollm2.apply_chat_template([
        {"role": "system", "content": "You read product reviews and answer questions about them."},
        {"role": "user", "content": f"Review: {review}\nGive the sentiment, the stars (1-5) and the product."},
    ]) for review in REVIEWS]


@pytest.mark.slow
def test_instruction_model_json_answers_conform_and_match_solo(smollm2, review_prompts):
    with nl.Context(smollm2, n_ctx=512, n_seq_max=6) as ctx:
        batched = ctx.generate_parallel(review_prompts, max_tokens=64, temperature=0, json_schema=REVIEW_SCHEMA)
    with nl.Context(smollm2, n_ctx=512, n_seq_max=1, prefix_cache=False) as ctx:
        solo = [ctx.generate(p, max_tokens=64, temperature=0, json_schema=REVIEW_SCHEMA) for p in review_prompts]
    assert [c.tokens for c in batched] == [c.tokens for c in solo]
    for completion in batched:
        assert completion.finish_reason == "stop", completion.error
        value = completion.parsed
        assert set(value) == {"sentiment", "stars", "product"} and value["sentiment"] in ("positive", "negative", "neutral")
        assert type(value["stars"]) is int and 1 <= value["stars"] <= 5 and len(value["product"]) <= 24


@pytest.mark.slow
def test_instruction_model_seeded_json_and_grammar_answers_are_independent_of_n_seq_max(smollm2, review_prompts):
    grammar = 'root ::= ("good" | "bad" | "so-so") " - " [a-z ]{1,30} "."'
    per_prompt = dict(json_schema=[REVIEW_SCHEMA, None] * 6, grammar=[None, grammar] * 6)
    runs = []
    for n_seq_max in (6, 2):
        with nl.Context(smollm2, n_ctx=512, n_seq_max=n_seq_max) as ctx:
            result = ctx.generate_parallel(review_prompts, max_tokens=64, temperature=0.8, seed=11, **per_prompt)
        runs.append([c.text for c in result])
        assert all(c.finish_reason == "stop" for c in result), [c.error for c in result]
        assert all(re.fullmatch(r"(good|bad|so-so) - [a-z ]{1,30}\.", c.text) for c in result[1::2])
    assert runs[0] == runs[1]


@pytest.mark.slow
def test_instruction_model_labels_sum_to_one_and_greedy_is_the_argmax(smollm2, review_prompts):
    labels = ["positive", "negative", "neutral"]
    with nl.Context(smollm2, n_ctx=512, n_seq_max=6) as ctx:
        result = ctx.generate_parallel(review_prompts, temperature=0, labels=labels)
    for completion in result:
        assert completion.label in labels
        assert sum(completion.label_probs.values()) == pytest.approx(1.0)
        assert completion.label == max(labels, key=lambda label: completion.label_probs[label])
    # a working model: the clear reviews get their obvious label ("Five stars, would buy
    # again." is a coin flip for this model, 0.52 against 0.48, and flipped with the KV cache's rounding)
    assert [result[i].label for i in (0, 1, 3)] == ["positive", "negative", "positive"]


def test_text_error_checks_an_answer_written_elsewhere_against_the_schema_or_grammar():
    # properties out of alphabetical order: they are written in the schema's order
    schema = {"type": "object", "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 5},
                                               "mood": {"enum": ["happy", "angry"]}},
              "required": ["score", "mood"]}
    constraint = check_constraints(schema, None, 1, None)[0]
    assert text_error(constraint, '{"score": 3, "mood": "happy"}') is None
    assert text_error(constraint, '{\n  "score":3,\n  "mood":"angry"\n}\n') is None  # a server's whitespace
    assert text_error(constraint, '{"score": 35, "mood": "happy"}') == "'5' after '{\"score\": 3'"
    assert text_error(constraint, '{"score": 3, "mood": "sad"}') is not None
    assert text_error(constraint, '{"score": 3}') is not None
    assert text_error(constraint, '{"score": 3, "mood": "happy"') == "it ends before it is complete"
    grammar = check_constraints(None, 'root ::= "cat" | "dog" " house"?', 1, None)[0]
    assert text_error(grammar, "dog house") is None and text_error(grammar, "cat") is None
    assert text_error(grammar, "cat house") == "' ' after 'cat'"
    assert text_error(grammar, " cat") is not None  # a grammar's text is not stripped
