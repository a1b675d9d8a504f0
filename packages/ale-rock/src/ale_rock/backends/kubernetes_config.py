"""Settings of the ``kubernetes`` backend (pydantic only: importing this never imports the client)."""

from __future__ import annotations

import re
import socket
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ale_rock.backends.base import Limits

# Pod names and label values: a DNS-1123 label is the strictest thing a name ends up in.
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$"


def _default_worker() -> str:
    name = re.sub(r"[^a-z0-9-]", "-", socket.gethostname().lower()).strip("-")
    return name[:42] or "worker"


class PoolSpec(BaseModel):
    """One warm pool: pods of one (image, cpu, memory) started ahead of demand."""

    model_config = ConfigDict(extra="forbid")

    image: str
    """Task image of the pooled pods."""
    cpu_millis: int = Field(default=1000, gt=0)
    """CPU request = limit of the pooled pods."""
    memory_bytes: int = Field(default=512 * 2**20, gt=0)
    """Memory request = limit of the pooled pods."""
    size: int = Field(default=2, ge=0, le=256)
    """Warm pods kept ready (a claim triggers a refill)."""


class KubernetesBackendConfig(BaseModel):
    """Settings of the ``kubernetes`` backend: one pod per sandbox, in one namespace."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["kubernetes"] = "kubernetes"
    """Discriminator for the backend union."""
    worker: str = Field(default_factory=_default_worker, pattern=DNS_LABEL)
    """This worker's name: the ``ale.worker`` label of its pods, so workers sharing a namespace
    never list or reap each other's sandboxes."""
    namespace: str = Field(default="ale-sandboxes", pattern=DNS_LABEL)
    """Namespace the sandbox pods live in."""
    api_server: str = ""
    """API server URL; "" = in-cluster config when ``KUBERNETES_SERVICE_HOST`` is set, else the
    kubeconfig (``KUBECONFIG`` or ``~/.kube/config``). Tests point it at the fake API server."""
    owner_pod: str = ""
    """Name of the worker's own pod (the downward API's ``metadata.name``) in ``owner_namespace``:
    every sandbox pod gets an ownerReference to it, so the garbage collector deletes a worker's
    sandboxes when its pod goes. "" = no owner (``reap_orphans`` and the deadline still apply)."""
    owner_namespace: str = ""
    """Namespace of ``owner_pod``; "" = ``namespace``. Owners must live in the dependents'
    namespace for the garbage collector, so a worker in another namespace gets no ownerReference."""
    rocklet_image: str = "ale-worker:latest"
    """Image of the init container that copies the Rocklet (``/opt/ale``: a Python + ale-rock) into
    the pod's emptyDir, so task images need no rebuild (they need a glibc; see docs/kubernetes.md)."""
    rocklet_dir: str = "/opt/ale"
    """Where the Rocklet lives inside ``rocklet_image``."""
    rocklet_port: int = Field(default=7070, gt=0, le=65535)
    """TCP port the Rocklet serves RockletService on at the pod IP."""
    runtime_class: str = ""
    """``runtimeClassName`` of sandbox pods (``gvisor``, ``kata``); "" = the cluster's default."""
    run_as_uid: int = Field(default=1000, gt=0)
    """Non-root uid (and gid) of the sandbox's processes."""
    default_ttl_s: int = Field(default=24 * 3600, gt=0)
    """``activeDeadlineSeconds`` of a pod whose sandbox names no TTL (label ``ale.ttl_s``)."""
    pools: list[PoolSpec] = Field(default_factory=list)
    """Warm pools; a request is served from one when its image, cpu and memory match and it asks
    for nothing a running Rocklet cannot take afterwards (no env, the default work dir)."""
    refill_batch: int = Field(default=8, ge=1, le=256)
    """Most pool pods created in one refill round."""
    qps: float = Field(default=20.0, gt=0)
    """Client-side limit on API calls per second (watches excluded), like kubectl's; spares the
    API server when thousands of sandboxes start at once."""
    burst: int = Field(default=40, ge=1)
    """Calls allowed at once above ``qps`` before the limit binds."""
    start_timeout_s: float = Field(default=120.0, gt=0)
    """How long ``start`` waits for the pod to be Ready (image pulls included)."""
    watch_timeout_s: int = Field(default=300, ge=1)
    """Server-side timeout of one watch request; the watch then resumes from the last version."""
    proxy_selector: dict[str, str] = Field(default_factory=lambda: {"app.kubernetes.io/name": "ale-proxy"})
    """Pod labels of the ModelProxy: the only egress the sandboxes' NetworkPolicy allows."""
    proxy_namespace: str = "ale"
    """Namespace of the ModelProxy and the workers (allowed to reach the Rocklet port)."""
    proxy_port: int = Field(default=8080, gt=0, le=65535)
    """Port of the ModelProxy."""
    worker_selector: dict[str, str] = Field(default_factory=lambda: {"app.kubernetes.io/name": "ale-worker"})
    """Pod labels of the workers: the only ingress the NetworkPolicy allows (Rocklet port)."""
    network_policy: bool = True
    """Create the namespace's deny-all-egress NetworkPolicy at start-up (idempotent)."""
    default_limits: Limits = Field(default_factory=Limits)
    """Limits for request fields left at 0."""
