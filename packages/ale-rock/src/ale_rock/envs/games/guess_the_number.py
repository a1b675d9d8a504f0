"""GuessTheNumber: find a hidden number in ``min_number..max_number`` within ``max_turns`` guesses."""

from __future__ import annotations

from typing import Any

from ale_rock.envs.core import Env, StepResult
from ale_rock.envs.games.parsing import last_int


class GuessTheNumber(Env):
    """Each guess gets "higher" / "lower" feedback; a correct guess ends the episode with reward 1.

    An action without a number (or out of range) is invalid: it uses a turn and gets reward 0.
    """

    def __init__(
        self, min_number: int = 1, max_number: int = 20, max_turns: int = 5, seed: int | None = None
    ) -> None:
        super().__init__(seed)
        if max_number <= min_number or max_turns < 1:
            raise ValueError("need min_number < max_number and max_turns >= 1")
        self.min_number, self.max_number, self.max_turns = min_number, max_number, max_turns
        self.action_description = (
            f"A single integer guess between {min_number} and {max_number}, e.g. \\boxed{{7}}."
        )
        self.secret = min_number
        self.turn = 0

    def _reset(self) -> tuple[str, dict[str, Any]]:
        self.secret = self.rng.randint(self.min_number, self.max_number)
        self.turn = 0
        obs = (
            f"I picked a number between {self.min_number} and {self.max_number}. "
            f"You have {self.max_turns} guesses. Answer with your guess."
        )
        return obs, {"turn": 0, "max_turns": self.max_turns}

    def _step(self, action: str) -> StepResult:
        self.turn += 1
        guess = last_int(action)
        info: dict[str, Any] = {"turn": self.turn}
        out_of_turns = self.turn >= self.max_turns
        if guess is None or not self.min_number <= guess <= self.max_number:
            info["invalid_action"] = True
            obs = f"Invalid guess. Answer with one integer between {self.min_number} and {self.max_number}."
            return obs, 0.0, False, out_of_turns, info
        if guess == self.secret:
            info["success"] = True
            return f"Correct! The number was {self.secret}.", 1.0, True, False, info
        hint = "higher" if guess < self.secret else "lower"
        left = self.max_turns - self.turn
        obs = f"{guess} is wrong; the number is {hint}. {left} guesses left."
        if out_of_turns:
            obs = f"{guess} is wrong. Out of guesses; the number was {self.secret}."
        return obs, 0.0, False, out_of_turns, info
