"""Layered, validated settings: global file < project `.ale/settings.*` < env vars < CLI flags."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ale_flow.context.compress import CompressionConfig
from ale_flow.context.detection import DetectionConfig
from ale_flow.hooks import HookSpec

Mode = Literal["default", "accept-edits", "plan", "yolo"]
ENV_PREFIX = "ALE_FLOW_"


class SettingsError(ValueError):
    """A settings source is unreadable or invalid; the message names the source and the field."""


class ModelSettings(BaseModel):
    """Which model to call and how."""

    model_config = ConfigDict(extra="forbid")

    base_url: str | None = None
    """OpenAI-compatible endpoint root (…/v1)."""
    name: str | None = None
    """Model name sent to the endpoint."""
    api_key: str | None = None
    """Bearer token (prefer the env var ALE_FLOW_MODEL__API_KEY)."""
    native_tools: bool = True
    """Use native tool calling; False uses the `<tool_call>` text format."""
    context_window: int = 128_000
    """Tokens the model attends to."""
    temperature: float = 0.0
    """Sampling temperature."""
    max_tokens: int | None = 4096
    """Completion cap per call."""
    max_retries: int = 4
    """Retries on transient endpoint errors."""
    price_per_1k_prompt: float = 0.0
    """USD per 1k prompt tokens (for the cost limit)."""
    price_per_1k_completion: float = 0.0
    """USD per 1k completion tokens (for the cost limit)."""


class LimitsConfig(BaseModel):
    """When a run stops."""

    model_config = ConfigDict(extra="forbid")

    max_steps: int = 50
    """Model calls per run."""
    max_tokens: int | None = None
    """Total tokens (prompt + completion) per run."""
    max_cost_usd: float | None = None
    """Total cost per run (needs prices in `model`)."""
    time_limit_s: float | None = None
    """Wall-clock seconds per run."""
    max_malformed: int = 3
    """Consecutive malformed/truncated tool-call replies before stopping."""


class ToolsConfig(BaseModel):
    """Which tools the model gets."""

    model_config = ConfigDict(extra="forbid")

    enabled: list[str] | None = None
    """Only these tools (None: all built-ins)."""
    disabled: list[str] = Field(default_factory=list)
    """Tools removed from the set."""
    allow_network: bool = False
    """Register web_fetch."""
    shell_timeout_s: float = 120.0
    """Default shell command timeout."""
    parallel: bool = True
    """Run independent read-only tool calls of one step in parallel."""


class SubagentConfig(BaseModel):
    """Bounds for the `task` tool's sub-agents."""

    model_config = ConfigDict(extra="forbid")

    max_steps: int = 20
    """Steps per sub-agent run."""
    summary_chars: int = 4000
    """The sub-agent's final answer is cut to this many characters."""


class MCPServerConfig(BaseModel):
    """One MCP server whose tools join the tool set (names prefixed `<server>__`)."""

    model_config = ConfigDict(extra="forbid")

    transport: Literal["stdio", "http"] = "stdio"
    """stdio: spawn `command`; http: connect to `url` (streamable HTTP)."""
    command: list[str] | None = None
    """argv of the server (stdio)."""
    url: str | None = None
    """Endpoint (http)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment for a stdio server."""
    timeout_s: float = 60.0
    """Per tool-call timeout."""


class Settings(BaseModel):
    """All of ale-flow's configuration."""

    model_config = ConfigDict(extra="forbid")

    model: ModelSettings = Field(default_factory=ModelSettings)
    """The model endpoint."""
    mode: Mode = "default"
    """default: confirm risky tools; accept-edits: file edits allowed; plan: read-only; yolo: all."""
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    """Stop conditions."""
    compression: CompressionConfig = Field(default_factory=CompressionConfig)
    """Context compression."""
    detection: DetectionConfig = Field(default_factory=DetectionConfig)
    """Loop and failure detection."""
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    """Tool selection."""
    subagents: SubagentConfig = Field(default_factory=SubagentConfig)
    """Sub-agent bounds."""
    hooks: dict[Literal["PreToolUse", "PostToolUse", "UserPromptSubmit", "PreCompress", "Stop", "SessionStart", "SessionEnd"], list[HookSpec]] = Field(default_factory=dict)
    """Hook commands per event."""
    builtin_guard: bool = True
    """Refuse destructive shell commands and writes outside the workspace."""
    mcp_servers: dict[str, MCPServerConfig] = Field(default_factory=dict)
    """MCP servers by name."""
    system_prompt: str | None = None
    """Replaces the built-in system prompt."""
    state_dir: str = ".ale"
    """Workspace-relative directory for todo, memory and offloaded outputs."""
    trajectory_dir: str | None = None
    """Where trajectory JSONL files go (default: <workspace>/.ale/trajectories)."""


def global_dir() -> Path:
    """ALE_HOME, else ~/.ale."""
    return Path(os.environ.get("ALE_HOME") or Path.home() / ".ale")


def _read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (OSError, json.JSONDecodeError, yaml.YAMLError) as e:
        raise SettingsError(f"{path}: cannot parse: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SettingsError(f"{path}: top level must be a mapping, got {type(data).__name__}")
    return data


def _find(dir_: Path) -> Path | None:
    for name in ("settings.yaml", "settings.yml", "settings.json"):
        if (dir_ / name).is_file():
            return dir_ / name
    return None


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Deep merge: mappings merge key by key, everything else is replaced."""
    out = dict(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def set_dotted(d: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    for p in parts[:-1]:
        d = d.setdefault(p, {})
    d[parts[-1]] = value


def env_overrides(environ: dict[str, str] | os._Environ[str]) -> dict[str, Any]:
    """ALE_FLOW_LIMITS__MAX_STEPS=5 → {"limits": {"max_steps": 5}} (values parsed as YAML)."""
    out: dict[str, Any] = {}
    for k, v in environ.items():
        if k.startswith(ENV_PREFIX) and len(k) > len(ENV_PREFIX):
            key = k[len(ENV_PREFIX):].lower().replace("__", ".")
            set_dotted(out, key, yaml.safe_load(v) if v else v)
    return out


def _validate(data: dict[str, Any], sources: list[str]) -> Settings:
    try:
        return Settings.model_validate(data)
    except ValidationError as e:
        lines = [f"  {'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()]
        raise SettingsError("invalid settings (from " + ", ".join(sources) + "):\n" + "\n".join(lines)) from None


def load_settings(project_dir: str | os.PathLike[str] | None = None, cli: dict[str, Any] | None = None, environ: dict[str, str] | None = None) -> Settings:
    """Read and validate every layer; raise `SettingsError` naming the bad source/field."""
    data: dict[str, Any] = {}
    sources: list[str] = ["defaults"]
    paths = [_find(global_dir())]
    if project_dir is not None:
        paths.append(_find(Path(project_dir) / ".ale"))
    for p in paths:
        if p is not None:
            layer = _read_file(p)
            _validate(layer, [str(p)])  # each file on its own, so the error names the file
            data = merge(data, layer)
            sources.append(str(p))
    env = env_overrides(os.environ if environ is None else environ)
    if env:
        data = merge(data, env)
        sources.append("environment (ALE_FLOW_*)")
    if cli:
        data = merge(data, cli)
        sources.append("command line")
    return _validate(data, sources)
