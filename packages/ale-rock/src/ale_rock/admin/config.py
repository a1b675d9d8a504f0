"""Configuration of the Admin (a YAML file, environment variables, or keyword arguments)."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ale_rock.envhub.docker_build import DockerBuildConfig


class ResourceSpec(BaseModel):
    """A set of sandbox resources (used for defaults and maxima)."""

    model_config = ConfigDict(extra="forbid")

    cpu_millis: int = Field(default=1000, ge=0)
    """CPU in millicores (1000 = one core)."""
    memory_bytes: int = Field(default=512 * 2**20, ge=0)
    """Memory in bytes."""
    disk_bytes: int = Field(default=2**30, ge=0)
    """Writable disk in bytes."""
    max_pids: int = Field(default=256, ge=0)
    """Processes/threads."""
    max_open_files: int = Field(default=1024, ge=0)
    """Open files per process."""
    gpus: int = Field(default=0, ge=0)
    """GPUs."""


def _default_maxima() -> ResourceSpec:
    return ResourceSpec(
        cpu_millis=64_000, memory_bytes=256 * 2**30, disk_bytes=2**40, max_pids=65_536,
        max_open_files=1_048_576, gpus=8,
    )


class QuotaConfig(BaseModel):
    """Per-namespace limits on what its active (pending or running) sandboxes hold at once."""

    model_config = ConfigDict(extra="forbid")

    max_sandboxes: int = Field(default=1000, ge=0)
    """Active sandboxes."""
    max_cpu_millis: int = Field(default=1_000_000, ge=0)
    """Sum of the active sandboxes' CPU, in millicores."""
    max_memory_bytes: int = Field(default=4 * 2**40, ge=0)
    """Sum of the active sandboxes' memory, in bytes."""


class TLSConfig(BaseModel):
    """Server-side TLS (PEM files). Without it the Admin listens in plaintext."""

    model_config = ConfigDict(extra="forbid")

    cert_file: Path
    """Certificate chain."""
    key_file: Path
    """Private key."""


class AdminEnvsConfig(BaseModel):
    """The EnvService (gem API) hosted on the Admin's port, with the Admin's API keys."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Serve EnvService on the Admin's port."""
    max_envs: int = Field(default=1024, ge=1)
    """Environments held at once (all namespaces); Make beyond it is RESOURCE_EXHAUSTED."""
    max_action_bytes: int = Field(default=65536, ge=1)
    """Largest action accepted by Step (INVALID_ARGUMENT beyond)."""
    step_timeout_s: float = Field(default=300.0, gt=0)
    """Default per-call limit of Reset/Step (Make's step_timeout_ms overrides)."""
    episode_budget_s: float = Field(default=3600.0, gt=0)
    """Default wall-clock budget of an episode (Make's episode_budget_s overrides)."""
    reap_interval_s: float = Field(default=1.0, gt=0)
    """How often environments past their budget are reclaimed."""
    sandbox_namespace: str = "ale-envs"
    """Namespace owning the sandboxes of sandbox-backed environments (``task:…``); the Admin
    creates them through its own SandboxService with an internal key, so quotas apply."""
    sandbox_image: str = ""
    """Image of those sandboxes ("" is the backend default; an EnvHub spec name works too)."""


class AdminEnvHubConfig(BaseModel):
    """The EnvHubService hosted on the Admin's port, with the Admin's API keys."""

    model_config = ConfigDict(extra="forbid")

    db_path: Path | None = None
    """The registry's SQLite file; None puts it beside the Admin's ``db_path`` (``<db>.envhub.db``)."""
    docker: DockerBuildConfig = Field(default_factory=DockerBuildConfig)
    """The docker builder."""


