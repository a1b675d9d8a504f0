"""FAKE environments for tests of env servers and their clients (step timeouts, slow envs beside
fast ones). Not registered by default: a test registers the id it wants."""

from __future__ import annotations

import time
from typing import Any

from ale_rock.envs import Env


class SleepyEnv(Env):
    """A FAKE env: ``reset`` answers "ready"; every step sleeps ``delay`` seconds, then answers
    "slept" with reward 0 and never ends the episode."""

    def __init__(self, delay: float = 1.0, seed: int | None = None) -> None:
        super().__init__(seed)
        self.delay = delay

    def _reset(self) -> tuple[str, dict[str, Any]]:
        return "ready", {}

    def _step(self, action: str) -> Any:
        time.sleep(self.delay)
        return "slept", 0.0, False, False, {}
