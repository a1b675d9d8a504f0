"""Configuration of `ale up`: one YAML file plus dotted overrides, validated with clear errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError


class ServicesConfig(BaseModel):
    """Which services `ale up` starts and how long it waits for them."""

    model_config = ConfigDict(extra="forbid")

    health_timeout_s: float = Field(default=90.0, gt=0)
    """Seconds to wait for each service to report SERVING."""
    worker_pool_size: int = Field(default=2, ge=0, le=64)
    """Pre-started sandboxes the worker keeps warm."""
    max_sandboxes: int = Field(default=64, ge=1)
    """Sandboxes the worker holds at once."""


class SmokeConfig(BaseModel):
    """The stack check run before the job: a sandbox round trip through the real services."""

    model_config = ConfigDict(extra="forbid")

    sandboxes: int = Field(default=4, ge=0, le=256)
    """Sandboxes created, exercised and deleted."""


class UpConfig(BaseModel):
    """Everything `ale up` does."""

    model_config = ConfigDict(extra="forbid")

    services: ServicesConfig = Field(default_factory=ServicesConfig)
    """The services."""
    smoke: SmokeConfig = Field(default_factory=SmokeConfig)
    """The stack check."""


class ConfigError(ValueError):
    """A config file or override is invalid; the message names the key."""


def _set_dotted(data: dict[str, Any], key: str, value: str) -> None:
    node = data
    *parents, leaf = key.split(".")
    for p in parents:
        child = node.setdefault(p, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{key}: {p} is not a section")
        node = child
    node[leaf] = yaml.safe_load(value)


def load_config(path: Path | None, overrides: list[str]) -> UpConfig:
    """Read the YAML file (if any), apply `key=value` overrides, validate."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as e:
            raise ConfigError(f"{path}: {e}") from e
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{path}: the top level must be a mapping")
        data = loaded or {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {item!r}: expected key=value")
        _set_dotted(data, key.strip(), value)
    try:
        return UpConfig.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"{loc}: {first['msg']}") from e
