"""Layered, validated settings: global file < project `.ale/settings.*` < env vars < CLI flags."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from ale_proto.config import ConfigError, Layer, env_layers, load_layers, read_mapping
from ale_proto.config import (
    set_dotted as set_dotted,  # re-exported: the CLI and the service build overrides with it
)
from pydantic import BaseModel, ConfigDict, Field

from ale_flow.context.compress import CompressionConfig
from ale_flow.context.detection import DetectionConfig
from ale_flow.hooks import HookSpec

Mode = Literal["default", "accept-edits", "plan", "yolo"]
ENV_PREFIX = "ALE_FLOW_"


class SettingsError(ConfigError):
    """A settings source is unreadable or invalid; the one-line message names the source and the field."""


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


def _find(dir_: Path) -> Path | None:
    for name in ("settings.yaml", "settings.yml", "settings.json"):
        if (dir_ / name).is_file():
            return dir_ / name
    return None


def load_settings(project_dir: str | os.PathLike[str] | None = None, cli: dict[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Read and validate every layer; raise `SettingsError` (one line) naming the bad source and field.

    Loading is ``ale_proto.config``'s (the loader every ALE command shares): each error is put on
    the highest layer that sets its key — a file, an ``ALE_FLOW_*`` variable, or the command line.
    """
    paths = [_find(global_dir())]
    if project_dir is not None:
        paths.append(_find(Path(project_dir) / ".ale"))
    try:
        layers: list[Layer] = [(str(p), read_mapping(p)) for p in paths if p is not None]
        for layer in layers:  # each file on its own too: a bad value is reported even where a later layer overrides it
            load_layers(Settings, [layer], default=layer[0])
        layers += env_layers(ENV_PREFIX, os.environ if environ is None else environ)
        if cli:
            layers.append(("command line", cli))
        return load_layers(Settings, layers, default="settings")
    except ConfigError as e:
        raise SettingsError(str(e)) from None
