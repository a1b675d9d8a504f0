"""The gem-shaped environment core: ``reset(seed) -> (obs, info)``,
``step(action) -> (obs, reward, terminated, truncated, info)``, ``close()``.

Subclasses implement ``_reset`` and ``_step``; the base class enforces the episode protocol
(no step before reset or after the end) so every environment fails the same typed way.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from typing import Any

from ale_rock.envs.errors import EpisodeNotActive

StepResult = tuple[str, float, bool, bool, dict[str, Any]]
"""``(observation, reward, terminated, truncated, info)``."""


class Env(ABC):
    """A text environment with gem's API. Observations and actions are strings."""

    action_description: str = ""
    """Human-readable description of the action format."""

    def __init__(self, seed: int | None = None) -> None:
        # gem's make_vec passes ``seed`` to constructors; it is the default seed of reset().
        self._default_seed = seed
        self._active = False
        self.rng = random.Random(seed)

    @property
    def tools(self) -> list[dict[str, Any]]:
        """OpenAI tool schemas for tool-use environments; empty for plain text environments."""
        return []

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start a new episode; the same seed gives the same initial state."""
        if seed is None:
            seed = self._default_seed if self._default_seed is not None else random.randrange(2**31)
            self._default_seed = None  # only the first reset uses the constructor seed
        self.rng = random.Random(seed)
        obs, info = self._reset()
        self._active = True
        return obs, info

    def step(self, action: str) -> StepResult:
        """Apply one action. Raises :class:`EpisodeNotActive` before reset or after the end."""
        if not self._active:
            raise EpisodeNotActive("the episode is over (or not started): call reset()")
        obs, reward, terminated, truncated, info = self._step(action)
        if terminated or truncated:
            self._active = False
        return obs, float(reward), bool(terminated), bool(truncated), info

    def close(self) -> None:
        """Release resources (sandboxes); idempotent."""
        self._active = False

    @property
    def unwrapped(self) -> Env:
        """gem compatibility: the base environment."""
        return self

    @abstractmethod
    def _reset(self) -> tuple[str, dict[str, Any]]:
        """Build the initial state from ``self.rng``."""

    @abstractmethod
    def _step(self, action: str) -> StepResult:
        """Apply an action to an active episode."""
