"""What a call returns: one Completion per prompt, in prompt order, and the call's stats."""

from __future__ import annotations

from collections.abc import Sequence as SequenceABC
from dataclasses import asdict, dataclass
from typing import Any, Iterator, Optional, overload


@dataclass(frozen=True)
class Completion:
    text: str
    tokens: list[int]
    n_prompt_tokens: int
    n_tokens: int
    # prompt tokens not decoded for this answer: restored from the prefix cache, or all
    # of them when the answer comes from the result cache
    n_cached_tokens: int
    finish_reason: str  # "stop", "length" or "error"
    error: Optional[BaseException] = None
    label: Optional[str] = None  # with `labels`: the label, also in `text`
    label_probs: Optional[dict[str, float]] = None  # with `labels`: each label's probability
    parsed: Any = None  # with `json_schema`: the answer as a Python value
    # with `json_schema` and `field_probs`: {field: {value: probability}} for each enum and
    # boolean field ("true"/"false" for a boolean), the value in `parsed` picked from them
    field_probs: Optional[dict[str, dict[str, float]]] = None
    # with `hidden_states`: the prompt's last token's final hidden state, little-endian
    # float32 bytes (see features.py)
    hidden_state: Optional[bytes] = None
    from_cache: bool = False  # read from the result cache (`cache=`), as an earlier call stored it


@dataclass
class Stats:
    """Counters and timings of one generate_parallel call.

    The seconds split the call's wall time: time inside llama_decode (prefill and
    decode batches), inside the samplers, waiting on servers, and everything else (the
    engine's own Python work: scheduling, batch filling, detokenizing, bookkeeping,
    prefix snapshots and restores). `decoded_tokens` counts what went through llama_decode: each prompt token
    once, except the `cached_prompt_tokens` restored from the prefix cache, and each
    generated token once, except a last token that ends its sequence by length, which
    is never fed back. `prefix_snapshots` prefixes were cached by this call;
    `prefix_cache_bytes` and `prefix_cache_snapshots` are the cache's size after it;
    `prefix_copied_bytes` the KV bytes copied into snapshots and restored from them
    (divided by `prompts`, what reuse costs per row). `result_cache_hits` prompts
    were answered from the result cache; the token counters and rates cover the
    others, the prompts this call computed.

    A call on a RemoteContext decodes nothing here: `request_seconds` is the part of
    its wall time with requests to servers in flight, `retries` counts the requests
    sent again after a failure, `peak_active_sequences` the most requests in flight
    at once, and the token counts are the servers' own.

    How the answers were made: `batch_invariant` (the context's mode), `kv_cache` (the
    KV cache types, K/V) and `identity_guaranteed`: every answer is the one its prompt
    gets alone, which needs the batch-invariant mode and ggml running with the settings
    it needs (see IdentityWarning). A RemoteContext guarantees no identity and leaves
    the first two None.
    """

    prompts: int = 0
    failures: int = 0
    result_cache_hits: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    generated_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    sample_seconds: float = 0.0
    request_seconds: float = 0.0
    total_seconds: float = 0.0
    llama_decode_calls: int = 0
    decoded_tokens: int = 0
    retries: int = 0
    prefix_snapshots: int = 0
    prefix_cache_bytes: int = 0
    prefix_cache_snapshots: int = 0
    prefix_copied_bytes: int = 0
    peak_active_sequences: int = 0
    seed: int = 0
    prompt_tokens_per_s: float = 0.0
    generation_tokens_per_s: float = 0.0
    overhead_seconds: float = 0.0
    batch_invariant: Optional[bool] = None
    kv_cache: Optional[str] = None
    identity_guaranteed: bool = False

    def close(self) -> None:
        """Derive the rates once every counter is final."""
        self.prompt_tokens_per_s = _rate(self.prompt_tokens, self.prefill_seconds)
        self.generation_tokens_per_s = _rate(self.generated_tokens, self.total_seconds)
        self.overhead_seconds = max(
            0.0,
            self.total_seconds - self.prefill_seconds - self.decode_seconds - self.sample_seconds
            - self.request_seconds,
        )

    def to_dict(self) -> dict:
        return asdict(self)


def _rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else 0.0


class ParallelResult(SequenceABC):
    """The completions of one call, indexable and iterable in prompt order, plus `.stats`."""

    def __init__(self, completions: list[Completion], stats: Stats):
        self._completions = completions
        self.stats = stats

    @overload
    def __getitem__(self, index: int) -> Completion: ...
    @overload
    def __getitem__(self, index: slice) -> list[Completion]: ...
    def __getitem__(self, index):
        return self._completions[index]

    def __len__(self) -> int:
        return len(self._completions)

    def __iter__(self) -> Iterator[Completion]:
        return iter(self._completions)

    @property
    def texts(self) -> list[str]:
        return [c.text for c in self._completions]

    @property
    def field_probs(self) -> list[Optional[dict[str, dict[str, float]]]]:
        """Each completion's field probabilities (None where it has none)."""
        return [c.field_probs for c in self._completions]

    def __repr__(self) -> str:
        return (
            f"<ParallelResult: {len(self)} completions, {self.stats.failures} failed, "
            f"{self.stats.generation_tokens_per_s:.1f} tok/s>"
        )
