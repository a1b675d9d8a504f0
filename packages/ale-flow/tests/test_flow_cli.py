"""The `ale-flow` console script end to end, against a real local OpenAI-compatible endpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ale_flow.trajectory import load_trajectory

EXE = str(Path(sys.executable).with_name("ale-flow"))


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [EXE] if os.path.exists(EXE) else [sys.executable, "-m", "ale_flow.cli"]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=120, cwd=cwd, env={**os.environ, **(env or {})})


def test_one_shot_creates_file_and_trajectory(server, tmp_path):
    server.queue.append((200, server.completion(None, [server.native_call("write_file", json.dumps({"path": "hello.txt", "content": "hi"}))], "tool_calls")))
    server.queue.append((200, server.completion("Created hello.txt containing hi.")))
    ws = tmp_path / "proj"
    ws.mkdir()
    r = cli("-p", "create hello.txt containing hi", "--base-url", server.url, "--model", "m", "--workspace", str(ws), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (ws / "hello.txt").read_text() == "hi"
    assert r.stdout.strip() == "Created hello.txt containing hi."
    trajs = list((ws / ".ale" / "trajectories").glob("*.jsonl"))
    assert len(trajs) == 1
    rec = load_trajectory(trajs[0])
    assert rec.stop_reason == "completed" and rec.turns[0].tool_calls[0]["name"] == "write_file"
    assert server.requests[0]["body"]["model"] == "m"
    assert rec.metadata["model"] == "m" and rec.metadata["provider"] == "openai"  # the name asked for, not the class


def test_json_events_and_max_steps(server, tmp_path):
    loop = server.completion(None, [server.native_call("list_directory", "{}")], "tool_calls")
    server.queue += [(200, loop)] * 5
    r = cli("-p", "look", "--base-url", server.url, "--model", "m", "-w", str(tmp_path), "--max-steps", "2", "--json", cwd=tmp_path)
    assert r.returncode == 1
    events = [json.loads(line) for line in r.stdout.splitlines()]
    assert events[0]["kind"] == "session_started"
    assert events[-1]["kind"] == "stopped" and events[-1]["reason"] == "max_steps"


def test_shell_needs_yolo_in_one_shot_mode(server, tmp_path):
    call = server.completion(None, [server.native_call("shell", json.dumps({"command": "touch made_by_shell"}))], "tool_calls")
    server.queue += [(200, call), (200, server.completion("ok")), (200, call), (200, server.completion("ok"))]
    cli("-p", "touch", "--base-url", server.url, "--model", "m", "-w", str(tmp_path), cwd=tmp_path)
    assert not (tmp_path / "made_by_shell").exists()
    cli("-p", "touch", "--base-url", server.url, "--model", "m", "-w", str(tmp_path), "--yolo", cwd=tmp_path)
    assert (tmp_path / "made_by_shell").exists()


def test_bad_settings_and_missing_model_are_clear_errors(tmp_path):
    (tmp_path / ".ale").mkdir()
    (tmp_path / ".ale" / "settings.yaml").write_text("limits:\n  max_steps: many\n")
    r = cli("-p", "x", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "-w", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 2 and "limits.max_steps" in r.stderr
    r = cli("-p", "x", "-w", str(tmp_path / "empty"), cwd=tmp_path)
    assert r.returncode == 2 and "--base-url" in r.stderr
    r = cli("-p", "x", "--base-url", "http://h/v1", "--model", "m", "-c", "nonsense", "-w", str(tmp_path / "e2"), cwd=tmp_path)
    assert r.returncode == 2 and "key=value" in r.stderr


def test_sandbox_workspace_is_a_clear_error(tmp_path):
    r = cli("-p", "x", "--base-url", "http://h/v1", "--model", "m", "-w", "sandbox://sb-1", cwd=tmp_path)
    assert r.returncode == 2 and "sandbox://" in r.stderr


def test_interactive_session_reads_prompts_until_empty_line(server, tmp_path):
    server.queue += [(200, server.completion("first answer")), (200, server.completion("second answer"))]
    cmd = [EXE] if os.path.exists(EXE) else [sys.executable, "-m", "ale_flow.cli"]
    r = subprocess.run(
        cmd + ["--base-url", server.url, "--model", "m", "-w", str(tmp_path)],
        input="first task\nsecond task\n\n", capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["first", "answer", "second", "answer"]
    users = [m["content"] for req in server.requests for m in req["body"]["messages"] if m["role"] == "user"]
    assert users == ["first task", "second task"]
    trajs = list((tmp_path / ".ale" / "trajectories").glob("*.jsonl"))
    assert sorted(load_trajectory(t).task for t in trajs) == ["first task", "second task"]  # one file per run


EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "flow" / "hello.yaml"


def test_scripted_model_runs_the_example_without_a_server(tmp_path):
    r = cli("-w", str(tmp_path), "--model", f"scripted:{EXAMPLE}", "say hello", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "hello.txt").read_text() == "hello, world\n"
    assert r.stdout.strip() == 'Done. hello.txt contains "hello, world".'
    assert "→ write_file" in r.stderr and "→ read_file" in r.stderr
    rec = load_trajectory(next((tmp_path / ".ale" / "trajectories").glob("*.jsonl")))
    assert rec.metadata["model"] == f"scripted:{EXAMPLE}" and rec.metadata["provider"] == "scripted"


def test_failing_hooks_are_visible_in_json_and_text(tmp_path):
    script = tmp_path / "s.jsonl"
    script.write_text(json.dumps({"calls": [{"name": "list_directory"}]}) + "\n" + json.dumps("ok") + "\n")
    hooks = "hooks={SessionStart: [{command: 'echo cache cold >&2; exit 3'}], PreToolUse: [{command: no-such-hook-xyz}]}"
    args = ("-w", str(tmp_path), "--model", f"scripted:{script}", "-c", hooks, "look")
    r = cli(*args, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    failed = [e for e in map(json.loads, r.stdout.splitlines()) if e["kind"] == "hook_failed"]
    assert [(e["hook_event"], e["command"], e["exit_code"]) for e in failed] == [
        ("SessionStart", "echo cache cold >&2; exit 3", 3),
        ("PreToolUse", "no-such-hook-xyz", 127),
    ]
    assert failed[0]["error"] == "cache cold" and "not found" in failed[1]["error"]
    r = cli(*args, cwd=tmp_path)
    warnings = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: SessionStart hook 'echo cache cold >&2; exit 3' exited with 3: cache cold",
        "warning: PreToolUse hook 'no-such-hook-xyz' exited with 127: bash: line 1: no-such-hook-xyz: command not found",
    ]


def test_missing_workspace_is_an_error_unless_create(tmp_path):
    missing = tmp_path / "typo" / "ws"
    r = cli("-w", str(missing), "--model", f"scripted:{EXAMPLE}", "say hello", cwd=tmp_path)
    assert r.returncode == 2 and not missing.exists()
    assert r.stderr.strip().splitlines() == [f"workspace {missing} does not exist (pass --create to make it)"]
    (tmp_path / "file").write_text("")
    r = cli("-w", str(tmp_path / "file"), "--model", f"scripted:{EXAMPLE}", "x", cwd=tmp_path)
    assert r.returncode == 2 and "is not a directory" in r.stderr
    r = cli("-w", str(missing), "--create", "--model", f"scripted:{EXAMPLE}", "say hello", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (missing / "hello.txt").exists()


def test_bad_script_and_double_task_are_clear_errors(tmp_path):
    (tmp_path / "bad.yaml").write_text("- calls: [{tool: shell}]\n")
    r = cli("-w", str(tmp_path), "--model", f"scripted:{tmp_path}/bad.yaml", "x", cwd=tmp_path)
    assert r.returncode == 2 and "bad.yaml: reply 1: calls.0.name: Field required" in r.stderr
    r = cli("-w", str(tmp_path), "--model", f"scripted:{EXAMPLE}", "-p", "x", "y", cwd=tmp_path)
    assert r.returncode == 2 and "either -p TEXT or TASK" in r.stderr
