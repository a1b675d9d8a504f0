"""Environments the env tests share, registered for every test of this directory (tests ask for
them by id, in process or through a served EnvService)."""

from __future__ import annotations

from ale_rock.envs import register
from ale_rock.testing.envs import SleepyEnv

register("test:Sleepy-v0", SleepyEnv, replace=True)
