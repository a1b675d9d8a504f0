"""The scripted teacher: a per-digit binary search that plays DigitLock through ale-flow's shell tool.

It is an ale-flow `Model`, so the real agent loop runs it: tool calls, tool results, limits and the
trajectory are all ale-flow's. It is deliberately imperfect — with small, seeded probabilities it
sends a malformed tool call, slips on a digit, gets stuck repeating a command (a repair loop), or
declares victory early — so the filtering funnel has real work to do, as it does with a real
teacher model. A stronger teacher is any OpenAI-compatible model (`synthesis.teacher_base_url`).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from ale_flow.types import ModelResponse, ToolCall, Usage

from ale.job.lock_task import guess_command

_FEEDBACK = re.compile(r"^(?:(?:higher|lower|correct)\s*)+$")


@dataclass
class TeacherNoise:
    """Per-decision probabilities of the teacher's mistakes."""

    malformed: float = 0.04
    """A tool call whose arguments are not valid JSON."""
    slip: float = 0.06
    """One digit of a guess replaced by a random digit."""
    loop: float = 0.04
    """Repeat the previous command instead of thinking (a repair loop, three times)."""
    early_stop: float = 0.03
    """Declare the lock open although it is not."""


@dataclass
class LockTeacher:
    """One episode's teacher (it keeps the binary-search state of that episode)."""

    seed: int
    noise: TeacherNoise = field(default_factory=TeacherNoise)
    digits: int = 3
    context_window: int = 32_000
    lo: list[int] = field(init=False)
    hi: list[int] = field(init=False)
    last: list[int] | None = field(default=None, init=False)
    repeat: int = field(default=0, init=False)
    calls: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(f"teacher-{self.seed}")
        self.lo, self.hi = [0] * self.digits, [9] * self.digits

    def _observe(self, messages: list[dict[str, Any]]) -> str | None:
        """The last tool result, if the last message is one; updates the search interval."""
        if not messages or messages[-1].get("role") != "tool":
            return None
        text = str(messages[-1].get("content", "")).strip().splitlines()[0] if messages[-1].get("content") else ""
        if self.last is not None and _FEEDBACK.match(text):
            for i, word in enumerate(text.split()):
                if word == "correct":
                    self.lo[i] = self.hi[i] = self.last[i]
                elif word == "higher":
                    self.lo[i] = max(self.lo[i], self.last[i] + 1)
                elif word == "lower":
                    self.hi[i] = min(self.hi[i], self.last[i] - 1)
        return text

    def _call(self, command: str) -> ModelResponse:
        self.calls += 1
        return ModelResponse("", [ToolCall(f"call_{self.seed}_{self.calls}", "shell", {"command": command})],
                             usage=Usage(50, 10))

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelResponse:
        seen = self._observe(messages)
        if seen == "open":
            return ModelResponse("The lock is open.", usage=Usage(50, 5))
        if seen is not None and seen.startswith("closed"):
            return ModelResponse("I ran out of guesses.", usage=Usage(50, 5))
        n = self.noise
        if self.repeat > 0 and self.last is not None:
            self.repeat -= 1
            return self._call(guess_command(self.last))
        if self.last is not None and seen is not None:
            r = self.rng.random()
            if r < n.early_stop:
                return ModelResponse("The lock is open.", usage=Usage(50, 5))
            if r < n.early_stop + n.loop:
                self.repeat = 2
                return self._call(guess_command(self.last))
            if r < n.early_stop + n.loop + n.malformed:
                self.calls += 1
                return ModelResponse("", malformed=["shell: arguments are not valid JSON: {\"command\": \"python3 /wor"],
                                     usage=Usage(50, 10))
        guess = [(a + b) // 2 for a, b in zip(self.lo, self.hi, strict=True)]
        if self.rng.random() < n.slip:
            guess[self.rng.randrange(self.digits)] = self.rng.randrange(10)
        self.last = guess
        return self._call(guess_command(guess))
