"""The catalog of env ids: each id maps to a ``"module:Class"`` entry point imported on first make.

(Not :mod:`ale_rock.envhub.registry`, the durable store of environment *specs* and their builds.)

Built-in ids are registered here; ``task:<id>`` resolves against the task suite and
``gem:<id>`` against the ``gem-llm`` package (both imported only when used).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ale_rock.envs.errors import EnvNotFound, InvalidAction

EntryPoint = str | Callable[..., Any]


@dataclass(frozen=True)
class EnvEntry:
    """One registered environment id."""

    env_id: str
    entry_point: EntryPoint
    kwargs: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    tags: dict[str, str] = field(default_factory=dict)


_REGISTRY: dict[str, EnvEntry] = {}


def register(
    env_id: str,
    entry_point: EntryPoint,
    *,
    description: str = "",
    tags: dict[str, str] | None = None,
    replace: bool = False,
    **kwargs: Any,
) -> None:
    """Register ``env_id``; ``entry_point`` is a callable or ``"package.module:Class"``."""
    if env_id in _REGISTRY and not replace:
        raise ValueError(f"environment {env_id!r} is already registered")
    _REGISTRY[env_id] = EnvEntry(env_id, entry_point, dict(kwargs), description, dict(tags or {}))


def _resolve(entry_point: EntryPoint) -> Callable[..., Any]:
    if callable(entry_point):
        return entry_point
    module, _, name = entry_point.partition(":")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def make_local(env_id: str, **kwargs: Any) -> Any:
    """Build an environment in this process (an :class:`Env`, or a gem env for ``gem:`` ids)."""
    entry = _REGISTRY.get(env_id)
    if entry is not None:
        factory, kwargs = _resolve(entry.entry_point), {**entry.kwargs, **kwargs}
    elif env_id.startswith("gem:"):
        from ale_rock.envs.gem_compat import make_gem_env

        factory, kwargs = make_gem_env, {"gem_id": env_id[len("gem:") :], **kwargs}
    elif env_id.startswith("task:"):
        from ale_rock.envs.terminal import TerminalTaskEnv

        factory, kwargs = TerminalTaskEnv, {"task_id": env_id[len("task:") :], **kwargs}
    else:
        raise EnvNotFound(f"unknown environment id {env_id!r}", field="env_id", env_id=env_id)
    try:
        return factory(**kwargs)
    except TypeError as e:  # unknown or missing constructor kwargs
        raise InvalidAction(f"bad kwargs for {env_id!r}: {e}", field="kwargs", env_id=env_id) from e


def list_envs(prefix: str = "", *, include_tasks: bool = True) -> list[EnvEntry]:
    """Registered ids (sorted), plus ``task:`` ids of the built-in suite when it loads."""
    entries = dict(_REGISTRY)
    if include_tasks and ("task:".startswith(prefix) or prefix.startswith("task:")):
        for entry in _task_entries():
            entries.setdefault(entry.env_id, entry)
    return [entries[k] for k in sorted(entries) if k.startswith(prefix)]


def _task_entries() -> list[EnvEntry]:
    try:
        from ale_rock.tasks.loader import load_suite
    except ImportError:  # the task suite is optional
        return []
    out = []
    for task in load_suite():
        spec = task.spec
        tags = {"kind": "terminal", "domain": spec.domain.value, "split": spec.split.value}
        out.append(
            EnvEntry(f"task:{spec.id}", "ale_rock.envs.terminal:TerminalTaskEnv", {}, spec.title, tags)
        )
    return out


def is_known(env_id: str) -> bool:
    """Whether ``make_local`` would find ``env_id`` (``gem:`` and ``task:`` ids are checked lazily)."""
    return env_id in _REGISTRY or env_id.startswith(("gem:", "task:"))


def _builtins() -> None:
    games = "ale_rock.envs.games"
    tools = "ale_rock.envs.tools"
    game = {"kind": "game"}
    register(
        "game:GuessTheNumber-v0",
        f"{games}.guess_the_number:GuessTheNumber",
        description="Guess a number in 1..20 within 5 turns with higher/lower feedback.",
        tags=game,
    )
    register(
        "game:GuessTheNumber-v0-hard",
        f"{games}.guess_the_number:GuessTheNumber",
        description="Guess a number in 1..100 within 8 turns.",
        tags=game,
        max_number=100,
        max_turns=8,
    )
    register(
        "game:DigitLock-v0",
        f"{games}.digit_lock:DigitLock",
        description="Open a 3-digit lock in 5 guesses with per-digit higher/lower/correct feedback "
        "(seeds >= 1000000 are held-out codes).",
        tags=game,
    )
    register(
        "game:FrozenLake-v0",
        f"{games}.frozen_lake:FrozenLake",
        description="Walk a 4x4 frozen lake to the goal without falling into a hole.",
        tags=game,
    )
    register(
        "game:FrozenLake-v0-8x8",
        f"{games}.frozen_lake:FrozenLake",
        description="An 8x8 frozen lake.",
        tags=game,
        size=8,
        max_turns=40,
    )
    register(
        "game:Sokoban-v0",
        f"{games}.sokoban:Sokoban",
        description="Push one box onto its target in a small seeded room.",
        tags=game,
    )
    register(
        "game:Sokoban-v0-2box",
        f"{games}.sokoban:Sokoban",
        description="Push two boxes onto their targets.",
        tags=game,
        num_boxes=2,
        max_turns=60,
    )
    register(
        "tool:FileSystem-v0",
        f"{tools}.filesystem:FileSystemEnv",
        description="Reorganize a simulated file system with tool calls; the final state is checked.",
        tags={"kind": "tool"},
    )
    register(
        "tool:Billing-v0",
        f"{tools}.billing:BillingEnv",
        description="Resolve a billing ticket with tool calls; the final account state is checked.",
        tags={"kind": "tool"},
    )


_builtins()
