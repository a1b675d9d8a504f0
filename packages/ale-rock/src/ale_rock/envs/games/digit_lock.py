"""DigitLock: open a lock of ``digits`` digits (each ``0..base-1``) within ``max_turns`` guesses.

Every guess names all digits at once ("4 4 4"); the feedback says, per digit, ``higher``,
``lower`` or ``correct`` ("higher lower correct"). The lock opens (reward 1) when every digit is
right. A per-digit binary search opens any 3-digit base-10 lock in 4 guesses.

Why this game: it has many distinct start states (1000 codes for 3 digits) while each decision
stays small (a per-digit binary search over 10 values), so a tiny model can learn it on a CPU in
minutes and a held-out set can have hundreds of distinct start states.

**Held-out split by seed.** Codes are split once, by a fixed pseudo-random rule, into a training
half and a held-out half. A reset with ``seed < heldout_seed`` draws a training code from the
seed; ``seed >= heldout_seed`` enumerates the held-out codes in a fixed shuffled order
(``seed - heldout_seed`` is the index; ``heldout_order``), so evaluation seeds
``heldout_seed + 0..n-1`` are ``n`` distinct held-out codes (up to the size of the half) that
training never sees, and a fair sample of the half: enumerated by value, the first 300 were codes
0xx-5xx only, an easier set than the training locks (fewer digits that take the search 4 guesses).
"""

from __future__ import annotations

import random
import re
from functools import cache
from typing import Any

from ale_rock.envs.core import Env, StepResult
from ale_rock.envs.games.parsing import answer_text

_DIGIT = re.compile(r"\d")


@cache
def split_codes(digits: int, base: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(training codes, held-out codes): every code in exactly one, fixed across runs and machines."""
    train: list[int] = []
    heldout: list[int] = []
    for code in range(base**digits):
        (heldout if random.Random(f"digit-lock-{code}").random() < 0.5 else train).append(code)
    return tuple(train), tuple(heldout)


@cache
def heldout_order(digits: int, base: int) -> tuple[int, ...]:
    """The held-out codes in the fixed pseudo-random order held-out seeds enumerate them."""
    order = list(split_codes(digits, base)[1])
    random.Random(f"digit-lock-heldout-{digits}-{base}").shuffle(order)
    return tuple(order)


def code_digits(code: int, digits: int, base: int) -> list[int]:
    """The digits of ``code``, most significant first."""
    out = []
    for _ in range(digits):
        code, d = divmod(code, base)
        out.append(d)
    return out[::-1]


class DigitLock(Env):
    """See the module docstring. An action without exactly ``digits`` digits is invalid (uses a turn)."""

    def __init__(self, digits: int = 3, base: int = 10, max_turns: int = 5, heldout_seed: int = 1_000_000,
                 seed: int | None = None) -> None:
        super().__init__(seed)
        if not 1 <= digits <= 6 or not 2 <= base <= 10 or max_turns < 1:
            raise ValueError("need 1 <= digits <= 6, 2 <= base <= 10 and max_turns >= 1")
        self.digits, self.base, self.max_turns, self.heldout_seed = digits, base, max_turns, heldout_seed
        self.action_description = f"{digits} digits (0-{base - 1}) separated by spaces, e.g. " + " ".join(
            ["4"] * digits) + "."
        self.code = [0] * digits
        self.turn = 0
        self._seed: int | None = seed

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self._seed = seed
        return super().reset(seed)

    def _reset(self) -> tuple[str, dict[str, Any]]:
        if self._seed is not None and self._seed >= self.heldout_seed:
            heldout = heldout_order(self.digits, self.base)
            code = heldout[(self._seed - self.heldout_seed) % len(heldout)]
            split = "heldout"
        else:
            train = split_codes(self.digits, self.base)[0]
            code = train[self.rng.randrange(len(train))]
            split = "train"
        self.code = code_digits(code, self.digits, self.base)
        self.turn = 0
        obs = (f"A lock with {self.digits} digits, each 0-{self.base - 1}. Guess all digits each turn; every "
               f"digit gets higher, lower or correct. You have {self.max_turns} guesses.")
        return obs, {"turn": 0, "max_turns": self.max_turns, "split": split, "code": code}

    def parse(self, action: str) -> list[int] | None:
        """The guessed digits, or None when the action does not name exactly ``digits`` of them."""
        found = [int(d) for d in _DIGIT.findall(answer_text(action))]
        if len(found) != self.digits or any(d >= self.base for d in found):
            return None
        return found

    def _step(self, action: str) -> StepResult:
        self.turn += 1
        info: dict[str, Any] = {"turn": self.turn}
        out_of_turns = self.turn >= self.max_turns
        guess = self.parse(action)
        if guess is None:
            info["invalid_action"] = True
            return f"invalid: answer with {self.action_description}", 0.0, False, out_of_turns, info
        if guess == self.code:
            info["success"] = True
            return "open", 1.0, True, False, info
        feedback = " ".join("correct" if g == c else ("higher" if g < c else "lower")
                            for g, c in zip(guess, self.code, strict=True))
        if out_of_turns:
            return f"{feedback} closed", 0.0, False, True, info
        return feedback, 0.0, False, False, info


def expert_guess(history: list[tuple[list[int], list[str]]], digits: int = 3, base: int = 10) -> list[int]:
    """The per-digit binary search: the next guess from the (guess, feedback) history."""
    lo, hi = [0] * digits, [base - 1] * digits
    for guess, feedback in history:
        for i, (g, f) in enumerate(zip(guess, feedback, strict=True)):
            if f == "correct":
                lo[i] = hi[i] = g
            elif f == "higher":
                lo[i] = max(lo[i], g + 1)
            elif f == "lower":
                hi[i] = min(hi[i], g - 1)
    return [(a + b) // 2 for a, b in zip(lo, hi, strict=True)]


def expert_actions(seed: int) -> list[str]:
    """The actions :func:`expert_guess` plays on a default DigitLock reset with ``seed``, to the end
    (demonstrations for SFT and initialized resampling)."""
    env, actions = DigitLock(), []
    history: list[tuple[list[int], list[str]]] = []
    env.reset(seed=seed)
    while True:
        guess = expert_guess(history)
        actions.append(" ".join(map(str, guess)))
        obs, _, terminated, truncated, _ = env.step(actions[-1])
        if terminated or truncated:
            return actions
        history.append((guess, obs.split()))
