"""Demonstrations as trajectories: replay text actions through an environment.

A demo line is `{"seed": 3, "actions": ["10", "5", "7"]}`. Replaying it gives a Trajectory with the
same append-only layout a sampled episode has (`ChatFormat`), the actions encoded once — demos are
SFT data, not samples, so there are no behaviour logprobs (0.0). Turns that the environment marks
invalid get `error=True`, so masked SFT ignores them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ale_roll.rollout.episode import GemEnv
from ale_roll.rollout.formatting import ChatFormat
from ale_roll.types import StopReason, Trajectory, Turn


def replay_actions(env: GemEnv, fmt: ChatFormat, seed: int, actions: list[str]) -> Trajectory:
    """Play `actions` from `reset(seed)` and record the turns."""
    obs, info = env.reset(seed)
    context = fmt.initial(obs)
    turns: list[Turn] = []
    total = 0.0
    for k, action in enumerate(actions):
        ids = fmt.encode_action(action)
        turn = Turn(prompt_ids=list(context) if k == 0 else [], completion_ids=ids, logprobs=[0.0] * len(ids),
                    stop_reason=StopReason.STOP)
        turns.append(turn)
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        turn.error = bool(info.get("invalid_action"))
        if terminated or truncated:
            break
        turn.observation_text, turn.observation_ids = obs, fmt.observation(obs)
        context = context + ids + turn.observation_ids
    env.close()
    return Trajectory(turns=turns, reward=total, initial_state_id=f"demo-{seed}", seed=seed,
                      metadata={"success": bool(info.get("success", total > 0)), "demo": True})


def load_trajectories(path: str | Path, env_factory: Any = None, fmt: ChatFormat | None = None) -> list[Trajectory]:
    """Read a JSONL of trajectories, each `Trajectory.to_dict` or the contract's `ale.v1.Trajectory` in
    protobuf JSON (what an agent's `GetTrajectory` returns), or demos (`{"seed", "actions"}`; needs env + fmt)."""
    out: list[Trajectory] = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        data = json.loads(line)
        if "turns" in data and all("completion_ids" in t for t in data["turns"]):
            out.append(Trajectory.from_dict(data))
        elif "turns" in data:  # the contract's field names (completionTokenIds / completion_token_ids)
            from ale_roll.trajectory_proto import from_json

            try:
                out.append(from_json(data))
            except ValueError as e:
                raise ValueError(f"{path}:{n}: {e}") from None
        elif "actions" in data:
            if env_factory is None or fmt is None:
                raise ValueError(f"{path}: demo lines need an environment and a format to replay")
            out.append(replay_actions(env_factory(), fmt, int(data["seed"]), list(map(str, data["actions"]))))
        else:
            raise ValueError(f"{path}: a line is neither a trajectory nor a demo: {line[:80]}")
    return out
