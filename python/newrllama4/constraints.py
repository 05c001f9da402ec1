"""Answers constrained by a JSON schema or a grammar, token by token.

Before each draw, a constrained sequence's logits keep only the tokens its grammar
allows next (the others become -inf), so the text it writes is always a prefix of a
valid answer; the answer is complete when the grammar is (a JSON value ends as soon
as its closing bracket is written; an open-ended grammar ends when the model picks an
end-of-generation token that the grammar then allows). An answer that max_tokens,
n_ctx or a stop string cuts short is incomplete: that prompt fails alone with
IncompleteOutputError, never passing as valid.

The grammars are llguidance's (PyPI `llguidance`, Rust, no torch): it compiles JSON
schemas and GBNF, bridges to llama.cpp's vocabulary, and fills the token masks of a
whole batch at once, where llama.cpp's own grammar sampler walks every candidate
of the vocabulary (262k for Gemma) for every token. xgrammar would need
torch. A mask depends on nothing but the sequence's own tokens, so constrained
answers keep every guarantee of the unconstrained ones.

JSON is written compactly in the style of Python's json.dumps (", " between items,
": " after keys, no other whitespace outside strings): models write it that way, and
free whitespace would let a small model pad an answer with newlines until max_tokens.
"""

from __future__ import annotations

import functools
import json
import threading
import warnings
import weakref
from dataclasses import dataclass
from typing import Any, Optional

import llguidance
import llguidance.llamacpp
import llguidance.numpy
import numpy as np

from .checks import per_prompt
from .errors import ConstraintError, IncompleteOutputError, InvalidArgumentError
from .model import Model

JSON_STYLE = {"item_separator": ", ", "key_separator": ": ", "whitespace_flexible": False}


@dataclass(frozen=True)
class Constraint:
    """One prompt's constraint: `kind` is the argument it came from, `grammar` llguidance's form of it."""

    kind: str  # "json_schema" or "grammar"
    grammar: str
    source: Any  # the schema (a dict) or the GBNF text, as a server is sent it
    # with `field_probs`: the fields a JSON schema scores and how (field_probs.ScoredFields)
    fields: Any = None

    @property
    def parses_json(self) -> bool:
        return self.kind == "json_schema"


def check_constraints(json_schema: Any, grammar: Any, n_prompts: int,
                      model: Optional[Model]) -> list[Optional[Constraint]]:
    """One constraint (or None) per prompt, each compiled and validated against the model's
    vocabulary; without a model (for a server, which checks it against its own), compiled only.

    `json_schema` is a schema (a dict or a JSON string) for every prompt, or a list with
    one schema (or None) per prompt; `grammar` likewise with GBNF strings."""
    schemas = per_prompt("json_schema", json_schema, n_prompts, lambda v: isinstance(v, (dict, str)),
                          "a JSON schema (a dict or a JSON string)")
    grammars = per_prompt("grammar", grammar, n_prompts, lambda v: isinstance(v, str), "a GBNF grammar string")
    compiled: dict[tuple[str, str], Constraint] = {}  # one schema for 5,000 prompts compiles once
    constraints: list[Optional[Constraint]] = []
    for (schema_name, schema), (grammar_name, gbnf) in zip(schemas, grammars):
        if schema is not None and gbnf is not None:
            raise InvalidArgumentError(grammar_name, gbnf, f"None where {schema_name} is given: one constraint per prompt")
        kind, name, value = ("json_schema", schema_name, schema) if schema is not None else ("grammar", grammar_name, gbnf)
        if value is None:
            constraints.append(None)
            continue
        key = (kind, value if isinstance(value, str) else json.dumps(value, sort_keys=True))
        if key not in compiled:
            compiled[key] = _compile(kind, name, value, None if model is None else tokenizer(model))
        constraints.append(compiled[key])
    return constraints


def _compile(kind: str, name: str, value: Any, vocabulary: Optional[Any]) -> Constraint:
    try:
        if kind == "json_schema":
            if isinstance(value, str):
                value = json.loads(value)
            if not isinstance(value, dict):
                raise ValueError("a JSON schema is a JSON object")
            grammar = llguidance.LLMatcher.grammar_from_json_schema(value, overrides=JSON_STYLE)
        else:
            grammar = llguidance.grammar_from("gbnf", value)
    except ValueError as exc:  # json.JSONDecodeError is one
        raise InvalidArgumentError(name, value, f"a valid {_WHAT[kind]} ({exc})") from None
    if vocabulary is not None:
        is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar, vocabulary)
        if is_error:
            raise InvalidArgumentError(name, value, f"a valid {_WHAT[kind]} ({messages[0]})")
    return Constraint(kind, grammar, value)


_WHAT = {"json_schema": "JSON schema", "grammar": "GBNF grammar"}


def text_error(constraint: Constraint, text: str) -> Optional[str]:
    """Why `text` is not an answer `constraint` accepts, or None if it is.

    For answers written elsewhere (a server's structured outputs may enforce less than
    the schema says): checked byte by byte against llguidance's grammar of the same
    schema or GBNF, with JSON's whitespace left free since a server writes its own."""
    if constraint.parses_json:
        text = text.strip()
    written = text.encode("utf-8")
    matcher = llguidance.LLMatcher(_bytes_tokenizer(), _written_anywhere(constraint), log_level=0)
    for position, byte in enumerate(written):
        if not matcher.consume_token(byte):
            return (f"{written[position:position + 1].decode('utf-8', 'backslashreplace')!r} after "
                    f"{written[max(0, position - 40):position].decode('utf-8', 'backslashreplace')!r}")
    return None if matcher.is_accepting() else "it ends before it is complete"


