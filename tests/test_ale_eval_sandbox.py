"""`ale eval` through the real stack (LocalCluster, bubblewrap sandboxes, ModelProxy, ale-flow
inside the sandbox) against a scripted OpenAI-compatible server on a free port that solves one task
by writing its reference solution and gives up on the other: Pass@1 must count exactly that."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (apt bubblewrap) is not installed"),
]

SOLVED, GIVEN_UP = "binary-search-bounds", "nim-winning-move"


class Scripted:
    """Turn 1: write the reference solution of a task it knows (native tool call); then stop."""

    solutions: dict[str, dict[str, str]] = {}
    requests: list[dict[str, Any]] = []
    auth: list[str] = []

    @staticmethod
    def reply(body: dict[str, Any], auth: str) -> str | list[tuple[str, dict[str, Any]]]:
        Scripted.requests.append(body)
        Scripted.auth.append(auth)
        prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
        files = next((f for p, f in Scripted.solutions.items() if p in prompt), None)
        if files and not any(m["role"] == "assistant" for m in body["messages"]):
            return [("write_file", {"path": p, "content": c}) for p, c in files.items()]
        return "done" if files else "I give up."


@pytest.fixture()
def scripted_server(scripted_chat: Any) -> str:
    from ale_rock.tasks import load_suite

    task = next(t for t in load_suite() if t.id == SOLVED)
    Scripted.solutions = {task.spec.prompt.strip().splitlines()[0]: {k: v.decode() for k, v in task.solution.items()}}
    Scripted.requests, Scripted.auth = [], []
    return str(scripted_chat(Scripted.reply))


def test_eval_counts_pass_at_1_per_domain_and_saves_everything(scripted_server: str, tmp_path: Path) -> None:
    from ale.cli import app

    out = tmp_path / "eval"
    args = ["eval", "--base-url", scripted_server, "--model", "scripted", "--api-key", "upstream-key",
            "--task", SOLVED, "--task", GIVEN_UP, "--runs", "2", "--concurrency", "2", "--max-turns", "4",
            "--task-timeout", "120", "--out", str(out)]  # fmt: skip
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "debugging" in r.output and "games" in r.output and "pass@1" in r.output and str(out) in r.output

    res = json.loads((out / "results.json").read_text())
    assert {k: res[k] for k in ("suite", "model", "runs", "pass_at_1")} == {
        "suite": "builtin", "model": "scripted", "runs": 2, "pass_at_1": 0.5}  # fmt: skip
    assert res["pass_at_1_per_run"] == [0.5, 0.5] and res["errors"] == 0 and res["sandboxes_left"] == 0
    assert res["domains"] == {
        "debugging": {"tasks": 1, "pass_at_1": 1.0, "scored": 2, "failures": 0, "errors": 0, "mean_turns": 2.0},
        "games": {"tasks": 1, "pass_at_1": 0.0, "scored": 2, "failures": 2, "errors": 0, "mean_turns": 1.0},
    }
    tasks = {t["id"]: t for t in res["tasks"]}
    assert set(tasks) == {SOLVED, GIVEN_UP}
    for tid, t in tasks.items():
        assert [x["run"] for x in t["runs"]] == [1, 2]
        assert all(x["stop_reason"] == "completed" and x["tests"] for x in t["runs"]), t
        assert all(x["success"] == (tid == SOLVED) for x in t["runs"])
    assert (out / "table.txt").read_text().count("%") == 3

    # Every model call went through the proxy (which added the upstream key) and was recorded.
    assert len(Scripted.requests) == 2 * (2 + 1) and set(Scripted.auth) == {"Bearer upstream-key"}
    assert all(req["tools"] for req in Scripted.requests)  # native tool calling for --base-url
    for run in (1, 2):
        lines = [json.loads(x) for x in (out / "trajectories" / f"run-{run}.jsonl").read_text().splitlines()]
        assert sorted(x["task"] for x in lines) == sorted([SOLVED, GIVEN_UP])
        for line in lines:
            assert len(line["calls"]) == line["turns"] == (2 if line["task"] == SOLVED else 1)
            turns = [t for t in line["agent_trajectory"] if t["type"] == "turn"]
            assert len(turns) == line["turns"]
            if line["task"] == SOLVED:
                assert turns[0]["tool_calls"][0]["name"] == "write_file" and not turns[0]["error"]
