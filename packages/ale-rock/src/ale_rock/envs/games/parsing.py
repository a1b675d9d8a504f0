"""Action parsing shared by the text games: the answer is the last ``\\boxed{...}`` or the last word."""

from __future__ import annotations

import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_INT = re.compile(r"-?\d+")
_WORD = re.compile(r"[A-Za-z]+")


def answer_text(action: str) -> str:
    """The ``\\boxed{}`` content if any (gem's convention), else the whole action."""
    boxed = _BOXED.findall(action)
    return boxed[-1] if boxed else action


def last_int(action: str) -> int | None:
    """The last integer in the answer, or None."""
    found = _INT.findall(answer_text(action))
    return int(found[-1]) if found else None


def last_word(action: str, allowed: dict[str, str]) -> str | None:
    """The last word of the answer that is a key of ``allowed`` (case-insensitive), mapped."""
    for word in reversed(_WORD.findall(answer_text(action))):
        hit = allowed.get(word.lower())
        if hit is not None:
            return hit
    return None
