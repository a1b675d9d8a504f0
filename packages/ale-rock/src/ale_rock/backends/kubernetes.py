"""The ``kubernetes`` backend: one pod per sandbox, for tasks that bring their own image.

Each sandbox is a pod whose main process is the Rocklet, copied by an init container into an
emptyDir (task images need no rebuild) and served over TCP at the pod IP behind a per-sandbox token
(:mod:`kubernetes_rocklet`); the worker dials it directly (``kubernetes_target``; no exec API:
``kubernetes.stream()`` is not thread-safe). Pods are watched, never polled (:mod:`kubernetes_watch`):
``start`` returns once the watch shows the pod Ready (the kubelet's gRPC health probe) and the
worker's own health check passes. A pod that fails, is evicted, hits its deadline
(``activeDeadlineSeconds`` from the TTL) or is deleted behind our back makes its sandbox LOST, with
the reason (:meth:`KubernetesBackend.lost_reason`). requests = limits; optional
``runtimeClassName``; an ownerReference to the worker's pod; a deny-all-egress NetworkPolicy with
the ModelProxy as the only door; warm pools (:mod:`kubernetes_pool`); a client-side QPS limit.

The official ``kubernetes`` client is an optional dependency (``pip install 'ale-rock[kubernetes]'``),
imported lazily. docs/kubernetes.md has the cluster side (RBAC, the pod's privileges, kind/k3s).
"""

from __future__ import annotations

import builtins
import json
import logging
import secrets
import threading
from pathlib import Path
from typing import Any

from ale_proto.errors import InternalError, SandboxNotFound

from ale_rock.backends.base import SandboxConfig, SandboxHandle, Usage
from ale_rock.backends.kubernetes_config import KubernetesBackendConfig, PoolSpec
from ale_rock.backends.kubernetes_pool import PodPools, is_ready
from ale_rock.backends.kubernetes_rate import RateLimiter
from ale_rock.backends.kubernetes_spec import (
    LABEL_POOL,
    LABEL_SANDBOX,
    LABEL_STATE,
    LABEL_WORKER,
    network_policy,
    pod_manifest,
    pool_key,
)
from ale_rock.backends.kubernetes_target import encode
from ale_rock.backends.kubernetes_watch import PodWatcher

log = logging.getLogger(__name__)
Pod = dict[str, Any]
_ID_RE = r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$"  # a label value


class KubernetesBackendError(InternalError, RuntimeError):
    """The API server refused or failed an operation (the message carries its reason)."""


def _client() -> Any:
    try:
        import kubernetes
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError(
            "the kubernetes backend needs the client: pip install 'ale-rock[kubernetes]'"
        ) from e
    return kubernetes


def api_client(api_server: str) -> Any:
    """An ApiClient: ``api_server`` if named, else in-cluster config, else the kubeconfig."""
    import os

    k8s = _client()
    if api_server:
        cfg = k8s.client.Configuration()
        cfg.host = api_server
        return k8s.client.ApiClient(cfg)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        k8s.config.load_incluster_config()
    else:
        k8s.config.load_kube_config()
    return k8s.client.ApiClient()


def lost_reason_of(pod: Pod, deleted: bool) -> str:
    """Why a pod's sandbox is gone, or "" while it may still run."""
    status = pod.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
            return (
                f"pod evicted ({cond.get('reason', 'DisruptionTarget')}): {cond.get('message', '')}".strip()
            )
    phase = status.get("phase")
    if phase in ("Failed", "Succeeded"):
        reason = status.get("reason") or "ContainerExited"
        if reason == "Evicted":
            return f"pod evicted by the kubelet: {status.get('message', '')}".strip()
        if reason == "DeadlineExceeded":
            return "pod reached its activeDeadlineSeconds (the sandbox's TTL)"
        return f"pod {phase.lower()} ({reason}) {status.get('message', '')}".strip()
    if deleted:
        return "pod deleted by someone else (node drain, owner gone, kubectl delete)"
    return ""


