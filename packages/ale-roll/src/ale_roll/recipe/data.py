"""The recipe's data: generated (a noisy expert replayed through the env) or read, and the three
views the supervised stages train on.

- CPT: each trajectory's whole token stream (observations, prompts and actions) as one sequence
  whose every token after the first gets the causal-LM loss;
- SFT stage 1 (broad): every assistant token — the error and task flags are cleared;
- SFT stage 2 (high quality): successful trajectories with their flags, so turns that errored
  (m_err = 0) or did not serve the task (m_task = 0) get no loss (Eq. 1–2).
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ale_roll.recipe.config import GenerateConfig
from ale_roll.rollout.formatting import ChatFormat
from ale_roll.rollout.replay import load_trajectories, replay_actions
from ale_roll.types import Trajectory, Turn, flatten_trajectory, is_prefix_consistent

_HINT = re.compile(r"\b(higher|lower)\b")


def noisy_expert_actions(env: Any, seed: int, gen: GenerateConfig, rng: random.Random) -> tuple[list[str], list[bool]]:
    """Play binary search on a higher/lower game from `reset(seed)`, with invalid and redundant
    guesses mixed in; returns the actions and which of them were redundant (ruled out already)."""
    obs, _ = env.reset(seed)
    low, high = int(getattr(env, "min_number", 1)), int(getattr(env, "max_number", 20))
    actions: list[str] = []
    redundant: list[bool] = []
    done = False
    while not done:
        r = rng.random()
        guess: int | None = None
        if r < gen.invalid_p:
            action, wasted = gen.invalid_action, False
        elif r < gen.invalid_p + gen.redundant_p and (low > int(getattr(env, "min_number", 1))
                                                     or high < int(getattr(env, "max_number", 20))):
            ruled_out = [n for n in range(int(getattr(env, "min_number", 1)), int(getattr(env, "max_number", 20)) + 1)
                         if not low <= n <= high]
            action, wasted = str(rng.choice(ruled_out)), True
        else:
            guess = (low + high + rng.randint(0, 1)) // 2
            action, wasted = str(guess), False
        actions.append(action)
        redundant.append(wasted)
        obs, _, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
        hint = _HINT.search(str(obs))
        if guess is not None and hint is not None:
            low, high = (guess + 1, high) if hint.group(1) == "higher" else (low, guess - 1)
    env.close()
    return actions, redundant


def generate_trajectories(env_factory: Callable[[], Any], fmt: ChatFormat, gen: GenerateConfig,
                          seed: int) -> list[Trajectory]:
    """`gen.episodes` noisy-expert episodes as trajectories (redundant turns: `relevant=False`)."""
    rng = random.Random(seed)
    out = []
    for k in range(gen.episodes):
        s = gen.seed_start + k
        actions, redundant = noisy_expert_actions(env_factory(), s, gen, rng)
        traj = replay_actions(env_factory(), fmt, s, actions)
        for turn, wasted in zip(traj.turns, redundant, strict=False):
            turn.relevant = not wasted
        out.append(traj)
    return out


def write_jsonl(path: Path, trajs: list[Trajectory]) -> None:
    """Trajectories as `to_dict` lines, written to a temporary name and renamed into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in trajs))
    tmp.replace(path)


def broad_view(trajs: list[Trajectory]) -> list[Trajectory]:
    """Stage 1: every assistant turn trains (m_k = 1)."""
    return [dataclasses.replace(t, turns=[dataclasses.replace(u, error=False, relevant=True) for u in t.turns])
            for t in trajs]


def high_quality_view(trajs: list[Trajectory]) -> list[Trajectory]:
    """Stage 2's default subset: successful trajectories, flags kept (the masks act)."""
    return [t for t in trajs if t.metadata.get("success") or t.reward > 0]


def cpt_sequence(ids: list[int], name: str) -> Trajectory:
    """One sequence as a single-turn trajectory whose 'completion' is everything after the first
    token, so masked SFT on it is the plain causal-LM loss on all tokens."""
    return Trajectory(turns=[Turn(prompt_ids=ids[:1], completion_ids=ids[1:], logprobs=[0.0] * (len(ids) - 1))],
                      initial_state_id=name)


def cpt_view(trajs: list[Trajectory]) -> list[Trajectory]:
    """Each (prefix-consistent) trajectory's full token stream."""
    out = []
    for t in trajs:
        if t.turns and is_prefix_consistent(t):
            ids = flatten_trajectory(t).input_ids
            if len(ids) > 1:
                out.append(cpt_sequence(ids, f"cpt-{t.initial_state_id}"))
    return out


def load_cpt_file(path: Path, tokenizer: Any, env_factory: Callable[[], Any], fmt: ChatFormat) -> list[Trajectory]:
    """CPT data from a file: `{"text": ...}` lines are tokenized, anything else is read as trajectories."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if lines and all("text" in d for d in lines):
        seqs = [list(tokenizer(d["text"], add_special_tokens=False)["input_ids"]) for d in lines]
        return [cpt_sequence(ids, f"cpt-{i}") for i, ids in enumerate(seqs) if len(ids) > 1]
    return cpt_view(load_trajectories(path, env_factory, fmt))