class _Bytes:
    """A vocabulary of the 256 bytes (and an end token), to match any text against a grammar."""

    tokens = [bytes([b]) for b in range(256)] + [b"<end>"]
    eos_token_id = 256
    bos_token_id = None

    def __call__(self, text: Any) -> list[int]:
        return list(text if isinstance(text, bytes) else text.encode("utf-8"))


@functools.lru_cache(maxsize=1)
def _bytes_tokenizer() -> Any:
    return llguidance.LLTokenizer(llguidance.TokenizerWrapper(_Bytes()))


def _written_anywhere(constraint: Constraint) -> str:
    if not constraint.parses_json:
        return constraint.grammar
    source = constraint.source  # keys unsorted: a schema's properties are written in its order
    return _json_any_whitespace(source if isinstance(source, str) else json.dumps(source))


@functools.lru_cache(maxsize=64)
def _json_any_whitespace(schema: str) -> str:
    return llguidance.LLMatcher.grammar_from_json_schema(json.loads(schema), overrides={"whitespace_flexible": True})


_tokenizers: "weakref.WeakKeyDictionary[Model, Any]" = weakref.WeakKeyDictionary()
_tokenizers_lock = threading.Lock()
_executor: Optional[Any] = None


def tokenizer(model: Model) -> Any:
    """llguidance's view of the model's vocabulary: built once per model (about 2 s for 262k
    tokens). Every end-of-generation token ends an answer the grammar has completed."""
    with _tokenizers_lock:
        if model not in _tokenizers:
            vocab = model.vocab()
            ends = [t for t in range(model.n_vocab) if model.is_eog(t)]
            with warnings.catch_warnings():  # the bridge calls a llama.cpp function deprecated by name only
                warnings.simplefilter("ignore", DeprecationWarning)
                _tokenizers[model] = llguidance.llamacpp.lltokenizer_from_vocab(vocab, eos_token=ends)
        return _tokenizers[model]


def _shared_executor() -> Any:
    global _executor
    if _executor is None:
        _executor = llguidance.LLExecutor()
    return _executor


class ConstrainedAnswer:
    """A sequence's progress through its constraint: which tokens may come next, and whether it is complete."""

    def __init__(self, constraint: Constraint, model: Model):
        self.constraint = constraint
        self.matcher = llguidance.LLMatcher(tokenizer(model), constraint.grammar)
        self.complete = False
        self.refusal: Optional[str] = None

    def advance(self, token: int) -> bool:
        """Take the sampled token; return True when the answer has ended: complete, or (a
        bug, since masks only offer allowed tokens) refused by the matcher."""
        if not self.matcher.consume_token(token):
            self.refusal = self.matcher.get_error() or f"token {token} is not allowed here"
            return True
        self.complete = self.matcher.is_stopped()
        return self.complete

    def end(self) -> None:
        """The model ended the answer with an end-of-generation token, which masks allow only where it is complete."""
        self.complete = self.matcher.is_accepting()

    def result(self, index: int, text: str, n_tokens: int, finish_reason: str,
               cut: bool) -> tuple[Any, Optional[Exception]]:
        """The answer's parsed value and, for an incomplete one, its error; `cut`: by a stop string."""
        if finish_reason == "error":
            return None, None
        if self.refusal is not None:
            return None, ConstraintError(index, f"was refused by its {self.constraint.kind}: {self.refusal}")
        if cut or not self.complete:
            return None, IncompleteOutputError(index, self.constraint.kind, n_tokens, finish_reason)
        if not self.constraint.parses_json:
            return None, None
        try:
            return json.loads(text), None
        except ValueError as exc:  # the grammar and json disagree: a bug, but only this prompt's
            return None, ConstraintError(index, f"wrote JSON that does not parse ({exc}).")


def mask_logits(logits: np.ndarray, rows: list[int], answers: list[ConstrainedAnswer]) -> None:
    """Set to -inf, in place, every logit of row `rows[j]` that `answers[j]` does not allow next.

    A row usually allows either a few tokens (JSON punctuation, a key, an enum value) or
    nearly all (inside a string), so each row is rewritten from whichever set is smaller,
    found word by word in the bitmask; never a pass of Python over the vocabulary."""
    n_vocab = logits.shape[1]
    bitmask = llguidance.numpy.allocate_token_bitmask(len(rows), n_vocab)
    llguidance.numpy.fill_next_token_bitmask_par(
        _shared_executor(), [(a.matcher, j) for j, a in enumerate(answers)], bitmask
    )
    for row, words in zip(rows, bitmask):
        some_allowed = np.flatnonzero(words)
        some_refused = np.flatnonzero(words != -1)
        if len(some_allowed) <= len(some_refused):
            allowed = _token_ids(some_allowed, words, True, n_vocab)
            kept = logits[row, allowed]
            logits[row].fill(-np.inf)
            logits[row, allowed] = kept
        else:
            logits[row, _token_ids(some_refused, words, False, n_vocab)] = -np.inf


def _token_ids(word_ids: np.ndarray, words: np.ndarray, bit: bool, n_vocab: int) -> np.ndarray:
    """The ids of the tokens whose bit equals `bit` within the given 32-bit words of a mask."""
    bits = np.unpackbits(words[word_ids].view(np.uint8).reshape(-1, 4), axis=1, bitorder="little")
    ids = (word_ids[:, None] * 32 + np.arange(32))[bits.astype(bool) == bit]
    return ids[ids < n_vocab]