class AdminConfig(BaseModel):
    """Everything the Admin needs. Load with :meth:`load` (file + ``ALE_ROCK_*`` env)."""

    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    """Interface to listen on ("0.0.0.0" for a multi-machine deployment)."""
    port: int = Field(default=7700, ge=0, le=65535)
    """Port for SandboxService and WorkerRegistryService; 0 picks a free one."""
    db_path: Path = Path("ale-rock-admin.db")
    """SQLite state store (WAL); a restarted Admin recovers every sandbox from it."""
    api_keys: dict[str, str] = Field(default_factory=dict)
    """Client API key → namespace. Env ``ALE_ROCK_API_KEYS="key1=ns1,key2=ns2"``."""
    join_token: str = ""
    """Token workers present to register. Env ``ALE_ROCK_JOIN_TOKEN``. Empty refuses all workers."""
    quotas: dict[str, QuotaConfig] = Field(default_factory=dict)
    """Per-namespace quotas; namespaces not listed get ``default_quota``."""
    default_quota: QuotaConfig = Field(default_factory=QuotaConfig)
    """Quota of namespaces without an entry in ``quotas``."""
    max_concurrent_sandboxes: int = Field(default=2000, ge=0)
    """Global cap on active sandboxes across all namespaces."""
    default_resources: ResourceSpec = Field(default_factory=ResourceSpec)
    """Resources filled in for zero fields of a request."""
    max_resources: ResourceSpec = Field(default_factory=_default_maxima)
    """Largest resources one sandbox may ask for (more is INVALID_ARGUMENT)."""
    default_ttl_seconds: int = Field(default=6 * 3600, ge=1)
    """TTL of sandboxes that ask for none."""
    max_ttl_seconds: int = Field(default=7 * 24 * 3600, ge=1)
    """Longest TTL a sandbox may ask for."""
    images: list[str] | None = None
    """Known images ("" is the backend default). None accepts any well-formed reference and lets
    the worker decide; a list makes any other image (except committed snapshots) INVALID_ARGUMENT."""
    heartbeat_interval_ms: int = Field(default=1000, ge=50)
    """Interval at which workers are asked to heartbeat."""
    worker_lost_after_s: float = Field(default=5.0, gt=0)
    """A worker silent for this long is lost: nothing is scheduled on it and calls to its sandboxes
    are UNAVAILABLE, but its sandboxes keep their state for ``lost_worker_grace_s``."""
    lost_worker_grace_s: float = Field(default=300.0, ge=0)
    """How long a lost worker's sandboxes wait for it before they become LOST. A worker back
    within it (a restart, a network blip) gets its healthy sandboxes back as they were."""
    recovery_grace_s: float = Field(default=15.0, ge=0)
    """After an Admin restart, how long recovered workers get to heartbeat before they are lost
    (workers retry an unreachable admin on their own schedule)."""
    reaper_interval_s: float = Field(default=1.0, gt=0)
    """How often TTL, idle and heartbeat deadlines are checked."""
    start_timeout_s: float = Field(default=60.0, gt=0)
    """Deadline for a worker to start a sandbox."""
    max_command_bytes: int = Field(default=256 * 1024, ge=1)
    """Largest command line (or argv total) accepted by Exec and sessions."""
    deleted_retention_s: float = Field(default=3600.0, ge=0)
    """How long DELETED sandboxes stay in the store for auditing."""
    egress_denied: list[str] = Field(default_factory=list)
    """host:port of further ALE services no sandbox egress rule may name (a ModelProxy, an
    InferenceService); the Admin's own port and every registered worker's are always refused, as
    are loopback, link-local and this host's addresses."""
    tls: TLSConfig | None = None
    """Optional TLS for the Admin's port."""
    grace_period_s: float = Field(default=5.0, ge=0)
    """On SIGTERM: how long in-flight calls may finish."""
    envs: AdminEnvsConfig = Field(default_factory=AdminEnvsConfig)
    """EnvService on the Admin's port (on by default; ``envs: {enabled: false}`` turns it off)."""
    envhub: AdminEnvHubConfig | None = Field(default_factory=AdminEnvHubConfig)
    """EnvHubService on the Admin's port (None turns it off). While on, a SandboxSpec.image that
    names a registered spec ("name" or "name:version") starts from that spec's docker build."""

    @classmethod
    def load(cls, path: Path | str | None = None, **overrides: object) -> AdminConfig:
        """Read ``path`` (YAML) if given, then ``ALE_ROCK_*`` env vars, then ``overrides`` (None
        values skipped); a problem raises ``ale_proto.config.ConfigError`` naming the file, key or variable."""
        from ale_proto.config import ConfigError, Layer, load_config

        env: list[Layer] = []
        if keys := os.environ.get("ALE_ROCK_API_KEYS"):
            try:
                env.append(("environment variable ALE_ROCK_API_KEYS", {"api_keys": parse_key_list(keys)}))
            except ValueError as e:
                raise ConfigError(f"environment variable ALE_ROCK_API_KEYS: {e}") from None
        for name, key in (("ALE_ROCK_JOIN_TOKEN", "join_token"), ("ALE_ROCK_DB", "db_path")):
            if value := os.environ.get(name):
                env.append((f"environment variable {name}", {key: value}))
        flags = {k: v for k, v in overrides.items() if v is not None}
        return load_config(cls, path, flags, env=env)

    def quota_for(self, namespace: str) -> QuotaConfig:
        """The quota that applies to ``namespace``."""
        return self.quotas.get(namespace, self.default_quota)


def parse_key_list(text: str) -> dict[str, str]:
    """Parse ``"key1=ns1,key2=ns2"`` into ``{"key1": "ns1", ...}``."""
    out: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, ns = item.partition("=")
        if not sep or not key or not ns:
            raise ValueError(f"bad API key entry {item!r}: expected KEY=NAMESPACE")
        out[key] = ns
    return out
