"""A probability for every categorical and boolean field of a JSON answer.

With `field_probs=True`, a JSON schema's top-level properties that are an `enum` of
strings or a `boolean` are scored as labels are (labels.py) at the point where their
value starts, and the answer goes on after the value picked; the other fields are
generated as without it.

Why this is exact and needs no change to the step loop: the JSON is written compactly
(constraints.py) and a schema scored here has every property required, in the order of
`properties`, and no others, so an answer is fixed text and the values, in order. It is
made in rounds, each a call of the engine on the prompt's token ids so far:

1. generate, under a grammar of the text up to and including the colon after the next
   scored field's key (the fields between generated under their own schemas, embedded
   in an llguidance Lark grammar as `%json{...}`);
2. score the field's values, written as JSON (`"neutral"`, `true`), as labels after
   those tokens: each value as it is and after a space (the compact style writes
   `": "`; a tokenizer may merge the space with the opening quote, so the cut is
   before the space), multi-token values over a trie, normalised over the values;
3. pick the value as labels are picked (the most likely at temperature 0, else drawn
   with the prompt's own random stream), append the tokens of `" " + value`, and go
   on with the next round; the last one writes the rest up to the closing brace.

The answer's tokens are the rounds' tokens as generated and appended, never text
tokenized again, so every round starts from exactly the tokens the answer holds, and a
field's probabilities are those `labels` gives on the prompt followed by the answer's
tokens up to the colon: tested to 1e-6. Each round is a batch-invariant call of its
own, so a prompt's answer does not depend on the others in the call. A prompt that
fails in a round fails alone and leaves the later rounds.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Callable, Optional

import llguidance
import numpy as np

from .call_driver import CallDriver, windows
from .constraints import JSON_STYLE, Constraint, text_error
from .errors import ConstraintError, IncompleteOutputError, InvalidArgumentError, PromptError, PromptTooLongError
from .labels import pick_label
from .results import Completion, ParallelResult, Stats
from .sampling import SamplingParams, sequence_generator


@dataclass(frozen=True)
class ScoredFields:
    """How a schema's answer is made in rounds: `rounds[k]` is the Lark grammar of the text
    before the value of field `names[k]` (and, last, of the text after the last value)."""

    names: tuple[str, ...]
    values: tuple[tuple[str, ...], ...]  # each field's values as reported: enum strings, "true"/"false"
    texts: tuple[tuple[str, ...], ...]  # the same values as JSON, the labels scored
    rounds: tuple[str, ...]
    # each round's text in order: literal strings and the schemas of the fields generated
    # between (with the JSON style), from which a server's grammar is made (remote/fields.py)
    pieces: tuple[tuple[Any, ...], ...] = ()


def scored_field_values(schema: Any) -> Optional[tuple[str, ...]]:
    """A property's values to score: its enum of strings, or a boolean's; None for the others."""
    if not isinstance(schema, dict) or "const" in schema:
        return None
    enum = schema.get("enum")
    if enum is None:
        return ("true", "false") if schema.get("type") == "boolean" else None
    if (isinstance(enum, list) and len(enum) >= 2 and all(isinstance(v, str) for v in enum)
            and len(set(enum)) == len(enum) and schema.get("type", "string") == "string"):
        return tuple(enum)
    return None


def scored_fields(schema: dict, argument: str = "json_schema") -> Optional[ScoredFields]:
    """The rounds of a schema's answer, or None when no top-level field is scored. A schema
    with such fields must fix its layout: an object whose properties are all required and
    the only ones (`additionalProperties: false`)."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return None
    scored = {name: values for name, p in properties.items() if (values := scored_field_values(p)) is not None}
    if not scored:
        return None
    if (schema.get("type", "object") != "object" or set(schema.get("required", [])) != set(properties)
            or schema.get("additionalProperties", True) is not False
            or any(k in schema for k in ("anyOf", "oneOf", "allOf", "patternProperties", "$ref"))):
        raise InvalidArgumentError(
            argument, schema,
            "with `field_probs`, an object schema whose properties are all required and the only ones "
            "(additionalProperties: false), so that each field's value starts at a known point",
        )
    definitions = {k: schema[k] for k in ("$defs", "definitions") if k in schema}
    rounds, pieces = [], ["{"]
    for position, (name, sub) in enumerate(properties.items()):
        if position:
            pieces.append(", ")
        key = json.dumps(name, ensure_ascii=False)
        if name in scored:
            pieces.append(key + ":")
            rounds.append(_merged(pieces))
            pieces = []
        else:
            pieces += [key + ": ", {**sub, **definitions}]
    rounds.append(_merged(pieces + ["}"]))
    return ScoredFields(
        names=tuple(scored), values=tuple(scored.values()),
        texts=tuple(tuple(v if properties[n].get("enum") is None else json.dumps(v, ensure_ascii=False) for v in vs)
                    for n, vs in scored.items()),
        rounds=tuple(map(_lark, rounds)), pieces=tuple(rounds),
    )


