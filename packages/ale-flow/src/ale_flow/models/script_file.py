"""Scripts for `ScriptedModel` read from a file, so the CLI runs without an LLM server:
`ale-flow --model scripted:examples/flow/hello.yaml -w /tmp/x "say hello"`.

A script is the model's replies in order. In YAML (or JSON) it is a list; in JSONL (`.jsonl`)
one reply per line. A reply is either a string (plain text; it may carry `<tool_call>` blocks)
or a mapping:

    - text: "I'll write the file."          # optional
      calls:                                 # optional: tool calls, run in order
        - name: write_file
          arguments: {path: hello.txt, content: "hi\\n"}
    - "Done."                               # text and no calls: the agent stops
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ale_flow.models.scripted import Reply, ScriptedModel, Step
from ale_flow.types import ToolCall

SCHEME = "scripted:"
"""Model-name prefix that selects a scripted model: `scripted:<path>`."""


class ScriptError(ValueError):
    """The script file is missing or malformed; the message names the file and the reply."""


class ScriptedCall(BaseModel):
    """One tool call in a scripted reply."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """Tool name (as the agent offers it: write_file, read_file, shell, ...)."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """The tool's arguments."""


class ScriptedReply(BaseModel):
    """One scripted model turn."""

    model_config = ConfigDict(extra="forbid")

    text: str = ""
    """What the model says."""
    calls: list[ScriptedCall] = Field(default_factory=list)
    """Tool calls; none (and text) ends the run."""
    finish_reason: str = "stop"
    """Reported finish reason ("length" exercises truncation handling)."""


def _items(path: Path) -> list[tuple[str, Any]]:
    """(where, raw reply) pairs; `where` is how errors name the reply."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        out: list[tuple[str, Any]] = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                out.append((f"{path}:{n}", json.loads(line)))
            except json.JSONDecodeError as e:
                raise ScriptError(f"{path}:{n}: not JSON: {e.msg}") from None
        return out
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ScriptError(f"{where}: not YAML: {getattr(e, 'problem', None) or e}") from None
    if not isinstance(data, list):
        raise ScriptError(f"{path}: expected a list of replies, got {type(data).__name__}")
    return [(f"{path}: reply {i}", item) for i, item in enumerate(data, 1)]


def load_script(path: str | Path) -> list[Step]:
    """The replies in `path` (YAML/JSON list or JSONL), ready for `ScriptedModel`."""
    p = Path(path)
    if not p.is_file():
        raise ScriptError(f"{p}: no such script file")
    steps: list[Step] = []
    for where, raw in _items(p):
        if isinstance(raw, str):
            steps.append(raw)
            continue
        try:
            reply = ScriptedReply.model_validate(raw)
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(x) for x in err["loc"]) or "reply"
            raise ScriptError(f"{where}: {loc}: {err['msg']}") from None
        # ScriptedModel gives every call a fresh id when it replays it.
        calls = [ToolCall(f"call_{i}", c.name, dict(c.arguments)) for i, c in enumerate(reply.calls)]
        steps.append(Reply(reply.text, calls, finish_reason=reply.finish_reason))
    return steps


def scripted_model(spec: str, context_window: int = 32_000) -> ScriptedModel:
    """`ScriptedModel` for a model name `scripted:<path>`; its `name` is that spec."""
    path = spec[len(SCHEME) :] if spec.startswith(SCHEME) else spec
    if not path:
        raise ScriptError(f"{spec!r}: expected {SCHEME}<file.yaml|file.jsonl>")
    model = ScriptedModel(load_script(path), context_window=context_window)
    model.name = f"{SCHEME}{path}"
    return model
