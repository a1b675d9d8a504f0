"""The multi-stage filter over teacher episodes, with the count that survives each stage.

Stages, in order (each sees only what the previous kept):
1. `collected`     — every episode the teacher ran;
2. `tool_calls_ok` — heuristic checks on tool calls: no malformed call, no infrastructure error,
   no shell command other than the lock, no guess the lock rejected as invalid;
3. `finished`      — drop truncated runs (the lock never opened in the transcript: out of turns,
   out of steps, or the teacher stopped early) and repair loops (the same command twice in a row);
4. `rechecked`     — execution re-check: the actions replayed in a *fresh* sandbox must open the lock;
5. `deduped`       — one episode per distinct (code, actions).
The survivors become SFT demos `{"seed", "actions"}`, replayed through the environment's own
formatting so their token ids are exactly what the policy will see.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ale.job.synthesis import Episode

STAGES = ("collected", "tool_calls_ok", "finished", "rechecked", "deduped")


def tool_calls_ok(e: Episode) -> bool:
    """Heuristic checks on the episode's tool calls."""
    if e.error or e.malformed:
        return False
    if len(e.commands) != len(e.actions):  # a shell command that is not a lock guess
        return False
    return not any(out.startswith("invalid") for out in e.outputs)


def finished(e: Episode) -> bool:
    """The transcript shows the lock opening, without a repeated command (repair loop)."""
    if any(a == b for a, b in zip(e.commands, e.commands[1:])):
        return False
    return bool(e.outputs) and e.outputs[-1] == "open"


def run_filter(episodes: list[Episode], recheck: Callable[[list[Episode]], list[bool]]
               ) -> tuple[list[Episode], dict[str, int]]:
    """Apply the stages; returns the survivors and the count after each stage.

    `recheck` gets every episode that reached stage 4 and returns one verdict per episode.
    """
    counts = {"collected": len(episodes)}
    kept = [e for e in episodes if tool_calls_ok(e)]
    counts["tool_calls_ok"] = len(kept)
    kept = [e for e in kept if finished(e)]
    counts["finished"] = len(kept)
    verdicts = recheck(kept)
    kept = [e for e, ok in zip(kept, verdicts, strict=True) if ok]
    counts["rechecked"] = len(kept)
    seen: set[tuple[tuple[int, ...], tuple[str, ...]]] = set()
    unique = []
    for e in kept:
        key = (tuple(e.code), tuple(e.actions))
        if key not in seen:
            seen.add(key)
            unique.append(e)
    counts["deduped"] = len(unique)
    return unique, counts


def sandbox_recheck(client: Any, max_turns: int, concurrency: int = 4) -> Callable[[list[Episode]], list[bool]]:
    """A re-check that replays each episode's actions against a freshly installed lock in a sandbox;
    a re-check that cannot run does not vouch for its episode."""
    from ale.job.lock_task import replay_in_sandbox
    from ale.job.synthesis import in_sandboxes

    def one(sandbox: Any, e: Episode) -> bool:
        opened, _ = replay_in_sandbox(sandbox, e.code, max_turns, e.actions)
        return opened

    def recheck(episodes: list[Episode]) -> list[bool]:
        return in_sandboxes(client, episodes, one, lambda e, exc: False, concurrency, "recheck")
    return recheck
