"""Answers restricted to a set of labels, with the model's probability of each label.

A label's probability is the model's likelihood of the label's tokens as the
continuation of the prompt (the product over its tokens), summed over the two ways a
model writes it -- as it is, and after a space, as most tokenizers spell a word that
follows text -- and normalised over the labels. With temperature 0 the answer is the
most likely label (the first one on a tie); otherwise it is drawn from the
probabilities raised to 1 / temperature, with the prompt's own random stream.

Each (prompt, leading tokens of some spellings) pair is a scoring sequence: the
prompt followed by those tokens, which reads the log-probabilities of the possible
next label tokens from its final logits instead of sampling. Spellings that share
leading tokens share sequences (a trie), labels that are prefixes of others included,
and a prompt's sequences share the prompt itself through the prefix cache.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from .checks import per_prompt
from .errors import InvalidArgumentError
from .results import Completion
from .sequence import Sequence

Labels = tuple[str, ...]


def check_labels(labels: Any, n_prompts: int) -> list[Optional[Labels]]:
    """Each prompt's labels (or None): `labels` is None, one list of labels for every
    prompt, or a list with one list of labels (or None) per prompt."""
    checked: dict[int, Labels] = {}  # by the list given: labels given once are one tuple, not one per prompt

    def one(argument: str, value: Any) -> Labels:
        if id(value) not in checked:
            checked[id(value)] = _checked_labels(argument, value)
        return checked[id(value)]

    return [None if value is None else one(argument, value)
            for argument, value in per_prompt("labels", labels, n_prompts, _is_label_list, "a list of labels")]


def _is_label_list(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


def _checked_labels(name: str, labels: Any) -> Labels:
    if len(labels) < 2 or len(set(labels)) != len(labels) or not all(labels):
        raise InvalidArgumentError(name, labels, "at least two distinct, non-empty labels")
    return tuple(labels)


def label_spellings(label: str) -> tuple[str, str]:
    """The two ways a model writes a label: as it is, and after a space, as most
    tokenizers spell a word that follows text."""
    return (label, " " + label)


def every_spelling(labels: Labels) -> list[str]:
    """Every way of writing every label, once."""
    return list(dict.fromkeys(spelling for label in labels for spelling in label_spellings(label)))


Spelling = tuple[int, tuple[int, ...]]  # a label's position and the tokens of one way of writing it


def spelled_labels(labels: Labels, tokenize: Callable[[str], list[int]]) -> list[Spelling]:
    """Each distinct way of writing each label, as (label position, tokens)."""
    return list(dict.fromkeys(
        (i, tuple(tokens)) for i, label in enumerate(labels) for text in label_spellings(label)
        if (tokens := tokenize(text))
    ))


def label_probabilities(n_labels: int, spelling_logprobs: list[tuple[int, float]]) -> np.ndarray:
    """The labels' probabilities from (label position, log-likelihood of one of its
    spellings): each label's spellings summed, normalised over the labels."""
    probs = np.zeros(n_labels)
    for label, logprob in spelling_logprobs:
        probs[label] += np.exp(logprob)
    return probs / probs.sum()


class LabelPrompt:
    """One prompt with labels: the scoring sequences it needs, and the answer they give."""

    def __init__(self, index: int, prompt: list[int], labels: Labels, tokenize: Callable[[str], list[int]],
                 stop: tuple[str, ...]):
        self.index = index
        self.labels = labels
        self.n_prompt = len(prompt)
        self.spellings = spelled_labels(labels, tokenize)
        nodes: dict[tuple[int, ...], set[int]] = {}
        for _, tokens in self.spellings:
            for j in range(len(tokens)):
                nodes.setdefault(tokens[:j], set()).add(tokens[j])
        self.sequences = []
        for node, next_tokens in nodes.items():
            sequence = Sequence(index, prompt + list(node), stop)
            sequence.score_tokens = sorted(next_tokens)
            self.sequences.append(sequence)
        self._by_node = {tuple(s.tokens[self.n_prompt:]): s for s in self.sequences}
        # the sequence of the prompt alone, whose last token's state the first label token is read from
        self.root = self._by_node[()]

    def completion(self, temperature: float, generator: np.random.Generator) -> Completion:
        failed = next((s for s in self.sequences if s.finish_reason == "error"), None)
        if failed is not None:
            return Completion("", [], self.n_prompt, 0, 0, "error", failed.error)
        probs = label_probabilities(len(self.labels), [
            (label, sum(self._by_node[tokens[:j]].scores[t] for j, t in enumerate(tokens)))
            for label, tokens in self.spellings
        ])
        label = self.labels[pick_label(probs, temperature, generator)]
        return Completion(
            text=label, tokens=[], n_prompt_tokens=self.n_prompt, n_tokens=0,
            n_cached_tokens=min(s.n_restored for s in self.sequences), finish_reason="stop",
            label=label, label_probs=dict(zip(self.labels, probs.tolist())), hidden_state=self.root.hidden_state,
        )


def pick_label(probs: np.ndarray, temperature: float, generator: np.random.Generator) -> int:
    """The chosen label's position: the most likely (the first on a tie) with temperature 0,
    else drawn from `probs` raised to 1 / temperature with the prompt's own random stream."""
    if temperature == 0:
        return int(probs.argmax())
    cumulative = np.cumsum(probs ** (1.0 / temperature))
    return min(int((cumulative <= generator.random() * cumulative[-1]).sum()), len(probs) - 1)


def score(sequences: list[Sequence], logits: np.ndarray) -> None:
    """Record each scoring sequence's log-probabilities of its wanted next tokens (one row of logits each)."""
    for sequence, row in zip(sequences, logits):
        row = row.astype(np.float64)
        peak = row.max()
        log_total = peak + np.log(np.exp(row - peak).sum())
        sequence.scores = {t: float(row[t] - log_total) for t in sequence.score_tokens}
        sequence.finish("stop")
