"""Tool calls parsed from generated text (Qwen/Hermes style ``<tool_call>{json}</tool_call>``)."""

from __future__ import annotations

import json
import re
from typing import Any

_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)


def parse_tool_calls(text: str, id_prefix: str) -> tuple[str | None, list[dict[str, Any]]]:
    """Split generated text into (content, OpenAI tool_calls). Blocks that are not valid JSON with a
    ``name`` stay in the content, so the agent sees what the model wrote. Ids are
    ``{id_prefix}_{i}`` (deterministic, so a replayed episode is identical)."""
    calls: list[dict[str, Any]] = []
    kept: list[str] = []
    pos = 0
    for m in _BLOCK.finditer(text):
        try:
            obj = json.loads(m.group(1))
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            continue
        args = obj.get("arguments", {})
        kept.append(text[pos : m.start()])
        pos = m.end()
        calls.append(
            {
                "id": f"{id_prefix}_{len(calls)}",
                "type": "function",
                "function": {
                    "name": obj["name"],
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
        )
    if not calls:
        return text, []
    kept.append(text[pos:])
    content = "".join(kept).strip()
    return (content or None), calls
