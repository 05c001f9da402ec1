"""Per-request state: one prompt's tokens, cache progress, random stream and output text."""

from __future__ import annotations

import codecs
from typing import TYPE_CHECKING, Callable, Optional

import numpy as np

from .results import Completion

if TYPE_CHECKING:
    from .constraints import ConstrainedAnswer
    from .features import KeptStates


class OutputText:
    """Generated text built token by token, UTF-8-safe and cut at the first stop string.

    A character whose bytes are split over several tokens is held back until it is
    complete, so the text never contains half a character.
    """

    def __init__(self, stop: tuple[str, ...]):
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stop = stop
        self._longest_stop = max((len(s) for s in stop), default=0)
        self.cut = False  # by a stop string
        self.text = ""

    def append(self, piece: bytes) -> bool:
        """Add one token's bytes; return True when a stop string has appeared."""
        scan_from = max(0, len(self.text) - self._longest_stop + 1)
        self.text += self._decoder.decode(piece)
        return self._cut_at_stop(scan_from)

    def finish(self) -> None:
        """Flush bytes of an unfinished character (they become U+FFFD) unless cut by a stop."""
        if not self.cut:
            self.text += self._decoder.decode(b"", final=True)

    def _cut_at_stop(self, scan_from: int) -> bool:
        hits = [i for i in (self.text.find(s, scan_from) for s in self._stop) if i >= 0]
        if not hits:
            return False
        self.text = self.text[: min(hits)]
        self.cut = True
        return True


class Sequence:
    """One prompt on its way through the engine.

    `tokens` holds the prompt followed by every sampled token; `n_cached` counts how
    many of them are already in the KV cache. What still has to be decoded is
    `tokens[n_cached:]`: the prompt (or its uncached tail) while prefilling, then the
    newest sampled token. A prompt prefix restored from the prefix cache only raises
    `n_cached` (and `n_restored`); `snapshot_at` lists the lengths at which this
    sequence's cells are to be snapshotted for others, so prefill chunks end there;
    `awaited` says that other prompts wait for one of those snapshots to start.
    In a batch-invariant context the first `n_tiled` prompt tokens take the tiled
    attention kernel (see attention.py).
    """

    def __init__(self, index: int, prompt_tokens: list[int], stop: tuple[str, ...]):
        self.index = index
        self.tokens = list(prompt_tokens)
        self.n_prompt = len(prompt_tokens)
        self.n_cached = 0
        self.n_restored = 0
        self.n_tiled = 0
        self.snapshot_at: list[int] = []
        self.awaited = False
        # a scoring sequence reads the log-probabilities of these next tokens instead of sampling
        self.score_tokens: Optional[list[int]] = None
        self.scores: dict[int, float] = {}
        # a constrained sequence samples only what its json_schema or grammar allows next
        self.constrained: Optional[ConstrainedAnswer] = None
        # keeps its prompt's states (features.py), assembled into `hidden_state`
        self.kept: Optional[KeptStates] = None
        self.hidden_state: Optional[bytes] = None
        self.slot: Optional[int] = None
        self.generator: Optional[np.random.Generator] = None
        self.output = OutputText(stop)
        self.finish_reason: Optional[str] = None
        self.error: Optional[BaseException] = None

    @property
    def prefilling(self) -> bool:
        return self.n_cached < self.n_prompt

    @property
    def n_restorable(self) -> int:
        """How many prompt tokens it may restore from the prefix cache: all but the last,
        whose logits it needs, and none of a text whose states it averages (features.py)."""
        if self.kept is not None and "mean" in self.kept.request.kinds:
            return min(self.n_prompt - 1, self.kept.span[0])
        return self.n_prompt - 1

    @property
    def pending(self) -> int:
        return len(self.tokens) - self.n_cached

    @property
    def boundary(self) -> int:
        """Where the next prefill chunk must end at the latest: the next snapshot point,
        else the end of the prompt."""
        return self.snapshot_at[0] if self.snapshot_at else self.n_prompt

    @property
    def generated(self) -> list[int]:
        return self.tokens[self.n_prompt:]

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    def accept(self, token: int, piece: Callable[[int], bytes], max_tokens: int, n_ctx: int) -> None:
        """Take a sampled token (not an end-of-generation one) and decide whether to stop."""
        self.tokens.append(token)
        answer_ended = self.constrained is not None and self.constrained.advance(token)
        if self.output.append(piece(token)) or answer_ended:
            self.finish("stop")
        elif len(self.tokens) - self.n_prompt >= max_tokens or len(self.tokens) > n_ctx:
            # the context check: the new token would need a KV cell past the sequence's window
            self.finish("length")

    def end(self) -> None:
        """The model sampled an end-of-generation token."""
        if self.constrained is not None:
            self.constrained.end()
        self.finish("stop")

    def finish(self, reason: str, error: Optional[BaseException] = None) -> None:
        if self.finish_reason is None:
            self.output.finish()
            self.finish_reason = reason
            self.error = error

    def completion(self) -> Completion:
        finish_reason, error, parsed = self.finish_reason or "error", self.error, None
        if self.constrained is not None:
            parsed, failure = self.constrained.result(
                self.index, self.output.text, len(self.generated), finish_reason, self.output.cut
            )
            if failure is not None:
                finish_reason, error = "error", failure
        return Completion(
            text=self.output.text,
            tokens=self.generated,
            n_prompt_tokens=self.n_prompt,
            n_tokens=len(self.generated),
            n_cached_tokens=self.n_restored,
            finish_reason=finish_reason,
            error=error,
            parsed=parsed,
            hidden_state=self.hidden_state,
        )
