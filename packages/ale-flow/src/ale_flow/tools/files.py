"""File tools: read_file, write_file, edit, multi_edit, glob, grep, list_directory."""

from __future__ import annotations

import fnmatch
import hashlib
import re
from collections.abc import Iterator
from typing import Any

from ale_flow.tools.base import FunctionTool, ToolContext, ToolError, obj
from ale_flow.workspace import Workspace

MAX_READ_LINES = 2000
SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", ".ale"}


def digest(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


def _read_text(ctx: ToolContext, path: str) -> str:
    data = ctx.workspace.read_bytes(path)
    if b"\0" in data[:8192]:
        raise ToolError(f"{path} looks like a binary file")
    ctx.env.files_read[path] = digest(data)
    return data.decode("utf-8", errors="replace")


def _write_text(ctx: ToolContext, path: str, text: str) -> None:
    data = text.encode()
    ctx.workspace.write_bytes(path, data)
    ctx.env.files_read[path] = digest(data)
    ctx.env.files_written.add(path)


def read_file(args: dict[str, Any], ctx: ToolContext) -> str:
    text = _read_text(ctx, args["path"])
    lines = text.splitlines()
    start = max(1, int(args.get("start_line", 1)))
    wanted = int(args.get("end_line", start + MAX_READ_LINES - 1))
    end = min(wanted, len(lines), start + MAX_READ_LINES - 1)
    body = "\n".join(f"{i:6d}\t{lines[i - 1]}" for i in range(start, end + 1))
    # Only hint at more content when the cap (not the caller's end_line) cut the read short.
    capped = end < len(lines) and end < wanted
    more = f"\n[... {len(lines) - end} more lines; read with start_line={end + 1}]" if capped or ("end_line" not in args and end < len(lines)) else ""
    return (body or "[empty file]") + more


def write_file(args: dict[str, Any], ctx: ToolContext) -> str:
    _write_text(ctx, args["path"], args["content"])
    return f"Wrote {len(args['content'].encode())} bytes to {args['path']}"


def _apply_edit(text: str, old: str, new: str, replace_all: bool, path: str) -> str:
    if old == "":
        raise ToolError("old_string must not be empty")
    count = text.count(old)
    if count == 0:
        raise ToolError(f"old_string not found in {path}; read the file and copy the exact text (whitespace matters)")
    if count > 1 and not replace_all:
        raise ToolError(
            f"old_string occurs {count} times in {path}; add surrounding lines to make it unique or set replace_all"
        )
    return text.replace(old, new) if replace_all else text.replace(old, new, 1)


def edit(args: dict[str, Any], ctx: ToolContext) -> str:
    path = args["path"]
    text = _read_text(ctx, path)
    new = _apply_edit(text, args["old_string"], args["new_string"], bool(args.get("replace_all")), path)
    _write_text(ctx, path, new)
    return f"Edited {path}"


def multi_edit(args: dict[str, Any], ctx: ToolContext) -> str:
    path = args["path"]
    text = _read_text(ctx, path)
    for i, e in enumerate(args["edits"]):
        try:
            text = _apply_edit(text, e["old_string"], e["new_string"], bool(e.get("replace_all")), path)
        except ToolError as err:
            # All-or-nothing: the file is untouched when any edit fails.
            raise ToolError(f"edit {i} failed, no edits applied: {err}") from None
    _write_text(ctx, path, text)
    return f"Applied {len(args['edits'])} edits to {path}"


def walk(ws: Workspace, base: str = ".") -> Iterator[str]:
    """Workspace-relative paths of all files under `base` (skipping VCS/vendor dirs)."""
    stack = [base]
    while stack:
        d = stack.pop()
        try:
            entries = ws.list_dir(d)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for e in entries:
            rel = e.name if d == "." else f"{d.rstrip('/')}/{e.name}"
            if e.is_dir:
                if e.name not in SKIP_DIRS:
                    stack.append(rel)
            else:
                yield rel


def _glob_match(path: str, pattern: str) -> bool:
    # "**/" matches zero or more directories; fnmatch's "*" already crosses "/".
    if pattern.startswith("**/"):
        return fnmatch.fnmatch(path, pattern[3:]) or fnmatch.fnmatch(path, pattern)
    return fnmatch.fnmatch(path, pattern)


def glob_tool(args: dict[str, Any], ctx: ToolContext) -> str:
    base = args.get("path", ".")
    hits = sorted(p for p in walk(ctx.workspace, base) if _glob_match(p, args["pattern"]))
    return "\n".join(hits[:500]) or "No files match."


def grep(args: dict[str, Any], ctx: ToolContext) -> str:
    try:
        rx = re.compile(args["pattern"], 0 if args.get("case_sensitive", True) else re.IGNORECASE)
    except re.error as e:
        raise ToolError(f"invalid regular expression: {e}") from None
    include = args.get("include")
    out: list[str] = []
    for p in sorted(walk(ctx.workspace, args.get("path", "."))):
        if include and not _glob_match(p, include):
            continue
        data = ctx.workspace.read_bytes(p)
        if b"\0" in data[:8192]:
            continue
        for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if rx.search(line):
                out.append(f"{p}:{n}:{line[:300]}")
                if len(out) >= 200:
                    return "\n".join(out) + "\n[... truncated at 200 matches]"
    return "\n".join(out) or "No matches."


def list_directory(args: dict[str, Any], ctx: ToolContext) -> str:
    entries = ctx.workspace.list_dir(args.get("path", "."))
    lines = [f"{e.name}/" if e.is_dir else f"{e.name}  ({e.size} bytes)" for e in entries]
    return "\n".join(lines) or "[empty directory]"


_S = {"type": "string"}
_I = {"type": "integer"}


def file_tools() -> list[FunctionTool]:
    edit_item = obj(
        {"old_string": _S, "new_string": _S, "replace_all": {"type": "boolean"}}, ["old_string", "new_string"]
    )
    return [
        FunctionTool(
            "read_file",
            "Read a text file with line numbers; use start_line/end_line (1-based, inclusive) for ranges.",
            obj({"path": _S, "start_line": _I, "end_line": _I}, ["path"]),
            read_file,
            read_only=True,
        ),
        FunctionTool("write_file", "Create or overwrite a file.", obj({"path": _S, "content": _S}, ["path", "content"]), write_file),
        FunctionTool(
            "edit",
            "Replace an exact, unique occurrence of old_string with new_string in a file.",
            obj({"path": _S, "old_string": _S, "new_string": _S, "replace_all": {"type": "boolean"}}, ["path", "old_string", "new_string"]),
            edit,
        ),
        FunctionTool(
            "multi_edit",
            "Apply several exact search/replace edits to one file, in order, all or nothing.",
            obj({"path": _S, "edits": {"type": "array", "items": edit_item}}, ["path", "edits"]),
            multi_edit,
        ),
        FunctionTool("glob", "Find files by glob pattern (e.g. **/*.py).", obj({"pattern": _S, "path": _S}, ["pattern"]), glob_tool, read_only=True),
        FunctionTool(
            "grep",
            "Search file contents with a regular expression; prints path:line:text.",
            obj({"pattern": _S, "path": _S, "include": _S, "case_sensitive": {"type": "boolean"}}, ["pattern"]),
            grep,
            read_only=True,
        ),
        FunctionTool("list_directory", "List a directory.", obj({"path": _S}), list_directory, read_only=True),
    ]


