"""The agent-native job's training reward: the lock's success, shaped by what its verifier reports.

    rollout.reward_fn: ale.job.lock_reward:shaped       (ale/job/agent_roll.yaml)

The yardstick stays the verifier's 0/1 ``reward`` (the lock opened within its guesses): held-out
success, the job's verdict and ``success/rate`` are that. RL trains on a denser reward computed
from the same ``reward.json`` (``ale_rock.tasks.lock_family`` writes ``guesses`` and
``correct_digits`` beside ``reward``):

    opened:     1 + EFFICIENCY · (max_turns − guesses) / max_turns   (fewer guesses score more)
    not opened: PARTIAL · correct_digits / digits                     (more right digits score more)

Why: a group-normalized advantage is zero in a group whose episodes all opened their lock or all
failed, and with the 0/1 reward most of the lock's groups are one or the other (which code a state
draws decides more than the sampling does: ~0.1–0.45 of the episodes got a positive advantage at
0.5–0.7 success), so few groups carried a gradient. Within a group the lock is the same, so the
guesses an opened lock took differ only by the policy's departures from the binary search, and a
failed one's right digits by how close it came: both order a group's episodes as the search
would, and every failure scores below every success (PARTIAL < 1), so the shaped reward's best
policy is the 0/1 reward's.
"""

from __future__ import annotations

from typing import Any

EFFICIENCY = 0.5
"""Bonus of an opened lock per unused guess, as a share of ``max_turns``."""
PARTIAL = 0.5
"""Score of a failed episode whose last guess had every digit right (never reached: that opens)."""


def shaped(traj: Any, info: dict[str, Any]) -> float:
    """The shaped reward of one agent-native lock episode (see the module docstring); an episode
    whose verifier reported no lock metrics (another task) keeps the verifier's reward."""
    m = info.get("metrics") or {}
    reward = float(traj.metadata.get("env_reward", 0.0))
    if not {"guesses", "correct_digits", "digits", "max_turns"} <= m.keys() or m["max_turns"] <= 0 or m["digits"] <= 0:
        return reward
    if info.get("success"):
        unused = max(0.0, m["max_turns"] - m["guesses"]) / m["max_turns"]
        return 1.0 + EFFICIENCY * unused
    return PARTIAL * min(m["correct_digits"], m["digits"]) / m["digits"]
