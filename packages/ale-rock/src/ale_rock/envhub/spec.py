"""EnvHub specs: the YAML file format as pydantic models, parsing with clear errors, the spec hash.

A spec file::

    name: py-tools                 # [a-z0-9][a-z0-9-_./]*
    version: "1"
    description: python3 with a prepared /opt/tools
    base: {docker_image: ale-rock-base:bookworm-py311-v1}   # or {dockerfile: "FROM ..."} or {rootfs: /dir}
    setup:                         # shell commands run once at build time (cached per spec hash)
      - mkdir -p /opt/tools && echo ok > /opt/tools/ready
    resources: {cpu_millis: 1000, memory_bytes: 536870912}
    network: {allow: [{host: model-proxy, port: 0}]}
    env: {PYTHONUNBUFFERED: "1"}
    workdir: /workspace
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9\-_./]{0,127}$")
VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,63}$")
HASH_VERSION = 1
"""Bumped when the hashed form changes (so old builds are not reused for a new meaning)."""


class EnvSpecError(ValueError):
    """A spec is malformed. ``field`` names the first bad field (dotted), ``problems`` all of them."""

    def __init__(self, source: str, problems: list[tuple[str, str]]) -> None:
        self.source = source
        self.problems = problems
        self.field = problems[0][0] if problems else ""
        text = "; ".join(f"field '{f}': {m}" if f else m for f, m in problems)
        super().__init__(f"{source}: {text}" if source else text)


class BaseSource(BaseModel):
    """Where the environment's file system comes from: exactly one of the three."""

    model_config = ConfigDict(extra="forbid")

    rootfs: str | None = None
    """A directory on the worker used as the root file system (local backend)."""
    docker_image: str | None = None
    """A Docker image reference (docker backend)."""
    dockerfile: str | None = None
    """Dockerfile text, built into an image (docker backend)."""

    @model_validator(mode="after")
    def _exactly_one(self) -> BaseSource:
        set_ = [k for k in ("rootfs", "docker_image", "dockerfile") if getattr(self, k)]
        if len(set_) != 1:
            raise ValueError(f"set exactly one of rootfs, docker_image, dockerfile (got {set_ or 'none'})")
        return self

    @field_validator("rootfs")
    @classmethod
    def _absolute(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith("/"):
            raise ValueError(f"rootfs must be an absolute path, got {v!r}")
        return v

    @property
    def kind(self) -> str:
        """``rootfs``, ``docker_image`` or ``dockerfile``."""
        return next(k for k in ("rootfs", "docker_image", "dockerfile") if getattr(self, k))


class ResourcesModel(BaseModel):
    """Default resources of the environment's sandboxes (0 = the server's default)."""

    model_config = ConfigDict(extra="forbid")

    cpu_millis: int = Field(default=0, ge=0, le=1_000_000)
    """CPU in millicores."""
    memory_bytes: int = Field(default=0, ge=0)
    """Memory limit in bytes."""
    disk_bytes: int = Field(default=0, ge=0)
    """Writable disk in bytes."""
    max_pids: int = Field(default=0, ge=0)
    """Maximum processes/threads."""
    max_open_files: int = Field(default=0, ge=0)
    """Maximum open files per process."""
    gpus: int = Field(default=0, ge=0, le=64)
    """GPUs requested."""


class EgressRule(BaseModel):
    """One allowed egress destination."""

    model_config = ConfigDict(extra="forbid")

    host: str = Field(min_length=1, max_length=253)
    """Host name or IP (exact match), or ``*``."""
    port: int = Field(default=0, ge=0, le=65535)
    """TCP port; 0 = any."""


class NetworkModel(BaseModel):
    """Default egress policy: deny by default, these destinations allowed."""

    model_config = ConfigDict(extra="forbid")

    allow: list[EgressRule] = Field(default_factory=list)
    """Allowed destinations."""


class EnvSpecModel(BaseModel):
    """An environment spec (the YAML file; the plain-Python form of ``ale.v1.EnvSpec``)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """Name: lowercase ``[a-z0-9]`` then ``[a-z0-9-_./]``, at most 128 characters."""
    version: str = "1"
    """Version (free-form: ``1``, ``2026-11-29``, ``1.2.0``)."""
    description: str = ""
    """What the environment is for."""
    base: BaseSource
    """The base file system."""
    setup: list[str] = Field(default_factory=list)
    """Shell commands run once at build time, in order, as root, with ``set -e``."""
    resources: ResourcesModel = Field(default_factory=ResourcesModel)
    """Default resources."""
    network: NetworkModel = Field(default_factory=NetworkModel)
    """Default egress policy."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables of every command (and of the build's setup commands)."""
    workdir: str = "/workspace"
    """Working directory inside the sandbox (absolute)."""

    @field_validator("name")
    @classmethod
    def _valid_name(cls, v: str) -> str:
        if not NAME_RE.match(v) or ".." in v:
            raise ValueError(f"{v!r} is not a valid name (lowercase [a-z0-9-_./], starting alphanumeric)")
        return v

    @field_validator("version", mode="before")
    @classmethod
    def _valid_version(cls, v: Any) -> Any:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            v = str(v)  # `version: 1` in YAML is an int; accept it as "1"
        if isinstance(v, str) and not VERSION_RE.match(v):
            raise ValueError(f"{v!r} is not a valid version ([A-Za-z0-9._-], at most 64 characters)")
        return v

    @field_validator("workdir")
    @classmethod
    def _abs_workdir(cls, v: str) -> str:
        if not v.startswith("/") or "\0" in v or ".." in v.split("/"):
            raise ValueError(f"workdir must be an absolute path without '..', got {v!r}")
        return v

    @field_validator("env")
    @classmethod
    def _env_keys(cls, v: dict[str, str]) -> dict[str, str]:
        for key in v:
            if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
                raise ValueError(f"env key {key!r} is not a valid variable name")
        return v

    @field_validator("setup")
    @classmethod
    def _nonempty_commands(cls, v: list[str]) -> list[str]:
        for i, cmd in enumerate(v):
            if not cmd.strip():
                raise ValueError(f"setup command {i} is empty")
        return v

    @property
    def ref(self) -> str:
        """``name:version``."""
        return f"{self.name}:{self.version}"

    def spec_hash(self) -> str:
        """SHA-256 of the canonical content (sorted-key JSON of every field except description).

        The description is documentation: editing it must not invalidate a cached build.
        """
        content = self.model_dump(mode="json", exclude={"description"})
        canonical = json.dumps({"hash_version": HASH_VERSION, **content}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


def _problems(err: ValidationError) -> list[tuple[str, str]]:
    out = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
        msg = str(e["msg"]).removeprefix("Value error, ")
        out.append((loc, msg))
    return out


def validate_spec(data: Any, source: str = "") -> EnvSpecModel:
    """Validate a mapping; raise :class:`EnvSpecError` naming every bad field."""
    if not isinstance(data, dict):
        raise EnvSpecError(source, [("", "expected a mapping of fields at the top level")])
    try:
        return EnvSpecModel.model_validate(data)
    except ValidationError as e:
        raise EnvSpecError(source, _problems(e)) from None


def parse_spec(text: str, source: str = "<spec>") -> EnvSpecModel:
    """Parse the YAML text of a spec."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:  # one line with the place, not PyYAML's multi-line report
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = " ".join(str(getattr(e, "problem", None) or e).split())
        raise EnvSpecError(source, [("", f"invalid YAML{at}: {problem}")]) from None
    return validate_spec(data, source)


def load_spec(path: Path | str) -> EnvSpecModel:
    """Read and parse a spec file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise EnvSpecError(str(p), [("", f"cannot read: {e.strerror or e}")]) from None
    return parse_spec(text, str(p))


def dump_spec(spec: EnvSpecModel) -> str:
    """The spec as YAML (round-trips through :func:`parse_spec`)."""
    return yaml.safe_dump(spec.model_dump(mode="json", exclude_none=True), sort_keys=False)
