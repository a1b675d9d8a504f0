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


class SynthesisConfig(BaseModel):
    """The teacher's episodes in sandboxes (the SFT data, before filtering)."""

    model_config = ConfigDict(extra="forbid")

    episodes: int = Field(default=240, ge=1, le=100_000)
    """Teacher episodes, one per training start state (seeds from `first_seed`)."""
    first_seed: int = Field(default=100_000, ge=0, lt=1_000_000)
    """Seed of the first synthesis episode (a training seed: below the held-out range)."""
    concurrency: int = Field(default=4, ge=1, le=64)
    """Sandboxes used at once."""
    max_turns: int = Field(default=5, ge=1)
    """Guesses per lock (the environment's max_turns)."""
    noise: dict[str, float] = Field(default_factory=dict)
    """Teacher mistake probabilities (`ale.job.teacher.TeacherNoise` fields)."""


class JobConfig(BaseModel):
    """The default job: synthesize → filter → SFT → RL → evaluate (`ale.job.pipeline`)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Run the job after the stack check (false: bring the stack up and check it only)."""
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=1, max_length=16)
    """Training seeds; each runs SFT + RL from the same initial model, and held-out success pools them."""
    synthesis: SynthesisConfig = Field(default_factory=SynthesisConfig)
    """The teacher's episodes."""
    roll: dict[str, Any] = Field(default_factory=dict)
    """Overrides of the embedded ale-roll config (`ale/job/default_roll.yaml`), as a nested mapping."""
    roll_config: str | None = None
    """Another ale-roll YAML instead of the embedded one (e.g. examples/up/smollm2.yaml)."""
    compare_steps: int = Field(default=6, ge=0)
    """RL steps run in one process without services to measure `stack_vs_inprocess` (0 = skip)."""
    job_timeout_s: float = Field(default=1800.0, gt=0)
    """Limit of one training job on the TrainerService."""


class UpConfig(BaseModel):
    """Everything `ale up` does."""

    model_config = ConfigDict(extra="forbid")

    services: ServicesConfig = Field(default_factory=ServicesConfig)
    """The services."""
    smoke: SmokeConfig = Field(default_factory=SmokeConfig)
    """The stack check."""
    job: JobConfig = Field(default_factory=JobConfig)
    """The default job."""


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