def _merged(pieces: list[Any]) -> tuple[Any, ...]:
    """Literal texts joined where they follow each other."""
    merged: list[Any] = []
    for piece in pieces:
        if isinstance(piece, str) and merged and isinstance(merged[-1], str):
            merged[-1] += piece
        elif piece != "":
            merged.append(piece)
    return tuple(merged)


def _lark(pieces: tuple[Any, ...]) -> str:
    """An llguidance Lark grammar of literal texts and embedded JSON schemas, in order."""
    items = [json.dumps(p, ensure_ascii=False) if isinstance(p, str) else "%json" + json.dumps(
        {**p, "x-guidance": JSON_STYLE}) for p in pieces]
    return llguidance.grammar_from("lark", "start: " + " ".join(items))


def with_scored_fields(constraints: list[Optional[Constraint]]) -> list[Optional[Constraint]]:
    """The constraints, a JSON schema's with the fields it scores (once per distinct schema)."""
    done: dict[int, Constraint] = {}
    out = []
    for c in constraints:
        if c is not None and c.parses_json and id(c) not in done:
            source = c.source if isinstance(c.source, dict) else json.loads(c.source)
            done[id(c)] = dataclasses.replace(c, fields=scored_fields(source))
        out.append(None if c is None else done.get(id(c), c))
    return out


# -- the rounds ---------------------------------------------------------------------------

# one engine call: prompts, labels, constraints, sampling, random streams -> completions; with
# keywords `to_continue` and `continuing` (engine.StepLoop) when the next call goes on from
# these prompts, or these from the previous call's
RunLoop = Callable[..., ParallelResult]


class Answer:
    """One prompt's answer on its way through the rounds."""

    def __init__(self, index: int, constraint: Constraint, seed: int):
        self.index = index
        self.constraint = constraint
        self.fields: ScoredFields = constraint.fields
        self.prompt: list[int] = []
        self.tokens: list[int] = []
        self.text = ""
        self.probs: dict[str, dict[str, float]] = {}
        self.generator = sequence_generator(seed, index)
        self.n_cached = 0
        self.failed: Optional[Completion] = None


def run_rounds(run: RunLoop, driver: CallDriver, prompts: list[Any], labels: list[Any],
               constraints: list[Optional[Constraint]], params: SamplingParams,
               prompt_tokens: Callable[[Any], list[int]], tokenize: Callable[[str], Optional[list[int]]],
               window: int) -> ParallelResult:
    """A call whose JSON schemas score fields: the prompts with scored fields in rounds,
    the others in the first round as they are. `driver` looks every prompt up in the
    result cache first and takes each window's answers; `prompt_tokens` renders a prompt
    as the engine does, `tokenize` gives the tokens that write a value after its colon
    (`writing`), None where none do.

    The prompts go through their rounds `window` at a time, a window through all its
    rounds before the next starts: between rounds each of its prompts keeps a snapshot of
    its KV in the prefix cache (to_continue / continuing), which the next round restores
    instead of decoding the prompt and the answer so far again, and a window bounds how
    many snapshots are held at once."""
    stats: list[Stats] = []
    first = driver.look_up(range(len(prompts)), lambda i: prompt_tokens(prompts[i]) or None)
    answers = {i: Answer(i, c, params.seed) for i in first
               if (c := constraints[i]) is not None and c.fields is not None}
    for indices in windows(first, window):
        for i, completion in _window(run, list(indices), prompts, labels, constraints, answers, params,
                                     prompt_tokens, tokenize, stats).items():
            driver.finish(i, completion)
    return driver.result(_combined(stats, params.seed, driver.completions))


