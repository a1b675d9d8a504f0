"""The tool aggregation layer: one registry for built-in, MCP and sub-agent tools.

Every tool has a name, a description, a JSON-schema for its parameters and a `run` that takes
validated arguments and a `ToolContext`. The registry validates arguments against the schema
before the tool runs, so tools never see ill-typed input and the model gets a clear error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ale_flow.types import ToolResult
from ale_flow.workspace import Workspace


class ToolError(Exception):
    """Raised by a tool for an expected failure; the message goes to the model verbatim."""


@dataclass
class EnvState:
    """What the agent knows about its environment (reported to the model when relevant)."""

    cwd: str = "."
    files_read: dict[str, str] = field(default_factory=dict)
    """path -> content hash when the agent last read or wrote it."""
    files_written: set[str] = field(default_factory=set)


@dataclass
class ToolContext:
    """Everything a tool may use besides its arguments."""

    workspace: Workspace
    env: EnvState = field(default_factory=EnvState)
    cancel: threading.Event = field(default_factory=threading.Event)
    state_dir: str = ".ale"
    """Workspace-relative directory for the todo file, memory and offloaded outputs."""
    services: dict[str, Any] = field(default_factory=dict)
    """Late-bound helpers (e.g. the sub-agent runner, the shell session) keyed by name."""


@runtime_checkable
class Tool(Protocol):
    """A callable the model can choose."""

    name: str
    description: str
    parameters: dict[str, Any]
    """JSON schema (type: object) of the arguments."""
    read_only: bool
    """Read-only tools may run in parallel and are allowed in plan mode."""

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult: ...


@dataclass
class FunctionTool:
    """A tool made from a plain function `fn(args, ctx) -> str | ToolResult`."""

    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[[dict[str, Any], ToolContext], str | ToolResult]
    read_only: bool = False

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        out = self.fn(args, ctx)
        return out if isinstance(out, ToolResult) else ToolResult(out)


_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def validate(schema: dict[str, Any], value: Any, path: str = "arguments") -> list[str]:
    """Check `value` against the JSON-schema subset tools use; returns a list of problems."""
    problems: list[str] = []
    typ = schema.get("type")
    if typ is not None:
        names = typ if isinstance(typ, list) else [typ]
        ok = any(
            isinstance(value, _TYPES.get(t, (object,))) and not (t in ("integer", "number") and isinstance(value, bool))
            for t in names
        )
        if not ok:
            return [f"{path}: expected {'/'.join(names)}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for req in schema.get("required", []):
            if req not in value:
                problems.append(f"{path}: missing required property {req!r}")
        for k, v in value.items():
            if k in props:
                problems.extend(validate(props[k], v, f"{path}.{k}"))
            elif schema.get("additionalProperties") is False:
                problems.append(f"{path}: unexpected property {k!r} (allowed: {sorted(props)})")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problems.extend(validate(schema["items"], item, f"{path}[{i}]"))
    return problems


def obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """Shorthand for an object schema that forbids unknown properties."""
    return {"type": "object", "properties": properties, "required": required or [], "additionalProperties": False}


class ToolRegistry:
    """The single place tools are looked up, described to the model and invoked."""

    def __init__(self, tools: list[Tool] | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools or []:
            self.add(t)

    def add(self, tool: Tool) -> None:
        self._tools[tool.name] = tool

    def remove(self, name: str) -> None:
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def subset(self, names: list[str] | None, exclude: tuple[str, ...] = ()) -> ToolRegistry:
        """A registry with only `names` (all when None), minus `exclude`."""
        keep = [t for n, t in self._tools.items() if (names is None or n in names) and n not in exclude]
        return ToolRegistry(keep)

    def schemas(self) -> list[dict[str, Any]]:
        """OpenAI `tools=[...]` entries."""
        return [
            {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in self._tools.values()
        ]

    def invoke(self, name: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Validate and run; every failure becomes an error result, never an exception."""
        tool = self._tools.get(name)
        if tool is None:
            return ToolResult(f"Error: unknown tool {name!r}. Available tools: {', '.join(self.names())}", is_error=True)
        problems = validate(tool.parameters, args)
        if problems:
            return ToolResult(f"Error: invalid arguments for {name}: " + "; ".join(problems), is_error=True)
        try:
            return tool.run(args, ctx)
        except ToolError as e:
            return ToolResult(f"Error: {e}", is_error=True)
        except (OSError, ValueError, UnicodeDecodeError) as e:
            return ToolResult(f"Error: {type(e).__name__}: {e}", is_error=True)
