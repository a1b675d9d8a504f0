"""What the chat template is given: OpenAI messages normalised to the shapes every template can
render, and — for templates without tool support — tools and tool calls rendered as text.

The text format (Hermes / Qwen2.5 style; the proxy's parser, :mod:`ale_rock.proxy.toolcalls`, reads
the calls back, so a model trained on it round-trips):

- the tools go into the system message (a system message is added first if there is none)::

      # Tools

      You may call one or more functions to assist with the user query.

      You are provided with function signatures within <tools></tools> XML tags:
      <tools>
      {"type": "function", "function": {"name": ..., "description": ..., "parameters": {...}}}
      </tools>

      For each function call, return a json object with function name and arguments within
      <tool_call></tool_call> XML tags:
      <tool_call>
      {"name": <function-name>, "arguments": <args-json-object>}
      </tool_call>

- an assistant turn's tool calls are appended to its text, one
  ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`` block each;
- tool results become one user turn holding a ``<tool_response>\\n...\\n</tool_response>`` block per
  result (consecutive results share the turn).

Always: ``content`` that is null or absent becomes ``""``; a list of text parts becomes their text
joined by newlines; the ``developer`` role is given as ``system``. A template that renders tools
natively (it mentions ``tools`` / ``tool_calls``) gets them as structured data, with each call's
``arguments`` as an object (what Hugging Face templates expect).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

TOOLS_HEADER = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
TOOLS_FOOTER = (
    "</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)


@dataclass(frozen=True)
class TemplateCaps:
    """What a chat template renders natively."""

    tools: bool = False
    """It renders a ``tools`` list (the schemas)."""
    tool_calls: bool = False
    """It renders assistant ``tool_calls`` and ``tool`` messages."""


def template_caps(template: str) -> TemplateCaps:
    """Guess from a Jinja chat template's text whether it renders tools and tool calls."""
    return TemplateCaps(bool(re.search(r"\btools\b", template)), bool(re.search(r"\btool_calls\b", template)))


def text_of(content: Any) -> str:
    """The text of an OpenAI ``content``: a string, null, or a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = [p.get("text", p.get("refusal", "")) for p in content if isinstance(p, dict)]
    return "\n".join(str(p) for p in parts)


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            return raw  # the model wrote something that is not JSON: show it as it was
    return raw


def render_call(call: dict[str, Any]) -> str:
    """One tool call in the text format."""
    fn = call.get("function") or {}
    obj = {"name": fn.get("name", ""), "arguments": _arguments(fn.get("arguments", {}))}
    return f"<tool_call>\n{json.dumps(obj, ensure_ascii=False)}\n</tool_call>"


def tools_block(tools: list[dict[str, Any]]) -> str:
    """The tools' schemas in the text format (for the system message)."""
    lines = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    return f"{TOOLS_HEADER}\n{lines}\n{TOOLS_FOOTER}"


def prepare(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], caps: TemplateCaps
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(messages, tools) to hand the chat template; tools is empty when they went into the text."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role", "user")
        role = "system" if role == "developer" else "tool" if role == "function" else role
        text = text_of(m.get("content"))
        if role == "assistant" and m.get("tool_calls"):
            if caps.tool_calls:
                calls = [
                    {**c, "function": {**c["function"], "arguments": _arguments(c["function"].get("arguments", {}))}}
                    for c in m["tool_calls"]
                ]
                out.append({"role": "assistant", "content": text, "tool_calls": calls})
            else:
                blocks = "\n".join(render_call(c) for c in m["tool_calls"])
                out.append({"role": "assistant", "content": f"{text}\n{blocks}" if text else blocks})
            continue
        if role == "tool" and not caps.tool_calls:
            block = f"<tool_response>\n{text}\n</tool_response>"
            if out and out[-1].get("_tool_turn"):
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": "user", "content": block, "_tool_turn": True})
            continue
        msg: dict[str, Any] = {"role": role, "content": text}
        for key in ("tool_call_id", "name"):
            if isinstance(m.get(key), str):
                msg[key] = m[key]
        out.append(msg)
    for m in out:
        m.pop("_tool_turn", None)
    if not tools or caps.tools:
        return out, tools
    block = tools_block(tools)
    if out and out[0]["role"] == "system":
        out[0] = {**out[0], "content": f"{out[0]['content']}\n\n{block}" if out[0]["content"] else block}
    else:
        out.insert(0, {"role": "system", "content": block})
    return out, []
