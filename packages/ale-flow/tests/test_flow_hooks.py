"""Hooks: every event fires with JSON on stdin; exit 2 blocks; hangs time out; the guard refuses."""

from __future__ import annotations

import json
import sys
import time

import pytest
from ale_flow import AgentStopReason
from ale_flow.events import HookFailed, SessionStarted, Stopped, ToolFinished, ToolStarted
from ale_flow.hooks import HookRunner, HookSpec, guard
from ale_flow.models.scripted import Reply, ScriptedModel, call

EVENTS = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PreCompress", "Stop", "SessionEnd"]


def recorder(log) -> dict:
    cmd = f"{sys.executable} -c \"import sys; open({str(log)!r}, 'a').write(sys.stdin.read().replace(chr(10), ' ') + chr(10))\""
    return {ev: [{"command": cmd}] for ev in EVENTS}


def test_every_hook_event_fires_with_json(run_agent, tmp_path):
    log = tmp_path / "hooks.log"
    model = ScriptedModel([Reply(calls=[call("shell", command="echo " + "x" * 600)]), Reply(calls=[call("list_directory")]), "done"], context_window=400)
    run_agent(model, hooks=recorder(log), compression={"threshold": 0.3, "keep_recent_turns": 1, "keep_recent_fraction": 0.05})
    records = [json.loads(line) for line in log.read_text().splitlines()]
    seen = [r["hook_event_name"] for r in records]
    for ev in EVENTS:
        assert ev in seen, f"{ev} did not fire: {seen}"
    pre = next(r for r in records if r["hook_event_name"] == "PreToolUse")
    assert pre["tool_name"] == "shell" and pre["tool_input"]["command"].startswith("echo")
    post = next(r for r in records if r["hook_event_name"] == "PostToolUse")
    assert "xxxx" in post["tool_response"]
    assert next(r for r in records if r["hook_event_name"] == "UserPromptSubmit")["prompt"] == "do the task"
    assert seen[0] == "SessionStart" and seen[-1] == "SessionEnd"


def test_pre_tool_use_block_with_matcher(run_agent, ws):
    hooks = {"PreToolUse": [{"command": "echo 'no writes to secrets' >&2; exit 2", "matcher": "^write_file$"}]}
    events, _, _ = run_agent([Reply(calls=[call("write_file", path="secret", content="x"), call("shell", command="echo fine")]), "ok"], hooks=hooks)
    r = [e.result for e in events if isinstance(e, ToolFinished)]
    assert r[0].blocked and "no writes to secrets" in r[0].content
    assert not r[1].blocked and "fine" in r[1].content


def test_user_prompt_submit_can_refuse(run_agent):
    _, stopped, _ = run_agent(["never"], hooks={"UserPromptSubmit": [{"command": "echo 'prompt refused' >&2; exit 2"}]})
    assert stopped.reason == AgentStopReason.BLOCKED and stopped.detail == "prompt refused"


def test_stop_hook_sends_agent_back_once(run_agent, tmp_path):
    flag = tmp_path / "once"
    cmd = f"if [ -e {flag} ]; then exit 0; fi; touch {flag}; echo 'run the tests first' >&2; exit 2"
    model = ScriptedModel(["finished?", "now finished"])
    _, stopped, _ = run_agent(model, hooks={"Stop": [{"command": cmd}]})
    assert stopped.final_message == "now finished"
    assert model.seen[1][-1]["content"] == "run the tests first"


def test_hanging_hook_times_out_and_agent_continues(run_agent):
    hooks = {"PreToolUse": [{"command": "sleep 30", "timeout_s": 0.5}]}
    t0 = time.monotonic()
    events, stopped, _ = run_agent([Reply(calls=[call("shell", command="echo ran")]), "ok"], hooks=hooks)
    assert time.monotonic() - t0 < 25  # far below the 30 s the command/hook would take
    r = [e.result for e in events if isinstance(e, ToolFinished)][0]
    assert "ran" in r.content and stopped.reason == AgentStopReason.COMPLETED


def test_runner_reports_timeouts_and_failures(tmp_path):
    runner = HookRunner({"Stop": [HookSpec(command="sleep 5", timeout_s=0.3), HookSpec(command="exit 1")]}, str(tmp_path))
    out = runner.run("Stop", {})
    assert not out.blocked and "timed out" in out.warnings[0] and "exited with 1" in out.warnings[1]


def test_failing_hooks_are_events_and_never_block(run_agent):
    hooks = {
        "SessionStart": [{"command": "echo 'cannot warm the cache' >&2; exit 3"}, {"command": "exit 2"}],
        "PreToolUse": [{"command": "no-such-hook-command-xyz"}],
        "SessionEnd": [{"command": "exit 4"}],
    }
    events, stopped, _ = run_agent([Reply(calls=[call("shell", command="echo ran")]), "ok"], hooks=hooks)
    assert stopped.reason == AgentStopReason.COMPLETED  # failures never block, exit 2 included where blocking means nothing
    assert "ran" in [e.result for e in events if isinstance(e, ToolFinished)][0].content
    failed = [e for e in events if isinstance(e, HookFailed)]
    assert [(f.hook_event, f.exit_code) for f in failed] == [("SessionStart", 3), ("SessionStart", 2), ("PreToolUse", 127), ("SessionEnd", 4)]
    assert failed[0].error == "cannot warm the cache" and "not found" in failed[2].error and failed[2].command == "no-such-hook-command-xyz"
    kinds = [type(e) for e in events]
    # Each failure comes out before the event of the step that ran it; Stopped stays last.
    assert kinds.index(SessionStarted) < events.index(failed[0]) and events.index(failed[2]) < kinds.index(ToolStarted)
    assert isinstance(events[-2], HookFailed) and isinstance(events[-1], Stopped)


def test_subagent_hook_failures_reach_the_parent_stream(run_agent):
    model = ScriptedModel([Reply(calls=[call("task", prompt="look")]), "child done", "parent done"])
    events, stopped, _ = run_agent(model, hooks={"SessionStart": [{"command": "exit 5"}]})
    failed = [e for e in events if isinstance(e, HookFailed)]
    assert stopped.reason == AgentStopReason.COMPLETED
    assert [(f.hook_event, f.exit_code) for f in failed] == [("SessionStart", 5), ("SessionStart", 5)]  # parent, child
    assert events.index(failed[1]) < [type(e) for e in events].index(ToolFinished)  # before the task tool's result


@pytest.mark.parametrize("cmd", ["rm -rf /", "rm -rf / ", "sudo rm -fr /*", "rm -r -f ~", "rm --no-preserve-root -rf /", "mkfs.ext4 /dev/sda1", "dd if=/dev/zero of=/dev/sda"])
def test_guard_blocks_destructive_commands(cmd):
    assert guard("shell", {"command": cmd}, "/w") is not None


@pytest.mark.parametrize("cmd", ["rm -rf build/", "rm -rf ./tmp", "ls /", "rm -f /tmp/x.txt", "echo rm -rf"])
def test_guard_allows_ordinary_commands(cmd):
    assert guard("shell", {"command": cmd}, "/w") is None


def test_guard_blocks_writes_outside_workspace(run_agent):
    events, _, _ = run_agent([Reply(calls=[call("write_file", path="/etc/evil", content="x"), call("edit", path="../x", old_string="a", new_string="b")]), "ok"])
    r = [e.result for e in events if isinstance(e, ToolFinished)]
    assert all(x.blocked and "outside the workspace" in x.content for x in r)
