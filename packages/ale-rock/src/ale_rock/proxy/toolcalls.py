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


_OPEN = "<tool_call>"


class ContentStream:
    """Splits text arriving piece by piece into what may be streamed as ``content`` now: everything
    before the first ``<tool_call>`` (a trailing partial ``<tool_c`` is held back until it is
    decided). Tool calls themselves are sent once the reply is complete and parsed."""

    def __init__(self) -> None:
        self.text = ""
        self.sent = 0
        self.blocked = False

    def feed(self, piece: str) -> str:
        """Add generated text; return the new content that is safe to send."""
        self.text += piece
        if self.blocked:
            return ""
        at = self.text.find(_OPEN, self.sent)
        if at >= 0:
            self.blocked = True
            end = at
        else:
            end = len(self.text)
            for k in range(min(len(_OPEN) - 1, end - self.sent), 0, -1):
                if _OPEN.startswith(self.text[end - k :]):
                    end -= k
                    break
        out = self.text[self.sent : end]
        self.sent = end
        return out

    def rest(self, content: str | None) -> str:
        """What of the final parsed ``content`` was not sent yet."""
        sent = self.text[: self.sent]
        content = content or ""
        if content.startswith(sent):
            return content[len(sent) :]
        stripped = sent.lstrip()
        return content[len(stripped) :] if content.startswith(stripped) else ""
