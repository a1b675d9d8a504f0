"""Trajectories: fsynced per step, survive SIGKILL, fold irrelevance marks, tolerate torn lines."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from ale_flow.trajectory import ObservationRecord, TrajectoryWriter, TurnRecord, load_trajectory

CHILD = textwrap.dedent(
    """
    import sys
    from ale_flow import Agent, Settings
    from ale_flow.models.scripted import Reply, ScriptedModel, call
    steps = [Reply(calls=[call("write_file", path=f"f{i}.txt", content=str(i))]) for i in range(3)]
    steps.append(Reply(calls=[call("shell", command="touch started; sleep 60")]))
    agent = Agent(ScriptedModel(steps), sys.argv[1], Settings(mode="yolo"), trajectory_path=sys.argv[2])
    for _ in agent.run("write three files then hang"):
        pass
    """
)


def test_trajectory_survives_kill_9(tmp_path: Path):
    ws, traj = tmp_path / "ws", tmp_path / "t.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(ws), str(traj)], start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (ws / "started").exists():
            assert time.monotonic() < deadline, "child never reached the hanging step"
            assert proc.poll() is None, "child exited early"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    rec = load_trajectory(traj)
    assert rec.task == "write three files then hang" and rec.stop_reason is None
    assert [t.index for t in rec.turns] == [1, 2, 3]
    assert rec.turns[2].observations[0].content.startswith("Wrote 1 bytes to f2.txt")


def test_torn_last_line_and_marks(tmp_path: Path):
    p = tmp_path / "t.jsonl"
    w = TrajectoryWriter(p)
    w.header("id1", "task", {"k": "v"})
    w.turn(TurnRecord(1, "a", observations=[ObservationRecord("c1", "boom", True)], error=True))
    w.turn(TurnRecord(2, "b"))
    w.mark_irrelevant([1])
    w.end("completed")
    w.close()
    with open(p, "a") as f:
        f.write('{"type": "turn", "index": 3, "cont')
    rec = load_trajectory(p)
    assert rec.stop_reason == "completed" and rec.metadata == {"k": "v"}
    assert [(t.index, t.error, t.relevant) for t in rec.turns] == [(1, True, False), (2, False, True)]
