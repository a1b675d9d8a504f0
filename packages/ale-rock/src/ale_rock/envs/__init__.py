"""Environments with gem's API: built-in games, tool-use and terminal-task environments, the
EnvService server and its clients.

``make(env_id)`` builds an environment in this process; ``make(env_id, address=...)`` makes it in
the EnvService at ``address`` and returns a :class:`RemoteEnv` with the same API.
"""

from __future__ import annotations

from typing import Any

from ale_rock.envs.catalog import list_envs, register
from ale_rock.envs.client import AsyncVectorEnvClient, RemoteEnv
from ale_rock.envs.core import Env, StepResult
from ale_rock.envs.errors import (
    EnvDeadlineExceeded,
    EnvError,
    EnvNotFound,
    EpisodeNotActive,
    InvalidAction,
    SandboxLost,
)


def make(env_id: str, *, address: str | None = None, **kwargs: Any) -> Any:
    """An environment with gem's API: in-process, or behind the EnvService at ``address``."""
    if address is None:
        from ale_rock.envs.catalog import make_local

        return make_local(env_id, **kwargs)
    return RemoteEnv(env_id, address, **kwargs)


__all__ = [
    "AsyncVectorEnvClient",
    "Env",
    "EnvDeadlineExceeded",
    "EnvError",
    "EnvNotFound",
    "EpisodeNotActive",
    "InvalidAction",
    "RemoteEnv",
    "SandboxLost",
    "StepResult",
    "list_envs",
    "make",
    "register",
]