def _window(run: RunLoop, indices: list[int], prompts: list[Any], labels: list[Any],
            constraints: list[Optional[Constraint]], answers: dict[int, Answer], params: SamplingParams,
            prompt_tokens: Callable[[Any], list[int]], tokenize: Callable[[str], Optional[list[int]]],
            stats: list[Stats]) -> dict[int, Completion]:
    """The completions of the prompts `indices`, through all their rounds."""
    mine = [answers[i] for i in indices if i in answers]
    done: dict[int, Completion] = {}
    # round 0: those with scored fields up to their first value
    result = run([prompts[i] for i in indices], [labels[i] for i in indices],
                 [_round_constraint(answers[i], 0) if i in answers else constraints[i] for i in indices],
                 params, [sequence_generator(params.seed, i) for i in indices], to_continue=bool(mine))
    stats.append(result.stats)
    for i, completion in zip(indices, result):
        if i in answers:
            answers[i].prompt = prompt_tokens(prompts[i]) if completion.finish_reason != "error" else []
            answers[i].n_cached = completion.n_cached_tokens
            _take_generated(answers[i], completion, params, 0)
        else:
            done[i] = completion if completion.error is None else dataclasses.replace(
                completion, error=_numbered(completion.error, i))
    for k in range(max((len(a.fields.names) for a in mine), default=0)):
        live = [a for a in mine if a.failed is None and k < len(a.fields.names)]
        if not live:
            continue
        scored = run([a.prompt + a.tokens for a in live], [a.fields.texts[k] for a in live], [None] * len(live),
                     params, [a.generator for a in live], to_continue=True, continuing=True)
        stats.append(scored.stats)
        for a, completion in zip(live, scored):
            _take_value(a, completion, params, k, tokenize)
        live = [a for a in live if a.failed is None]
        budget = max((params.max_tokens - len(a.tokens) for a in live), default=1)
        if live and budget > 0:
            grammars = [_round_constraint(a, k + 1) for a in live]
            generated = run([a.prompt + a.tokens for a in live], [None] * len(live), grammars,
                            dataclasses.replace(params, max_tokens=budget), [a.generator for a in live],
                            to_continue=any(k + 1 < len(a.fields.names) for a in live), continuing=True)
            stats.append(generated.stats)
            for a, completion in zip(live, generated):
                _take_generated(a, completion, params, k + 1)
        else:
            for a in live:
                fail(a, IncompleteOutputError(a.index, "json_schema", len(a.tokens), "length"))
    for a in mine:
        done[a.index] = a.failed if a.failed is not None else finished(a)
    return done


def _round_constraint(a: Answer, k: int) -> Constraint:
    return Constraint("grammar", a.fields.rounds[k], None)


def _take_generated(a: Answer, completion: Completion, params: SamplingParams, k: int) -> None:
    if completion.finish_reason == "error":
        fail(a, completion.error, k > 0)
        return
    a.tokens += completion.tokens
    a.text += completion.text
    if len(a.tokens) > params.max_tokens:
        fail(a, IncompleteOutputError(a.index, "json_schema", len(a.tokens), "length"))


def _take_value(a: Answer, completion: Completion, params: SamplingParams, k: int,
                tokenize: Callable[[str], Optional[list[int]]]) -> None:
    if completion.finish_reason == "error":
        fail(a, completion.error, True)
        return
    choose_value(a, np.array([completion.label_probs[t] for t in a.fields.texts[k]]), params, k, tokenize)


