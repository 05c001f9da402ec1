"""What the R package receives: engine values in which every string is one R can hold.

R strings end at NUL, and UTF-8 has no encoding for a lone surrogate, so both would
fail the conversion of a whole call's answers; each becomes U+FFFD, the character
the engine already puts where a model emits bytes that are not valid UTF-8. Every
other character, control characters included, reaches R unchanged.

A call's hidden states (features.py) cross as one bytearray, which R receives as a raw
vector: the prompts' float32 states one after the other, with which prompts have one.

R integers are 32-bit and reticulate wraps a larger Python int around silently (82 GB
arrived as 0.5 GB), so whole numbers outside that range reach R as doubles.
"""

from __future__ import annotations

import re
import warnings
from typing import Any, Callable

from . import _llama
from .errors import IdentityWarning
from .interrupts import python_takes_interrupts
from .results import ParallelResult

REPLACEMENT_CHARACTER = "\ufffd"
_NOT_IN_R = re.compile("[\x00\ud800-\udfff]")
_R_INTEGER_MAX = 2**31 - 1


def r_string(text: str) -> str:
    return _NOT_IN_R.sub(REPLACEMENT_CHARACTER, text)


def to_r(value: Any) -> Any:
    """`value` with every string in it R-safe; a ParallelResult becomes texts, errors and stats."""
    if isinstance(value, str):
        return r_string(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _R_INTEGER_MAX:
        return float(value)
    if isinstance(value, ParallelResult):
        return {
            "texts": [r_string(c.text) for c in value],
            "errors": [c.error for c in value],
            "label_probs": [to_r(c.label_probs) for c in value],
            "field_probs": [to_r(c.field_probs) for c in value],
            "hidden_states": _hidden_states(value),
            "stats": value.stats.to_dict(),
        }
    if isinstance(value, (list, tuple)):
        return [to_r(v) for v in value]
    if isinstance(value, dict):
        return {to_r(k): to_r(v) for k, v in value.items()}
    return value


def _hidden_states(result: ParallelResult) -> Any:
    kept = [c.hidden_state is not None for c in result]
    if not any(kept):
        return None
    return {"kept": kept, "states": bytearray(b"".join(c.hidden_state for c in result if c.hidden_state is not None))}


def call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call an engine function for R: the one way engine values reach R. An interrupt
    meanwhile is Python's KeyboardInterrupt alone (newrllama4.interrupts)."""
    with python_takes_interrupts():
        return to_r(function(*args, **kwargs))


def identity_problems() -> list[str]:
    """Why batch invariance is not guaranteed in this process (nothing: it is). R says so
    with a classed warning of its own, so the engine's Python warning, which the first
    Model gives, is silenced for R's process."""
    warnings.filterwarnings("ignore", category=IdentityWarning)
    return _llama.identity_problems()
