"""Configuration of a Worker process."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ale_rock.backends.base import Limits
from ale_rock.backends.kubernetes_config import KubernetesBackendConfig
from ale_rock.envs.server import EnvServerConfig


class WorkerConfig(BaseModel):
    """Everything ``ale-rock worker`` needs."""

    model_config = ConfigDict(extra="forbid")

    address: str = "127.0.0.1:0"
    """host:port to serve WorkerService and the RockletService proxy on (port 0 = a free port)."""
    advertise_address: str = ""
    """host:port the admin should dial; "" = the bound address."""
    admin_address: str = ""
    """host:port of the admin's WorkerRegistryService; "" = run standalone (no registration)."""
    join_token: str = ""
    """Join token sent as ``authorization: Bearer <token>`` to the admin."""
    secret_file: Path | None = None
    """Also write this start's worker credential to this file (0600) for local tools; None keeps it
    in memory only (the admin learns it at RegisterWorker). A new one is drawn at every start."""
    worker_id: str = Field(default_factory=socket.gethostname)
    """Stable id of this worker."""
    backend: Literal["local", "docker", "kubernetes"] = "local"
    """Sandbox backend."""
    kubernetes: KubernetesBackendConfig | None = None
    """Settings of the ``kubernetes`` backend (one pod per sandbox; docs/kubernetes.md); None = the
    defaults, with ``worker`` from ``worker_id``."""
    state_dir: Path = Path("/tmp/ale-worker")
    """Where sandbox dirs, the egress socket and commits live (reaped at start-up)."""
    cpu_millis: int = Field(default=0, ge=0)
    """CPU offered to sandboxes in millicores; 0 = all cores of the machine."""
    memory_bytes: int = Field(default=0, ge=0)
    """Memory offered to sandboxes; 0 = the machine's total memory."""
    max_sandboxes: int = Field(default=500, ge=1)
    """Most sandboxes held at once."""
    pool_size: int = Field(default=2, ge=0, le=64)
    """Pre-started local sandboxes kept for fast creates."""
    default_limits: Limits = Field(default_factory=Limits)
    """Limits for request fields left at 0."""
    model_proxy_address: str = ""
    """host:port the reserved egress host "model-proxy" reaches; "" = none."""
    egress_max_streams_per_sandbox: int = Field(default=64, ge=1)
    """Egress connections one sandbox may hold open at once (more are RESOURCE_EXHAUSTED), so no
    sandbox can exhaust the gateway for the others."""
    egress_first_message_timeout_s: float = Field(default=5.0, gt=0)
    """An egress stream that names no target within this many seconds is closed."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Scheduling labels reported to the admin."""
    heartbeat_interval_s: float = Field(default=5.0, gt=0)
    """Heartbeat interval until the admin names one."""
    retry_interval_s: float = Field(default=2.0, gt=0)
    """Wait between attempts to reach an admin that is down."""
    cgroup: Literal["auto", "v1", "v2", "none"] = "auto"
    """Limit mechanism of the local backend."""
    kill_grace_s: float = Field(default=2.0, ge=0)
    """Seconds a timed-out command gets between SIGTERM and SIGKILL."""
    serve_envs: bool = False
    """Also serve the EnvService (the one of ``ale_rock.envs.server``, Batch included) on this
    worker's port: RL rollouts' text games run on the worker, so losing a worker loses its
    episodes like a real environment worker."""
    env_api_key: str = ""
    """With ``serve_envs``: EnvService calls must send ``authorization: Bearer <env_api_key>`` (as
    ``RemoteEnv(api_key=...)`` and ``BatchEnvClient(api_key=...)`` do); "" = no key, like the rest
    of the worker's port."""
    envs: EnvServerConfig = Field(default_factory=EnvServerConfig)
    """Limits of the hosted EnvService (max_envs, timeouts, batch sizes, where terminal tasks run);
    its host, port and max_workers are unused: it shares the worker's server."""