def choose_value(a: Answer, probs: np.ndarray, params: SamplingParams, k: int,
                 tokenize: Callable[[str], Optional[list[int]]]) -> None:
    """Pick field k's value from its probabilities as a label is picked, and write it."""
    texts, values = a.fields.texts[k], a.fields.values[k]
    chosen = pick_label(probs, params.temperature, a.generator)
    a.probs[a.fields.names[k]] = dict(zip(values, probs.tolist()))
    written = " " + texts[chosen]  # as the compact style writes it, after ": "
    tokens = tokenize(written)
    if tokens is None:
        fail(a, ConstraintError(a.index, f"cannot write {written!r} in the model's tokens."))
        return
    a.tokens += tokens
    a.text += written


def writing(text: str, tokenize: Callable[[str], list[int]], piece: Callable[[int], bytes]) -> Optional[list[int]]:
    """Tokens whose bytes are exactly `text`, which starts with a space: the tokens of the
    text, or of the text without its space where the tokenizer adds one (SentencePiece's
    space prefix); None if neither is."""
    for candidate in (text, text[1:]):
        tokens = tokenize(candidate)
        if b"".join(map(piece, tokens)) == text.encode("utf-8"):
            return tokens
    return None


def fail(a: Answer, error: Optional[BaseException], later_round: bool = False) -> None:
    """The prompt fails with `error`, numbered as the caller's prompt: a later round's
    prompt too long for the context is the answer cut off by n_ctx."""
    if later_round and isinstance(error, PromptTooLongError):
        error = IncompleteOutputError(a.index, "json_schema", len(a.tokens), "length")
    elif isinstance(error, IncompleteOutputError):  # a round's grammar cut off: the answer is
        error = IncompleteOutputError(a.index, "json_schema", len(a.tokens) + error.n_tokens,
                                      "stop" if "stop string" in str(error) else "length")
    a.failed = Completion("", [], len(a.prompt), len(a.tokens), 0, "error", _numbered(error, a.index))


def _numbered(error: Optional[BaseException], index: int) -> Optional[BaseException]:
    """A round's error of a prompt, numbered as the caller's prompt `index`."""
    if isinstance(error, PromptError) and error.index != index:
        error = copy.copy(error)
        error.index = index
        error.args = (f"Prompt {index} {error.detail}",)
    return error


def finished(a: Answer) -> Completion:
    problem = text_error(a.constraint, a.text)
    if problem is not None:  # the rounds and the schema disagree: a bug, but only this prompt's
        return Completion("", [], len(a.prompt), len(a.tokens), 0, "error",
                          ConstraintError(a.index, f"wrote an answer its json_schema refuses ({problem})."))
    return Completion(
        text=a.text, tokens=a.tokens, n_prompt_tokens=len(a.prompt), n_tokens=len(a.tokens),
        n_cached_tokens=a.n_cached, finish_reason="stop", parsed=json.loads(a.text), field_probs=a.probs,
    )


def _combined(stats: list[Stats], seed: int, completions: list[Optional[Completion]]) -> Stats:
    """One call's stats from its rounds' (none when the result cache answered every prompt)."""
    total = Stats(seed=seed)
    for s in stats:
        for f in ("prompt_tokens", "cached_prompt_tokens", "prefill_seconds", "decode_seconds", "sample_seconds",
                  "request_seconds", "llama_decode_calls", "decoded_tokens", "retries",
                  "prefix_snapshots", "prefix_copied_bytes"):
            setattr(total, f, getattr(total, f) + getattr(s, f))
        total.peak_active_sequences = max(total.peak_active_sequences, s.peak_active_sequences)
    if stats:
        total.prefix_cache_bytes, total.prefix_cache_snapshots = stats[-1].prefix_cache_bytes, stats[-1].prefix_cache_snapshots
    total.generated_tokens = sum(c.n_tokens for c in completions if c is not None and not c.from_cache)
    return total
