"""Held-out evaluation with a runner whose episodes can fail for infrastructure reasons (agent-native
mode: a lost sandbox, a failed model call): a failed episode is run again on the same state, one that
never scores is an error by kind, and success is over the scored episodes, never a hidden 0."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from ale_roll.config import load_config
from ale_roll.rollout.agent_native import AgentEpisodeError
from ale_roll.trainer.controller import Controller
from ale_roll.types import StopReason, Trajectory, Turn

pytest.importorskip("ale_rock.envs", reason="ale-rock (environments) is not installed")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "guess_number.yaml"


class FlakyRunner:
    """Fails each state's first attempt (a lost sandbox); state eval-3 always fails; at most
    ``in_flight`` episodes run at once, which it records."""

    def __init__(self) -> None:
        self.attempts: Counter[str] = Counter()
        self.running = self.most = 0

    async def run(self, *, seed: int | None, initial_state_id: str, params: Any = None, **_: Any) -> Trajectory:
        self.attempts[initial_state_id] += 1
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await asyncio.sleep(0.01)
            if self.attempts[initial_state_id] == 1 or initial_state_id == "eval-3":
                raise AgentEpisodeError("sandbox lost", "sandbox_lost")
            ok = int(initial_state_id.split("-")[1]) % 2 == 0
            return Trajectory(turns=[Turn([1], [2], [0.0], stop_reason=StopReason.STOP)], reward=float(ok),
                              initial_state_id=initial_state_id, seed=seed, metadata={"success": ok})
        finally:
            self.running -= 1


def test_failed_episodes_are_rerun_and_counted_apart(tmp_path: Path) -> None:
    cfg = load_config(EXAMPLE, [f"output_dir={tmp_path}", "metrics.tensorboard=false", "rollout.max_attempts=3",
                                "rollout.episodes_in_flight=4", "rollout.group_size=4", "eval.episodes=10"])
    ctl = Controller(cfg)
    ctl.eval_runner = runner = FlakyRunner()  # type: ignore[assignment]
    out = asyncio.run(ctl.evaluate())
    # 9 states scored on their second attempt; eval-3 failed all 3 attempts: an error, not a failure.
    assert out["eval/episodes"] == 9 and out["eval/errors"] == 1 and out["eval/errors/sandbox_lost"] == 1
    assert out["eval/success"] == pytest.approx(5 / 9)  # eval-0, 2, 4, 6, 8 of the 9 scored
    assert runner.attempts["eval-3"] == 3 and runner.attempts["eval-0"] == 2
    assert runner.most <= 4  # no more at once than rollout runs (each would hold a sandbox)


class RecordingRunner:
    """Scores every episode; records the sampling each one was asked for."""

    def __init__(self) -> None:
        self.temperatures: list[float] = []

    async def run(self, *, seed: int | None, initial_state_id: str, params: Any = None, **_: Any) -> Trajectory:
        self.temperatures.append(params.temperature)
        return Trajectory(turns=[Turn([1], [2], [0.0], stop_reason=StopReason.STOP)], reward=1.0,
                          initial_state_id=initial_state_id, seed=seed, metadata={"success": True})


@pytest.mark.parametrize(("override", "expected"), [([], 0.0), (["eval.temperature=1.0"], 1.0)])
def test_held_out_episodes_are_greedy_unless_eval_temperature_is_set(tmp_path: Path, override: list[str],
                                                                     expected: float) -> None:
    cfg = load_config(EXAMPLE, [f"output_dir={tmp_path}", "metrics.tensorboard=false", "eval.episodes=6",
                                "rollout.temperature=0.7", *override])
    ctl = Controller(cfg)
    ctl.eval_runner = runner = RecordingRunner()  # type: ignore[assignment]
    out = asyncio.run(ctl.evaluate())
    assert out["eval/episodes"] == 6
    # Never the rollout's temperature: the held-out measurement is chosen on its own.
    assert runner.temperatures == [expected] * 6
