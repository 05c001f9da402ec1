"""Labels on servers, with the probabilities the local engine gives them where a server allows.

A server's answer restricted to the labels does not give them: llama-server reports top
log-probabilities before its grammar applies, and a grammar spells the answer in
whatever tokens the model picks ('p' + 'oli' for 'politics'), not the label's own
tokenization. So each label is scored instead (LabelScoring), as the engine scores it locally: the
log-likelihood of each spelling's own tokens (the label as it is, and after a space) as
the continuation of the prompt's tokens, the spellings of a label summed and the sums
normalised over the labels. A prompt's requests go together; the server's prompt cache
shares the prompt between them.

Each server has its own way (dialects.py), on endpoints beside its OpenAI API root (not under /v1):

- llama.cpp's llama-server: `/tokenize` gives the prompt's tokens (`/apply-template`
  first lays out a conversation with the model's chat template, as its chat endpoint
  does) and each spelling's; one `/completion` per spelling then generates exactly the
  spelling's tokens -- a grammar of token ids (`<[id]>`) forces them -- with `n_probs`
  and `post_sampling_probs: false`, so that each generated token comes with its
  log-probability from the raw logits (a softmax over the whole vocabulary, before the
  grammar and the samplers).
- vLLM: `/tokenize` (of a text, or of a conversation under the model's chat template),
  then one `/v1/completions` per spelling whose prompt is the prompt's tokens followed
  by the spelling's, with `prompt_logprobs`: the log-probability of every prompt token
  given the ones before it, from which the spelling's are read.

Other servers with structured outputs get an answer restricted to the labels
(`label_grammar`), whose first token's top log-probabilities give each label's
probability (`label_probs`).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import httpx
import numpy as np

from ..labels import Labels, every_spelling, label_probabilities, label_spellings, spelled_labels


class ScoringResponseError(ValueError):
    """A scoring response that does not hold what was asked for."""


@dataclass(frozen=True)
class LabelScores:
    probs: np.ndarray  # one per label, summing to 1
    n_prompt_tokens: int
    n_cached_tokens: int  # the prompt tokens the server reused, in the request that reused fewest


class LabelScoring:
    """How one kind of server scores a token continuation; `label_scores` does the rest."""

    # whether it also generates on token ids under a grammar, returning tokens, as
    # `field_probs` needs (remote/fields.py)
    scores_fields = False

    def __init__(self, client: httpx.AsyncClient, base_url: str, model: str):
        self.client = client
        self.base_url = base_url
        # the server's own endpoints sit beside its OpenAI API root
        self.root = base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url
        self.model = model

    async def prompt_tokens(self, prompt: Any) -> list[int]:
        """The tokens of a text, token ids or a conversation, as the engine renders them."""
        raise NotImplementedError

    async def label_tokens(self, text: str) -> list[int]:
        """A label spelling's tokens, as the engine tokenizes them: no BOS, no special tokens."""
        raise NotImplementedError

    async def continuation_logprob(self, prompt: list[int], continuation: list[int]) -> tuple[float, int]:
        """The log-likelihood of `continuation` after `prompt`, and the prompt tokens the server reused."""
        raise NotImplementedError

    async def label_scores(self, prompt: Any, labels: Labels) -> LabelScores:
        """The probability of each label as the continuation of `prompt`, as the engine computes it."""
        texts = every_spelling(labels)
        prompt_tokens, *spelt = await asyncio.gather(self.prompt_tokens(prompt), *map(self.label_tokens, texts))
        spellings = spelled_labels(labels, dict(zip(texts, spelt)).__getitem__)
        scored = await asyncio.gather(*(
            self.continuation_logprob(prompt_tokens, list(tokens)) for _, tokens in spellings
        ))
        return LabelScores(
            probs=label_probabilities(len(labels), [(label, logprob) for (label, _), (logprob, _) in
                                                    zip(spellings, scored)]),
            n_prompt_tokens=len(prompt_tokens),
            n_cached_tokens=min(cached for _, cached in scored),
        )


_GBNF_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _gbnf_literal(text: str) -> str:
    escaped = "".join(
        _GBNF_ESCAPES.get(c, c if c.isprintable() else f"\\U{ord(c):08X}") for c in text
    )
    return f'"{escaped}"'


def label_grammar(labels: Labels) -> str:
    """A GBNF grammar (llama.cpp's) whose sentences are the labels, each after an optional space."""
    return 'root ::= " "? (' + " | ".join(_gbnf_literal(label) for label in labels) + ")"


def answer_label(labels: Labels, text: str) -> Optional[str]:
    """The label a constrained answer spells, or None for an answer that is none of them."""
    if text in labels:
        return text
    if text.startswith(" ") and text[1:] in labels:
        return text[1:]
    return None


def label_probs(labels: Labels, first_top_logprobs: Sequence[tuple[str, float]]) -> Optional[np.ndarray]:
    """Each label's probability, from the top log-probabilities of the answer's first token.

    A top token whose text begins exactly one label (as it is or after a space) adds its
    probability to that label; tokens that begin several labels, or none, or carry no
    text (part of a UTF-8 character) are left out; the sums are normalised over the
    labels. For labels of one token each, all among the top tokens, this is the
    probability the local engine gives; otherwise an approximation. None when no top
    token begins a label.
    """
    written = [(i, spelling) for i, label in enumerate(labels) for spelling in label_spellings(label)]
    probs = np.zeros(len(labels))
    for text, logprob in first_top_logprobs:
        owners = {i for i, spelling in written if text and spelling.startswith(text)}
        if len(owners) == 1:
            probs[owners.pop()] += math.exp(logprob)
    total = probs.sum()
    return probs / total if total > 0 else None
