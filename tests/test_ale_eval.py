"""`ale eval` logic: options, task selection, scoring, the agent's command and its output."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ale.eval import agent
from ale.eval.config import EvalConfig
from ale.eval.report import summarize, table_text
from ale.eval.run import EpisodeResult, load_tasks


def test_exactly_one_upstream_and_the_names_it_needs() -> None:
    with pytest.raises(ValidationError, match="exactly one"):
        EvalConfig()
    with pytest.raises(ValidationError, match="exactly one"):
        EvalConfig(base_url="http://x/v1", model="m", local_model="dir")
    with pytest.raises(ValidationError, match="--model is required"):
        EvalConfig(base_url="http://x/v1")
    with pytest.raises(ValidationError, match="--proxy-address"):
        EvalConfig(inference_address="h:1", admin_address="h:2")
    with pytest.raises(ValidationError, match="--backend docker needs --admin-address"):
        EvalConfig(inference_address="h:1", backend="docker")
    openai = EvalConfig(base_url="http://x/v1", model="m")
    assert (openai.upstream, openai.native_tools, openai.effective_split) == ("openai", True, "held_out")
    ours = EvalConfig(inference_address="h:1", suite="/some/dir")
    assert (ours.upstream, ours.native_tools, ours.effective_split) == ("inference", False, "all")
    assert EvalConfig(inference_address="h:1", tool_format="native").native_tools


def test_default_suite_is_the_builtin_held_out_split() -> None:
    tasks = load_tasks(EvalConfig(inference_address="h:1"))
    assert len(tasks) >= 16 and {t.spec.split.value for t in tasks} == {"held_out"}
    assert len({t.spec.domain for t in tasks}) == 8
    assert [(t.spec.domain.value, t.id) for t in tasks] == sorted((t.spec.domain.value, t.id) for t in tasks)
    train = load_tasks(EvalConfig(inference_address="h:1", split="train"))
    assert {t.spec.split.value for t in train} == {"train"} and not {t.id for t in train} & {t.id for t in tasks}


def test_task_filter_and_directory_suites(tmp_path: object) -> None:
    from pathlib import Path

    from ale_rock.tasks import write_task

    picked = load_tasks(EvalConfig(inference_address="h:1", tasks=["nim-winning-move"]))
    assert [t.id for t in picked] == ["nim-winning-move"]
    with pytest.raises(ValueError, match="no-such-task"):
        load_tasks(EvalConfig(inference_address="h:1", tasks=["no-such-task"]))
    with pytest.raises(ValueError, match="not 'builtin'"):
        load_tasks(EvalConfig(inference_address="h:1", suite="nonexistent-suite"))
    # A directory holds train-split tasks by default: its default split is "all".
    root = Path(str(tmp_path))
    write_task(picked[0], root / "one")
    assert [t.id for t in load_tasks(EvalConfig(inference_address="h:1", suite=str(root)))] == ["nim-winning-move"]
    with pytest.raises(ValueError, match="no tasks"):
        load_tasks(EvalConfig(inference_address="h:1", suite=str(root), split="train"))


def _ep(task: str, domain: str, run: int, success: bool, turns: int) -> EpisodeResult:
    return EpisodeResult(task=task, domain=domain, run=run, success=success, reward=float(success), turns=turns)


def test_pass_at_1_is_the_per_run_rate_averaged_over_runs() -> None:
    cfg = EvalConfig(base_url="http://x/v1", model="m", runs=2)
    results = [
        _ep("a", "games", 1, True, 2), _ep("b", "games", 1, False, 4), _ep("c", "security", 1, False, 1),
        _ep("a", "games", 2, True, 2), _ep("b", "games", 2, True, 6), _ep("c", "security", 2, False, 3),
    ]  # fmt: skip
    s = summarize(cfg, results, ["a", "b", "c"])
    assert s["pass_at_1_per_run"] == [pytest.approx(1 / 3, abs=1e-4), pytest.approx(2 / 3, abs=1e-4)]
    assert s["pass_at_1"] == pytest.approx(0.5, abs=1e-4)
    assert s["domains"] == {
        "games": {"tasks": 2, "pass_at_1": 0.75, "scored": 4, "failures": 1, "errors": 0, "mean_turns": 3.5},
        "security": {"tasks": 1, "pass_at_1": 0.0, "scored": 2, "failures": 2, "errors": 0, "mean_turns": 2.0},
    }
    by_id = {t["id"]: t for t in s["tasks"]}
    assert by_id["b"]["pass_at_1"] == 0.5 and [r["success"] for r in by_id["b"]["runs"]] == [False, True]
    assert (s["suite"], s["model"], s["runs"], s["episodes"]) == ("builtin", "m", 2, 6)
    text = table_text(s)
    for needle in ("games", "security", "75.0%", "50.0%", "3.5"):
        assert needle in text


def test_errors_are_counted_apart_from_failures_and_out_of_pass_at_1() -> None:
    cfg = EvalConfig(base_url="http://x/v1", model="m", runs=2)
    lost = EpisodeResult(task="b", domain="games", run=1, error="sandbox died", error_kind="sandbox_lost")
    results = [_ep("a", "games", 1, True, 2), lost, _ep("a", "games", 2, False, 2), _ep("b", "games", 2, True, 3)]
    s = summarize(cfg, results, ["a", "b"])
    # Run 1 scored one task (solved), run 2 two (one solved): the error is no 0 in either.
    assert s["pass_at_1_per_run"] == [1.0, 0.5] and s["pass_at_1"] == 0.75
    assert (s["episodes"], s["scored"], s["failures"], s["errors"]) == (4, 3, 1, 1)
    assert s["errors_by_kind"] == {"sandbox_lost": 1}
    by_id = {t["id"]: t for t in s["tasks"]}
    assert (by_id["b"]["errors"], by_id["b"]["failures"], by_id["b"]["pass_at_1"]) == (1, 0, 1.0)
    assert [r["status"] for r in by_id["b"]["runs"]] == ["error", "success"]
    assert by_id["b"]["runs"][0]["error_kind"] == "sandbox_lost"
    # Nothing scored: no Pass@1 at all (not 0%).
    only = summarize(EvalConfig(base_url="http://x/v1", model="m", runs=1), [lost], ["b"])
    assert only["pass_at_1"] is None and only["pass_at_1_per_run"] == [None] and only["errors"] == 1
    assert "—" in table_text(only) and "0.0%" not in table_text(only)


def test_agent_command_and_its_output() -> None:
    cmd = agent.agent_command("fix it's bug", max_turns=7, max_tokens=99, temperature=0.5, native_tools=False,
                              time_limit_s=50, settings=["tools.shell_timeout_s=30"], python="/py")  # fmt: skip
    assert "--max-steps 7" in cmd and "--text-tools" in cmd and "model.max_tokens=99" in cmd
    assert "tools.shell_timeout_s=30" in cmd and "'fix it'\"'\"'s bug'" in cmd and cmd.startswith("mkdir")
    assert "--text-tools" not in agent.agent_command("x" * 30, max_turns=1, max_tokens=1, temperature=0,
                                                     native_tools=True, time_limit_s=1)  # fmt: skip
    out = f'log line\n{agent.TRAJECTORY_MARKER}\n{{"type": "header"}}\n{{"type": "end", "stop_reason": "max_steps"}}\nstderr tail\n'
    lines, log = agent.split_output(out)
    assert [r["type"] for r in lines] == ["header", "end"] and agent.stop_reason(lines) == "max_steps"
    assert "log line" in log and "stderr tail" in log
    assert agent.split_output("no marker") == ([], "no marker")
    assert agent.stop_reason([{"type": "header"}]) == "killed"


def test_agent_zip_holds_ale_flow() -> None:
    import io
    import zipfile

    names = zipfile.ZipFile(io.BytesIO(agent.agent_zip())).namelist()
    assert "ale_flow/cli.py" in names and "ale_flow/agent.py" in names
    assert not [n for n in names if "__pycache__" in n]


def test_long_commands_run_detached_and_are_killed_at_the_budget(tmp_path: object) -> None:
    """The same outcome as one blocking exec: output, exit code, and a kill of the whole group."""
    import os

    from ale_rock.envs.sandbox import LocalDirProvider

    from ale.eval.detached import DetachedExecProvider

    # LocalDirProvider runs on the host: keep the job files in this test's dir, not the host's /tmp.
    jobs = f"{tmp_path}/jobs"
    provider = DetachedExecProvider(LocalDirProvider(), inline_s=0.5, poll_s=0.1, kill_grace_s=0.5, jobs_dir=jobs)
    sid = provider.create()
    try:
        done = provider.exec(sid, "echo out; echo \"it's\" >&2; sleep 0.6; pwd; exit 3", 30)
        assert (done.exit_code, done.timed_out) == (3, False)
        assert done.output.splitlines()[:2] == ["out", "it's"] and "ale-task-" in done.output
        cut = provider.exec(sid, "echo start; (sleep 61.25; echo late) & sleep 62.5; echo never", 1.5)
        assert (cut.exit_code, cut.timed_out, cut.output) == (124, True, "start\n")
        assert [e["kind"] for e in cut.safety_events] == ["limit_hit"]
        # the kill reached the whole group, the background child included
        assert provider.exec(sid, "pgrep -f 'sleep 6[12].[25]5*' || echo none", 0.5).output == "none\n"
        assert os.listdir(jobs) == []  # each job's files are removed once it is read
    finally:
        provider.delete(sid)


def test_missing_bubblewrap_is_named_with_its_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    from typer.testing import CliRunner

    from ale.cli import app

    monkeypatch.setenv("PATH", "/nonexistent")
    r = CliRunner().invoke(app, ["eval", "--inference-address", "127.0.0.1:1", "--out", f"{tmp_path}/o"])
    assert r.exit_code == 2 and "apt-get install -y bubblewrap" in r.output, r.output


def test_eval_help_imports_nothing_heavy() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from ale.cli import app; from typer.testing import CliRunner; "
        "r = CliRunner().invoke(app, ['eval', '--help']); print(r.output); "
        "print('HEAVY', [m for m in ('torch', 'transformers', 'grpc', 'ale_rock', 'ale_roll', 'ale_flow') if m in sys.modules])"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "--base-url" in r.stdout and "--local-model" in r.stdout and "HEAVY []" in r.stdout, r.stdout
