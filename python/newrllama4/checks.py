"""Argument checks shared by the public entry points.

Each check returns the normalised value or raises InvalidArgumentError naming the
argument and the bad value, so bad input never reaches llama.cpp.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any, Callable, Optional

from .errors import InvalidArgumentError


def check_int(name: str, value: Any, minimum: Optional[int] = None, maximum: Optional[int] = None) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        # numpy and R hand over whole numbers as floats; accept those, refuse fractions
        if isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value) and float(value).is_integer():
            value = int(value)
        else:
            raise InvalidArgumentError(name, value, _int_range(minimum, maximum))
    value = int(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise InvalidArgumentError(name, value, _int_range(minimum, maximum))
    return value


def _int_range(minimum: Optional[int], maximum: Optional[int]) -> str:
    if minimum is not None and maximum is not None:
        return f"a whole number from {minimum} to {maximum}"
    if minimum is not None:
        return f"a whole number >= {minimum}"
    return "a whole number"


def check_real(
    name: str,
    value: Any,
    minimum: float,
    maximum: float = math.inf,
    *,
    open_minimum: bool = False,
) -> float:
    left = "(" if open_minimum else "["
    expected = f"a number in {left}{minimum}, {maximum}]" if math.isfinite(maximum) else (
        f"a number {'>' if open_minimum else '>='} {minimum}"
    )
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise InvalidArgumentError(name, value, expected)
    value = float(value)
    too_low = value <= minimum if open_minimum else value < minimum
    if too_low or value > maximum:
        raise InvalidArgumentError(name, value, expected)
    return value


def check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgumentError(name, value, "True or False")
    return value


def check_text(name: str, value: Any) -> str:
    """A string that can be encoded as UTF-8, llama.cpp's encoding: no lone surrogates."""
    if not isinstance(value, str):
        raise InvalidArgumentError(name, value, "a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidArgumentError(
            name, value, f"text that UTF-8 can encode, without the lone surrogate {value[error.start]!r} "
            f"at position {error.start}"
        ) from None
    return value


def check_callable(name: str, value: Any) -> Any:
    if value is not None and not callable(value):
        raise InvalidArgumentError(name, value, "a callable or None")
    return value


def is_conversation(prompt: Any) -> bool:
    """Whether a prompt checked by check_prompts is chat messages (else a string or token ids)."""
    return isinstance(prompt, list) and bool(prompt) and isinstance(prompt[0], dict)


def check_prompts(prompts: Any) -> list[Any]:
    """The prompts, each a string, a list of token ids, or a conversation: a non-empty
    list of {"role": ..., "content": ...} messages, returned as such dicts."""
    expected = "a string, a list of token ids, or a list of {'role', 'content'} messages"
    if isinstance(prompts, (str, bytes)) or not isinstance(prompts, (list, tuple)):
        raise InvalidArgumentError("prompts", prompts, f"a list of prompts, each {expected}")
    checked = []
    for i, prompt in enumerate(prompts):
        if isinstance(prompt, str):
            checked.append(check_text(f"prompts[{i}]", prompt))
        elif isinstance(prompt, (list, tuple)) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            checked.append(prompt)
        elif isinstance(prompt, (list, tuple)) and all(isinstance(m, dict) for m in prompt):
            checked.append([_check_message(f"prompts[{i}][{j}]", m) for j, m in enumerate(prompt)])
        else:
            raise InvalidArgumentError(f"prompts[{i}]", prompt, expected)
    return checked


def _check_message(name: str, message: dict) -> dict[str, str]:
    if not (isinstance(message.get("role"), str) and isinstance(message.get("content"), str)):
        raise InvalidArgumentError(name, message, "a message: a dict with string 'role' and 'content'")
    return {key: check_text(f"{name}['{key}']", message[key]) for key in ("role", "content")}


def per_prompt(name: str, value: Any, n_prompts: int, is_one: Callable[[Any], bool], one: str) -> list[tuple[str, Any]]:
    """(argument name, value) for each prompt of an argument given once for every prompt
    (`is_one(value)`, or None) or as a list with one such value (or None) per prompt;
    `one` says what such a value is."""
    if value is None or is_one(value):
        return [(name, value)] * n_prompts
    if isinstance(value, (list, tuple)) and len(value) == n_prompts and all(v is None or is_one(v) for v in value):
        return [(f"{name}[{i}]", v) for i, v in enumerate(value)]
    raise InvalidArgumentError(name, value, f"None, {one}, or a list of {n_prompts} of them (or None), one per prompt")
