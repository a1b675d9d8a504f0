"""Scripts for the scripted model read from YAML and JSONL files, and their errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ale_flow import AgentStopReason
from ale_flow.events import ToolFinished
from ale_flow.models.base import model_info
from ale_flow.models.script_file import ScriptError, load_script, scripted_model
from ale_flow.models.scripted import Reply

EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "flow" / "hello.yaml"


def test_the_shipped_example_runs_its_tools(run_agent, ws):
    model = scripted_model(f"scripted:{EXAMPLE}")
    assert model_info(model) == {"model": f"scripted:{EXAMPLE}", "provider": "scripted"}
    events, stopped, _ = run_agent(model)
    assert stopped.reason == AgentStopReason.COMPLETED and "hello, world" in stopped.final_message
    assert (Path(ws.root) / "hello.txt").read_text() == "hello, world\n"
    names = [e.call.name for e in events if isinstance(e, ToolFinished) and e.call is not None]
    assert names == ["write_file", "list_directory", "read_file"]


def test_jsonl_lines_are_replies(tmp_path):
    path = tmp_path / "s.jsonl"
    lines = [{"text": "t", "calls": [{"name": "edit", "arguments": {"path": "a", "name": "x"}}]}, "done", {"finish_reason": "length"}]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    steps = load_script(path)
    assert isinstance(steps[0], Reply) and steps[0].calls[0].arguments == {"path": "a", "name": "x"}
    assert steps[1] == "done" and isinstance(steps[2], Reply) and steps[2].finish_reason == "length"


@pytest.mark.parametrize(
    ("name", "body", "expected"),
    [
        ("s.yaml", "- calls: [{name: shell, args: {}}]\n", "s.yaml: reply 1: calls.0.args: Extra inputs are not permitted"),
        ("s.yaml", "text: not a list\n", "s.yaml: expected a list of replies, got dict"),
        ("s.yaml", "- [unclosed\n", "s.yaml:2: not YAML"),
        ("s.jsonl", '"ok"\n{"text": \n', "s.jsonl:2: not JSON"),
    ],
)
def test_errors_name_the_file_and_reply(tmp_path, name, body, expected):
    (tmp_path / name).write_text(body)
    with pytest.raises(ScriptError) as err:
        load_script(tmp_path / name)
    assert expected in str(err.value) and str(tmp_path) in str(err.value)


def test_missing_file_and_empty_spec(tmp_path):
    with pytest.raises(ScriptError, match="no such script file"):
        scripted_model(f"scripted:{tmp_path}/nope.yaml")
    with pytest.raises(ScriptError, match="expected scripted:<file"):
        scripted_model("scripted:")
