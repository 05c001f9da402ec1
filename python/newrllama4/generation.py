"""What every context offers: generate_parallel() and generate(), their arguments checked once.

Context runs the prompts on a local model, RemoteContext on OpenAI-compatible servers;
both take the same arguments and return the same ParallelResult.
"""

from __future__ import annotations

import threading
import warnings
from abc import ABC, abstractmethod
from contextlib import contextmanager
from typing import Any, Iterator, Optional, Sequence as SequenceType

from .call_driver import Progress
from .checks import check_bool, check_callable, check_prompts
from .constraints import Constraint, check_constraints
from .errors import ContextError, InvalidArgumentError
from .features import FeatureRequest, check_features
from .field_probs import with_scored_fields
from .labels import Labels, check_labels
from .model import Model
from .result_cache import check_cache_path
from .results import Completion, ParallelResult
from .sampling import SamplingParams


class Generator(ABC):
    @property
    @abstractmethod
    def closed(self) -> bool:
        """Whether close() was called (or the model it runs on was closed)."""

    @abstractmethod
    def close(self) -> None:
        """Free what the context holds. Safe to call twice."""

    def __enter__(self) -> "Generator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # whether `field_probs` can score a schema's fields here (field_probs.py)
    scores_fields = True

    def generate(self, prompt: Any, **params: Any) -> Completion:
        """Generate from one prompt: `generate_parallel` of a one-prompt list."""
        return self.generate_parallel([prompt], **params)[0]

    def generate_parallel(
        self,
        prompts: SequenceType[Any],
        max_tokens: int = SamplingParams.max_tokens,
        temperature: float = SamplingParams.temperature,
        top_k: int = SamplingParams.top_k,
        top_p: float = SamplingParams.top_p,
        min_p: float = SamplingParams.min_p,
        repeat_last_n: int = SamplingParams.repeat_last_n,
        penalty_repeat: float = SamplingParams.penalty_repeat,
        seed: Optional[int] = SamplingParams.seed,
        stop: Any = SamplingParams.stop,
        on_progress: Progress = None,
        labels: Any = None,
        json_schema: Any = None,
        grammar: Any = None,
        cache: Any = None,
        field_probs: bool = False,
        hidden_states: Any = False,
        feature_texts: Any = None,
        feature_layer: Optional[int] = None,
    ) -> ParallelResult:
        """Generate one completion per prompt, in prompt order. The sampling arguments and
        their defaults are SamplingParams' (sampling.py).

        A prompt is a string, a list of token ids, or a conversation: a list of chat
        messages ({"role": ..., "content": ...}), which a local model lays out with its
        chat template (as Model.apply_chat_template does, ChatTemplateError for a model
        without one) and a server with its own. A prompt that cannot run (empty,
        too long, bad token ids, a decode failure, a failed request) gets
        `finish_reason="error"` and its exception in `error`; the others are unaffected.

        `labels` restricts answers to labels: one list of labels for every prompt, or
        one list (or None) per prompt. Such a prompt's `text` and `label` are its
        label and `label_probs` the model's probability of each label (see labels.py).

        `json_schema` (a dict or a JSON string) and `grammar` (GBNF) constrain answers
        likewise, one for every prompt or one (or None) per prompt: the text follows the
        schema or grammar, a JSON answer's value is in `parsed`, and an answer cut off
        before it is complete fails with IncompleteOutputError (see constraints.py). A
        prompt has at most one of `labels`, `json_schema` and `grammar`.

        `field_probs=True` scores the `enum` (of strings) and `boolean` top-level fields of
        a JSON schema as labels at the point where their values start, picks each value as
        a label is picked and goes on after it: a completion's `field_probs` holds
        {field: {value: probability}} ("true"/"false" for a boolean); see field_probs.py.
        Such a schema must fix its layout (every property required, no others), else
        InvalidArgumentError.

        `hidden_states=True` keeps in each completion's `hidden_state` the final hidden
        state of its prompt's last token, the one its first answer token (a label's
        probabilities) is read from, as little-endian float32 bytes, at no extra decode
        (see features.py). A list of kinds among "last" (that state), "middle" (the last
        token's state after layer `feature_layer`, by default the middle one) and "mean"
        (the mean of that layer's states over the tokens of the prompt's text: its
        `feature_texts` entry, found in the prompt; without one, the whole prompt) keeps
        their vectors one after the other. Not with `field_probs`, nor on a server.

        `cache`, the path of a SQLite file (created if missing), keeps answers across
        calls and crashes: prompts it answers are not run again, and each other answer
        is committed as its prompt finishes (see result_cache.py for what the key covers).
        """
        prompts = check_prompts(prompts)
        prompt_labels = check_labels(labels, len(prompts))
        constraints = check_constraints(json_schema, grammar, len(prompts), self._vocabulary())
        if check_bool("field_probs", field_probs):
            constraints = with_scored_fields(constraints)
        model = self._vocabulary()
        features = check_features(hidden_states, feature_texts, feature_layer, len(prompts),
                                  None if model is None else model.n_layer)
        if features is not None and field_probs:
            raise InvalidArgumentError("hidden_states", hidden_states, "False with field_probs")
        for i, (one, constraint) in enumerate(zip(prompt_labels, constraints)):
            if one is not None and constraint is not None:
                raise InvalidArgumentError(
                    "labels", labels, f"None for prompt {i}, which has a {constraint.kind}: one constraint per prompt"
                )
        sampling = SamplingParams(
            max_tokens=max_tokens, temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
            repeat_last_n=repeat_last_n, penalty_repeat=penalty_repeat, seed=seed, stop=stop,
        )
        on_progress = check_callable("on_progress", on_progress)
        cache = check_cache_path(cache)
        return self._generate(prompts, prompt_labels, constraints, sampling, on_progress, cache, features)

    @abstractmethod
    def _vocabulary(self) -> Optional[Model]:
        """The model whose vocabulary constraints are checked against; None when a server
        checks them against its own."""

    @abstractmethod
    def _generate(self, prompts: list[Any], labels: list[Optional[Labels]],
                  constraints: list[Optional[Constraint]], sampling: SamplingParams,
                  on_progress: Progress, cache: Optional[str],
                  features: Optional[FeatureRequest] = None) -> ParallelResult:
        """generate_parallel() with its arguments checked; `features` the states to keep."""


class OneCallAtATime:
    """The lock of a context whose calls share one llama.cpp context: calls wait for each
    other, and the progress callback may use the context between steps (cached_tokens())
    but not start another call on it or close it, which would reuse the batch and clear
    the KV cache under the running call."""

    def __init__(self) -> None:
        self.lock = threading.RLock()  # re-entrant, for the progress callback
        self._running = False

    @contextmanager
    def call(self) -> Iterator[None]:
        with self.lock:
            if self._running:
                raise ContextError("generate_parallel() was called from inside its own on_progress callback.")
            self._running = True
            try:
                yield
            finally:
                self._running = False

    @contextmanager
    def closing(self) -> Iterator[None]:
        with self.lock:
            if self._running:
                raise ContextError("A context cannot be closed from inside its own generate_parallel() call.")
            yield
