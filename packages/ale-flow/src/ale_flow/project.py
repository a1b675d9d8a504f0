"""Project files: memory (`ALE.md`), workflows (`.ale/commands/*.md`), sub-agents (`.ale/agents/*.md`)."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ale_flow.workspace import Workspace

MEMORY_FILE = "ALE.md"


def _read(ws: Workspace, path: str) -> str | None:
    try:
        return ws.read_bytes(path).decode("utf-8", errors="replace")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
        return None


def load_memory_files(ws: Workspace, cwd: str = ".", global_dir: Path | None = None) -> list[tuple[str, str]]:
    """(source, text) for the global, project and subdirectory ALE.md files, outermost first."""
    out: list[tuple[str, str]] = []
    if global_dir is not None and (global_dir / MEMORY_FILE).is_file():
        out.append((str(global_dir / MEMORY_FILE), (global_dir / MEMORY_FILE).read_text()))
    # An absolute cwd means the shell left the workspace: only the project file applies then.
    parts = [] if cwd.startswith("/") else [p for p in posixpath.normpath(cwd).split("/") if p not in ("", ".", "..")]
    dirs = ["."] + ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for d in dirs:
        path = MEMORY_FILE if d == "." else f"{d}/{MEMORY_FILE}"
        text = _read(ws, path)
        if text:
            out.append((path, text))
    return out


def split_frontmatter(text: str) -> tuple[dict[str, object], str]:
    """`---\\nyaml\\n---\\nbody` → (meta, body); no frontmatter → ({}, text)."""
    if text.startswith("---\n"):
        end = text.find("\n---", 4)
        if end != -1:
            meta = yaml.safe_load(text[4:end]) or {}
            if not isinstance(meta, dict):
                raise ValueError("frontmatter must be a mapping")
            return meta, text[end + 4 :].lstrip("\n")
    return {}, text


@dataclass
class AgentDef:
    """A sub-agent definition from `.ale/agents/NAME.md`."""

    name: str
    prompt: str
    description: str = ""
    tools: list[str] | None = None
    max_steps: int | None = None


@dataclass
class ProjectFiles:
    """Workflows and agent definitions found in a workspace."""

    commands: dict[str, str] = field(default_factory=dict)
    agents: dict[str, AgentDef] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def expand(self, prompt: str) -> str:
        """`/name args` → the workflow body with $ARGUMENTS replaced; other prompts unchanged."""
        if not prompt.startswith("/"):
            return prompt
        name, _, rest = prompt[1:].partition(" ")
        if name not in self.commands:
            return prompt
        _, body = split_frontmatter(self.commands[name])
        return body.replace("$ARGUMENTS", rest.strip()) if "$ARGUMENTS" in body else (body + ("\n\n" + rest if rest else ""))


def load_project_files(ws: Workspace, state_dir: str = ".ale") -> ProjectFiles:
    pf = ProjectFiles()
    for kind in ("commands", "agents"):
        try:
            entries = ws.list_dir(f"{state_dir}/{kind}")
        except (FileNotFoundError, NotADirectoryError):
            continue
        for e in entries:
            if e.is_dir or not e.name.endswith(".md"):
                continue
            name = e.name[:-3]
            text = _read(ws, f"{state_dir}/{kind}/{e.name}") or ""
            if kind == "commands":
                pf.commands[name] = text
                continue
            try:
                meta, body = split_frontmatter(text)
                tools = meta.get("tools")
                steps = meta.get("max_steps")
                pf.agents[str(meta.get("name", name))] = AgentDef(
                    str(meta.get("name", name)),
                    body,
                    str(meta.get("description", "")),
                    [str(t) for t in tools] if isinstance(tools, list) else None,
                    int(steps) if isinstance(steps, int) else None,
                )
            except (ValueError, yaml.YAMLError) as err:
                pf.errors.append(f"{state_dir}/agents/{e.name}: {err}")
    return pf
