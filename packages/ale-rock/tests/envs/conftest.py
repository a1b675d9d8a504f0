"""Environments the env tests share, registered for every test of this directory (tests ask for
them by id, in process or through a served EnvService)."""

from __future__ import annotations

import time
from typing import Any

from ale_rock.envs import Env, register


class SleepyEnv(Env):
    """Sleeps ``delay`` seconds per step (step timeouts, a slow env beside fast ones)."""

    def __init__(self, delay: float = 1.0, seed: int | None = None) -> None:
        super().__init__(seed)
        self.delay = delay

    def _reset(self) -> tuple[str, dict[str, Any]]:
        return "ready", {}

    def _step(self, action: str) -> Any:
        time.sleep(self.delay)
        return "slept", 0.0, False, False, {}


register("test:Sleepy-v0", SleepyEnv, replace=True)
