"""`ale eval` over the full stack of processes: the `ale` CLI serves a tiny random-init model with our
InferenceService, puts the ModelProxy in front of it, starts an admin and a bubblewrap worker, and
runs ale-flow inside a sandbox on a few held-out tasks. The random model fails them; the table, the
results and the trajectories must still be complete, and nothing may be left running."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ._procs import processes_mentioning

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (apt bubblewrap) is not installed"),
]

TASKS = {"nim-winning-move": "games", "time-parse-12h": "debugging", "passwd-audit": "sysadmin"}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    from ale_roll.models.tiny import build_tiny_model

    # ale-flow's system prompt and tool list are a few thousand byte-level tokens.
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-qwen2", max_position_embeddings=8192)


def test_eval_on_held_out_tasks_with_a_local_model(tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "eval"
    args = [sys.executable, "-m", "ale.cli", "eval", "--local-model", str(tiny_model), "--runs", "1",
            "--concurrency", "3", "--max-turns", "2", "--max-tokens", "16", "--task-timeout", "240", "--out", str(out)]
    for t in TASKS:
        args += ["--task", t]
    r = subprocess.run(args, capture_output=True, text=True, timeout=540)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]

    # The table: a row per domain and the overall row, and where the results are.
    for needle in ("domain", "tasks", "pass@1", "mean turns", *TASKS.values(), "all", str(out)):
        assert needle in r.stdout, r.stdout
    res = json.loads((out / "results.json").read_text())
    assert {"suite", "model", "runs", "pass_at_1", "domains", "tasks"} <= set(res)
    assert (res["suite"], res["split"], res["runs"], res["model"]) == ("builtin", "held_out", 1, str(tiny_model))
    assert res["domains"].keys() == set(TASKS.values())
    assert all(d["tasks"] == 1 and 0.0 <= d["pass_at_1"] <= 1.0 for d in res["domains"].values())
    assert res["pass_at_1"] == pytest.approx(sum(t["pass_at_1"] for t in res["tasks"]) / 3, abs=1e-3)
    assert {t["id"]: t["domain"] for t in res["tasks"]} == TASKS
    for t in res["tasks"]:
        (ep,) = t["runs"]
        assert ep["error"] == "" and ep["tests"] and 1 <= ep["turns"] <= 2, ep
    assert res["errors"] == 0 and res["sandboxes_left"] == 0
    assert (out / "table.txt").read_text().count("%") == 4

    # One trajectory file per run; each model call carries the exact token ids the model saw.
    lines = [json.loads(x) for x in (out / "trajectories" / "run-1.jsonl").read_text().splitlines()]
    assert sorted(x["task"] for x in lines) == sorted(TASKS)
    for line in lines:
        assert line["calls"] and all(c["prompt_token_ids"] and c["completion_token_ids"] for c in line["calls"])
        assert line["agent_trajectory"][0]["type"] == "header"

    # Nothing of ours is left: no sandbox, no admin or worker, no mount.
    owned = res["owned_paths"]
    assert len(owned) == 2 and str(out) in owned[0]
    assert processes_mentioning(owned) == []
    assert [m for m in Path("/proc/mounts").read_text().splitlines() if any(p in m for p in owned)] == []


def blocking_task(root: Path, marker: str) -> Path:
    """A one-task suite whose setup blocks until it is killed: its episode is under way for as long
    as the test needs, on any machine. ``marker`` names the blocking process (seen in /proc)."""
    task = root / "blocks-in-setup"
    for sub in ("setup", "tests", "solution"):
        (task / sub).mkdir(parents=True)
    (task / "task.yaml").write_text(
        "id: blocks-in-setup\ndomain: games\ntitle: Setup that waits until killed\n"
        "prompt: Nothing to do; the setup of this task never ends on its own.\n"
        "limits: {setup_s: 3600, agent_s: 60, test_s: 30}\n"
    )
    (task / "setup" / "setup.sh").write_text(f"exec python3 -c 'import time; time.sleep(3600)' {marker}\n")
    (task / "tests" / "test_task.py").write_text("print('FAIL never: the setup never ends')\nraise SystemExit(1)\n")
    (task / "solution" / "solve.sh").write_text("true\n")
    return root


def test_sigterm_mid_run_stops_everything(tiny_model: Path, tmp_path: Path) -> None:
    import time
    import uuid

    out = tmp_path / "eval"
    # The episode's setup blocks until killed, so the run is under way when the signal comes, however
    # fast the machine is; the test signals as soon as that setup runs (its process is seen).
    marker = f"ale-sigterm-{uuid.uuid4().hex[:12]}"
    suite = blocking_task(tmp_path / "suite", marker)
    args = [sys.executable, "-m", "ale.cli", "eval", "--local-model", str(tiny_model), "--runs", "1",
            "--max-tokens", "16", "--suite", str(suite), "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 240
        while not processes_mentioning([marker]):  # the episode's sandbox is up and its setup runs
            assert proc.poll() is None, f"ale eval ended before its episode was under way: {proc.communicate()[0]}"
            assert time.monotonic() < deadline, "the episode's setup never started"
            time.sleep(0.1)
        proc.terminate()
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "interrupted" in output, output[-3000:]
    owned = json.loads((out / "services.json").read_text())["owned_paths"]
    assert len(owned) == 2
    assert processes_mentioning([*owned, marker]) == []
    assert [m for m in Path("/proc/mounts").read_text().splitlines() if any(p in m for p in owned)] == []