class KubernetesBackend:
    """Sandboxes as pods (see the module docstring)."""

    name = "kubernetes"

    def __init__(self, config: KubernetesBackendConfig | None = None) -> None:
        self.config = kc = config or KubernetesBackendConfig()
        k8s = _client()
        self._exc = k8s.client.exceptions.ApiException
        self._api = api_client(kc.api_server)
        self._core = k8s.client.CoreV1Api(self._api)
        self._net = k8s.client.NetworkingV1Api(self._api)
        self.limiter = RateLimiter(kc.qps, kc.burst)
        self._lock = threading.Lock()
        self._removing: set[str] = set()  # pod names we delete: their DELETED is no loss
        self._lost: dict[str, str] = {}  # sandbox id -> why
        self._stopped: set[str] = set()  # sandbox ids stopped (pod deleted), listed until removed
        self._starting: set[str] = set()  # not listed yet: the worker's crash reaper must not see a
        # pod that is not Ready yet as a crashed sandbox
        self._owner = self._owner_reference()
        if kc.network_policy:
            self._ensure_network_policy()
        self.watcher = PodWatcher(
            self._core, kc.namespace, f"{LABEL_WORKER}={kc.worker}", self._on_event,
            kc.watch_timeout_s, self.limiter.acquire,
        )  # fmt: skip
        self.watcher.start()
        specs = [(pool_key(p.image, p.cpu_millis, p.memory_bytes), p) for p in kc.pools]
        self.pools = PodPools(
            specs,
            kc.refill_batch,
            self._pod_list,
            self._create_pool_pod,
            self._patch,
            self._get,
            self._delete,
        )
        self.pools.start()

    def close(self) -> None:
        """Stop the watch and the refills (pods stay: ``reap_orphans`` or the owner's GC takes them)."""
        self.pools.stop()
        self.watcher.stop()
        self._api.close()

    # -- API calls, each behind the QPS limit --------------------------------------------------------

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        self.limiter.acquire()
        resp = fn(*args, _preload_content=False, **kwargs)
        return json.loads(resp.data) if resp.data else {}

    def _get(self, name: str) -> Pod | None:
        try:
            pod: Pod = self._call(self._core.read_namespaced_pod, name, self.config.namespace)
        except self._exc as e:
            if e.status == 404:
                return None
            raise
        return pod

    def _patch(self, name: str, body: dict[str, Any]) -> Pod:
        pod: Pod = self._call(
            self._core.patch_namespaced_pod, name, self.config.namespace, body,
            _content_type="application/merge-patch+json",
        )  # fmt: skip
        with self.watcher.changed:
            self.watcher.pods[name] = pod  # the claimer sees its own write before the watch does
        return pod

    def _create(self, pod: Pod) -> Pod:
        try:
            made: Pod = self._call(self._core.create_namespaced_pod, self.config.namespace, pod)
        except self._exc as e:
            raise KubernetesBackendError(
                f"creating pod {pod['metadata']['name']}: {e.status} {e.reason}"
            ) from e
        with self.watcher.changed:
            self.watcher.pods.setdefault(made["metadata"]["name"], made)
        return made

    def _delete(self, name: str) -> None:
        with self._lock:
            self._removing.add(name)
        try:
            self._call(self._core.delete_namespaced_pod, name, self.config.namespace, grace_period_seconds=0)
        except self._exc as e:
            if e.status != 404:
                raise

    def _owner_reference(self) -> dict[str, Any] | None:
        kc = self.config
        if not kc.owner_pod or (kc.owner_namespace or kc.namespace) != kc.namespace:
            return None
        owner = self._get(kc.owner_pod)
        if owner is None:
            raise KubernetesBackendError(f"owner pod {kc.owner_pod} not found in {kc.namespace}")
        meta = owner["metadata"]
        return {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]}

    def _ensure_network_policy(self) -> None:
        try:
            self._call(
                self._net.create_namespaced_network_policy, self.config.namespace, network_policy(self.config)
            )
        except self._exc as e:
            if e.status != 409:  # 409: already there (another worker made it)
                raise

    # -- the cache --------------------------------------------------------------------------------

    def _pod_list(self) -> list[Pod]:
        with self.watcher.changed:
            return list(self.watcher.pods.values())

    def _pod_of(self, sandbox_id: str) -> Pod | None:
        with self.watcher.changed:
            for pod in self.watcher.pods.values():
                meta = pod["metadata"]
                if meta.get("deletionTimestamp") or meta["name"] in self._removing:
                    continue  # going: the sandbox no longer has it
                if (meta.get("labels") or {}).get(LABEL_SANDBOX) == sandbox_id:
                    return pod
        return None

    def _on_event(self, kind: str, pod: Pod) -> None:
        meta = pod["metadata"]
        sid = (meta.get("labels") or {}).get(LABEL_SANDBOX)
        if (meta.get("labels") or {}).get(LABEL_STATE) == "warm" and hasattr(self, "pools"):
            self.pools.wake()  # a pool pod came, went or died: the refill loop looks
        with self._lock:
            ours = meta["name"] in self._removing
            if kind == "DELETED":
                self._removing.discard(meta["name"])
            if not sid or ours or sid in self._stopped or sid in self._lost:
                return
            why = lost_reason_of(pod, kind == "DELETED" or bool(meta.get("deletionTimestamp")))
            if why:
                self._lost[sid] = why
        if why:
            log.warning("sandbox %s is lost: %s", sid, why)

    # -- lifecycle --------------------------------------------------------------------------------

    def _pod_name(self) -> str:
        return f"ale-{self.config.worker}-{secrets.token_hex(5)}"

    def _with_defaults(self, config: SandboxConfig) -> SandboxConfig:
        d = self.config.default_limits
        lim = config.limits
        merged = {k: getattr(lim, k) or getattr(d, k) for k in type(lim).model_fields}
        return config.model_copy(update={"limits": type(lim)(**merged)})

    def _poolable(self, config: SandboxConfig) -> str | None:
        base = SandboxConfig(
            image=config.image,
            limits=config.limits,
            labels=config.labels,
            namespace=config.namespace,
            ttl_seconds=config.ttl_seconds,  # a pooled pod keeps default_ttl_s; the Admin enforces the TTL
        )
        if config != base:
            return None  # env, work dir, egress or read-only root: a running Rocklet cannot take them
        d = self.config.default_limits
        lim = config.limits
        if (lim.disk_bytes, lim.max_pids, lim.max_open_files) != (d.disk_bytes, d.max_pids, d.max_open_files):
            return None
        return pool_key(config.image, lim.cpu_millis, lim.memory_bytes)

    def _create_pool_pod(self, spec: PoolSpec, key: str) -> None:
        limits = self.config.default_limits.model_copy(
            update={"cpu_millis": spec.cpu_millis, "memory_bytes": spec.memory_bytes}
        )
        config = SandboxConfig(image=spec.image, limits=limits)
        labels = {LABEL_POOL: key, LABEL_STATE: "warm"}
        self._create(
            pod_manifest(self.config, self._pod_name(), config, secrets.token_hex(24), labels, self._owner)
        )

    def start(self, sandbox_id: str, config: SandboxConfig) -> SandboxHandle:
        """Claim a warm pod or create one; return once it is Ready and its Rocklet answers."""
        import re

        if not re.match(_ID_RE, sandbox_id):
            raise ValueError(f"sandbox_id: {sandbox_id!r} is not a Kubernetes label value")
        if not config.image:
            raise ValueError("image: the kubernetes backend needs a task image")
        if self._pod_of(sandbox_id) is not None:
            raise FileExistsError(f"sandbox {sandbox_id} exists")
        config = self._with_defaults(config)
        with self._lock:
            self._starting.add(sandbox_id)
        try:
            return self._start(sandbox_id, config)
        finally:
            with self._lock:
                self._starting.discard(sandbox_id)

    def _start(self, sandbox_id: str, config: SandboxConfig) -> SandboxHandle:
        key = self._poolable(config)
        pod = self.pools.claim(key, sandbox_id) if key else None
        if pod is None:
            manifest = pod_manifest(
                self.config, self._pod_name(), config, secrets.token_hex(24),
                {LABEL_SANDBOX: sandbox_id, LABEL_STATE: "claimed"}, self._owner,
            )  # fmt: skip
            pod = self._create(manifest)
        name = pod["metadata"]["name"]
        with self._lock:
            self._lost.pop(sandbox_id, None)
            self._stopped.discard(sandbox_id)
        ok = self.watcher.wait_for(
            lambda: (
                (p := self.watcher.pods.get(name)) is None or is_ready(p) or bool(lost_reason_of(p, False))
            ),
            self.config.start_timeout_s,
        )
        current = self.watcher.pods.get(name)
        if not ok or current is None or not is_ready(current):
            if current is None:
                why = "the pod vanished"
            elif lost := lost_reason_of(current, False):
                why = lost
            else:
                why = f"not Ready within {self.config.start_timeout_s:g} s"
            self._delete(name)
            raise KubernetesBackendError(f"sandbox {sandbox_id}: pod {name} failed to start: {why}")
        handle = self._handle_of(sandbox_id, current)
        self._check_health(handle)
        return handle

    def _handle_of(self, sandbox_id: str, pod: Pod) -> SandboxHandle:
        spec = pod["spec"]["containers"][0]
        env = {e["name"]: e.get("value", "") for e in spec.get("env") or []}
        ip = (pod.get("status") or {}).get("podIP", "")
        path = encode(ip, int(env["ALE_ROCKLET_PORT"]), env["ALE_ROCKLET_TOKEN"])
        return SandboxHandle(
            sandbox_id=sandbox_id,
            rocklet_socket=Path(path),
            host_dir=Path("/nonexistent/ale-kubernetes") / sandbox_id,  # no host state: all in the pod
            extra={"pod": pod["metadata"]["name"], "namespace": self.config.namespace, "pod_ip": ip},
        )

    def _check_health(self, handle: SandboxHandle) -> None:
        """The worker's own gRPC health check over the path its calls will take."""
        import grpc
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        from ale_rock.backends.kubernetes_target import parse

        target = parse(str(handle.rocklet_socket))
        assert target is not None
        with target.channel([]) as channel:
            try:
                health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
            except grpc.RpcError as e:
                self._delete(handle.extra["pod"])
                raise KubernetesBackendError(f"sandbox {handle.sandbox_id}: Rocklet unreachable: {e}") from e

    def handle(self, sandbox_id: str) -> SandboxHandle:
        """The handle of a running sandbox (also one adopted after a worker restart)."""
        pod = self._pod_of(sandbox_id)
        if pod is None:
            raise SandboxNotFound(f"sandbox {sandbox_id} not found on kubernetes worker {self.config.worker}")
        return self._handle_of(sandbox_id, pod)

    def lost_reason(self, sandbox_id: str) -> str:
        """Why the sandbox is LOST (its pod failed, was evicted or deleted), or "" if it is not."""
        with self._lock:
            return self._lost.get(sandbox_id, "")

    def stop(self, sandbox_id: str, grace_s: float = 5.0) -> None:
        """Delete the pod (a pod cannot be stopped and kept); the sandbox stays listed as stopped."""
        pod = self._pod_of(sandbox_id)
        with self._lock:
            known = pod is not None or sandbox_id in self._lost or sandbox_id in self._stopped
            self._stopped.add(sandbox_id)
        if not known:
            with self._lock:
                self._stopped.discard(sandbox_id)
            raise SandboxNotFound(f"sandbox {sandbox_id} not found")
        if pod is not None:
            self._delete(pod["metadata"]["name"])

    def remove(self, sandbox_id: str) -> None:
        """Delete the pod and forget the sandbox. Idempotent."""
        pod = self._pod_of(sandbox_id)
        if pod is not None:
            self._delete(pod["metadata"]["name"])
        with self.watcher.changed:  # pods already going (evicted, deleted): their DELETED is no loss
            going = [
                p["metadata"]["name"] for p in self.watcher.pods.values()
                if (p["metadata"].get("labels") or {}).get(LABEL_SANDBOX) == sandbox_id
            ]  # fmt: skip
        with self._lock:
            self._removing.update(going)
            self._stopped.discard(sandbox_id)
            self._lost.pop(sandbox_id, None)

    def list(self) -> builtins.list[str]:
        """Claimed sandboxes with a pod, plus stopped and lost ones not yet removed."""
        with self.watcher.changed:
            ids = {
                sid for p in self.watcher.pods.values()
                if (sid := (p["metadata"].get("labels") or {}).get(LABEL_SANDBOX))
                and p["metadata"]["name"] not in self._removing
            }  # fmt: skip
        with self._lock:
            return sorted((ids - self._starting) | self._stopped | set(self._lost))

    def is_running(self, sandbox_id: str) -> bool:
        """True while the pod runs Ready and the sandbox is not lost or stopped."""
        with self._lock:
            if sandbox_id in self._lost or sandbox_id in self._stopped:
                return False
        pod = self._pod_of(sandbox_id)
        return pod is not None and is_ready(pod)

    def usage(self, sandbox_id: str) -> Usage:
        """Not measured (the metrics API is optional in a cluster): zeros for a known sandbox."""
        if sandbox_id not in self.list():
            raise SandboxNotFound(f"sandbox {sandbox_id} not found")
        return Usage()

    def commit(self, sandbox_id: str, name: str) -> tuple[str, int, str]:
        """Not supported: a pod's file system cannot be snapshotted through the API."""
        raise KubernetesBackendError("commit is not supported by the kubernetes backend")

    def reap_orphans(self, keep: set[str]) -> builtins.list[str]:
        """Delete this worker's pods whose sandbox is not in ``keep`` (warm pool pods stay)."""
        reaped = []
        for pod in self._pod_list():
            labels = pod["metadata"].get("labels") or {}
            meta = pod["metadata"]
            if (
                labels.get(LABEL_STATE) == "warm"
                or meta.get("deletionTimestamp")
                or meta["name"] in self._removing
            ):
                continue
            sid = labels.get(LABEL_SANDBOX, "")
            if sid not in keep:
                self._delete(pod["metadata"]["name"])
                reaped.append(sid or pod["metadata"]["name"])
        with self._lock:
            for sid in builtins.list(self._lost) + builtins.list(self._stopped):
                if sid not in keep:
                    self._lost.pop(sid, None)
                    self._stopped.discard(sid)
        return reaped
