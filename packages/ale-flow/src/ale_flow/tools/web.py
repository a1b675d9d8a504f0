"""web_fetch: off by default; registered only when settings allow network access."""

from __future__ import annotations

import re
from typing import Any

from ale_flow.tools.base import FunctionTool, ToolContext, ToolError, obj
from ale_flow.tools.shell import truncate_middle


def _html_to_text(html: str) -> str:
    html = re.sub(r"(?is)<(script|style)\b.*?</\1>", "", html)
    text = re.sub(r"(?s)<[^>]+>", " ", html)
    return re.sub(r"[ \t]+", " ", re.sub(r"\n\s*\n+", "\n\n", text)).strip()


def web_fetch(args: dict[str, Any], ctx: ToolContext) -> str:
    import httpx

    url = args["url"]
    if not url.startswith(("http://", "https://")):
        raise ToolError("url must start with http:// or https://")
    try:
        r = httpx.get(url, timeout=30.0, follow_redirects=True)
    except httpx.HTTPError as e:
        raise ToolError(f"fetch failed: {e}") from None
    body = r.text
    if "html" in r.headers.get("content-type", ""):
        body = _html_to_text(body)
    return f"[HTTP {r.status_code}]\n" + truncate_middle(body, 20_000)


def web_fetch_tool() -> FunctionTool:
    return FunctionTool("web_fetch", "Fetch a URL and return its text.", obj({"url": {"type": "string"}}, ["url"]), web_fetch, read_only=True)
