"""Bring your own task: where `env.id` is resolved, and the dataset + reward-function mode.

Three ways to name what GEM-mode episodes play (`env` in the YAML):

- `id: game:GuessTheNumber-v0` — an environment registered in ale-rock (`ale_rock.envs`);
- `id: my_tasks:Countdown` — `module:attribute` in your own code: a gem-style env class, or a
  factory returning one (`reset(seed) -> (obs, info)`, `step(action) -> (obs, reward, terminated,
  truncated, info)`, `close()`), built with `env.kwargs` per episode;
- `data: train.jsonl` + `reward_fn: my_tasks:reward` — single-turn RLVR as TRL users write it:
  one prompt per line (`{"prompt": ..., other columns}`), and a reward function called the way
  TRL's GRPOTrainer calls one, `reward_fn(prompts=[p], completions=[c], **{column: [value]})`,
  returning a list of floats (or one float). The same function works in both.

Modules are imported with the YAML's directory on `sys.path` (`env.search_path`), so a task file
next to the config needs no install. An ale-rock id that is registered always wins over an import.
This module imports neither torch nor ale-rock (a Ray rollout worker uses it too).
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ale_roll.config import EnvConfig

_IMPORT_SPEC = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def is_import_spec(env_id: str) -> bool:
    """Whether `env_id` reads as `package.module:attribute` (ale-rock ids carry a `-vN` version)."""
    return bool(_IMPORT_SPEC.match(env_id))


def import_object(spec: str, search_path: Sequence[str | Path] = ()) -> Any:
    """The object `module:attribute` names, importing `module` with `search_path` on `sys.path`."""
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"{spec!r} is not 'module:attribute'")
    for entry in search_path:
        # Appended (not prepended): a file next to the config must not shadow an installed package.
        if str(entry) not in sys.path:
            sys.path.append(str(entry))
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        where = ", ".join(str(p) for p in search_path) or "sys.path"
        raise ValueError(f"cannot import {module!r} for {spec!r} (searched {where} and sys.path): {e}") from e
    try:
        return getattr(mod, name)
    except AttributeError:
        raise ValueError(f"module {module!r} has no attribute {name!r} ({spec!r})") from None


def _registered_in_ale_rock(env_id: str) -> bool:
    try:
        from ale_rock.envs import list_envs
    except ImportError:
        return False
    return any(e.env_id == env_id for e in list_envs(env_id, include_tasks=False))


def local_env_factory(env_id: str, kwargs: dict[str, Any], search_path: Sequence[str | Path] = (),
                      data: str | None = None, eval_data: str | None = None, reward_fn: str | None = None,
                      eval_seed: int = 1_000_000) -> Callable[[], Any]:
    """A factory of in-process environments for an `env` section (see the module docstring)."""
    if data is not None:
        if reward_fn is None:
            raise ValueError("env.data needs env.reward_fn (module:function)")
        rows = load_rows(data)
        eval_rows = load_rows(eval_data) if eval_data else rows
        fn = import_object(reward_fn, search_path)
        return lambda: DatasetEnv(rows, fn, eval_rows=eval_rows, eval_seed=eval_seed)
    if is_import_spec(env_id) and not _registered_in_ale_rock(env_id):
        try:
            target = import_object(env_id, search_path)
        except ValueError as e:
            raise ValueError(f"env.id {env_id!r} is not a registered ale-rock id, and as module:Class: {e}") from e
        if not callable(target):
            raise ValueError(f"env.id {env_id!r} is not a class or factory")
        return lambda: target(**kwargs)
    try:
        from ale_rock.envs import make
    except ImportError as e:
        raise RuntimeError(f"env.id {env_id!r} needs ale-rock (pip install 'ale-roll[envs]'), "
                           "or name your own env as module:Class") from e
    return lambda: make(env_id, **kwargs)


def make_env_factory(cfg: EnvConfig, timeout_s: float, *, batched: bool = True) -> Callable[[], Any]:
    """The environments of an `env` section: in-process (`local_env_factory`), or EnvService clients
    when `env.address` is set — `batched`: one `BatchEnvClient` whose envs' async calls from
    concurrent episodes share Batch RPCs (the controller); otherwise sync clients sharing one
    channel (a Ray rollout worker, which steps envs from threads)."""
    if cfg.address is None:
        return local_env_factory(cfg.id, cfg.kwargs, cfg.search_path, cfg.data, cfg.eval_data, cfg.reward_fn,
                                 cfg.eval_seed)
    try:
        from ale_rock.envs import make
        from ale_rock.envs.batch_client import BatchEnvClient
    except ImportError as e:
        raise RuntimeError("environments need ale-rock: pip install 'ale-roll[envs]'") from e
    address, env_id = cfg.address, cfg.id
    if batched:
        kwargs = dict(cfg.kwargs)
        client = BatchEnvClient(address, rpc_timeout_s=timeout_s, api_key=str(kwargs.pop("api_key", "")))
        return lambda: client.env(env_id, **kwargs)
    import grpc

    channel = grpc.insecure_channel(address)
    return lambda: make(env_id, address=address, channel=channel, rpc_timeout_s=timeout_s, **cfg.kwargs)


def load_rows(path: str | Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file, each with a `prompt` (a string, or chat messages)."""
    rows = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if not isinstance(row, dict) or "prompt" not in row:
            raise ValueError(f"{path}:{n}: each line must be a JSON object with a 'prompt'")
        rows.append(row)
    if not rows:
        raise ValueError(f"{path}: no rows")
    return rows


def prompt_text(prompt: Any) -> str:
    """A prompt as the observation text: a string as is, chat messages by their contents (one a line)."""
    if isinstance(prompt, str):
        return prompt
    return "\n".join(str(m.get("content", "")) for m in prompt)


class DatasetEnv:
    """One single-turn episode per row: reset shows the prompt, the one step is scored by `reward_fn`.

    Training seed s plays row s mod len(rows); seeds from `eval_seed` on play `eval_rows` (held out
    when `env.eval_data` is given). `info["success"]` is reward > 0.
    """

    def __init__(self, rows: list[dict[str, Any]], reward_fn: Callable[..., Any], *,
                 eval_rows: list[dict[str, Any]] | None = None, eval_seed: int = 1_000_000) -> None:
        self.rows, self.eval_rows, self.eval_seed = rows, eval_rows or rows, eval_seed
        self.reward_fn = reward_fn
        self.row: dict[str, Any] = rows[0]

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        s = seed or 0
        self.row = self.eval_rows[(s - self.eval_seed) % len(self.eval_rows)] if s >= self.eval_seed \
            else self.rows[s % len(self.rows)]
        return prompt_text(self.row["prompt"]), {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        columns = {k: [v] for k, v in self.row.items() if k != "prompt"}
        value = self.reward_fn(prompts=[self.row["prompt"]], completions=[action], **columns)
        reward = float(value[0] if isinstance(value, (list, tuple)) else value)
        return "", reward, True, False, {"success": reward > 0}

    def close(self) -> None:
        pass
