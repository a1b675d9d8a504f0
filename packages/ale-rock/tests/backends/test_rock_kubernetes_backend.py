"""The ``kubernetes`` backend against the FAKE API server (``ale_rock.testing.fake_kube``), through
the official client over HTTP, with real Rocklet processes as the pods' containers.

Tests that take the ``cluster`` fixture also run against a real cluster, marked ``k8s``, when
``KUBECONFIG`` is set (docs/kubernetes.md: kind or k3s); the rest need the fake's controls
(dropped watches, compaction, a rival patch at the right moment, the kubelet's deadline).
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

pytest.importorskip("kubernetes", reason="needs ale-rock[kubernetes]")

from ale_proto.v1 import rocklet_pb2, rocklet_pb2_grpc, sandbox_pb2, worker_pb2, worker_pb2_grpc  # noqa: E402
from ale_rock.backends.base import Limits, SandboxConfig  # noqa: E402
from ale_rock.backends.kubernetes import KubernetesBackend, api_client  # noqa: E402
from ale_rock.backends.kubernetes_config import KubernetesBackendConfig, PoolSpec  # noqa: E402
from ale_rock.backends.kubernetes_rocklet import TOKEN_METADATA  # noqa: E402
from ale_rock.backends.kubernetes_spec import LABEL_STATE, LABEL_TTL, pool_key  # noqa: E402
from ale_rock.backends.kubernetes_target import parse  # noqa: E402
from ale_rock.testing.fake_kube import FakeKube  # noqa: E402

pytestmark = pytest.mark.timeout(120)


@dataclass
class Cluster:
    """Where the scenarios run: the fake, or a real cluster (``KUBECONFIG``)."""

    api_server: str
    namespace: str
    image: str
    rocklet_image: str
    network_policy: bool
    fake: FakeKube | None = None

    def config(self, **kw: Any) -> KubernetesBackendConfig:
        base: dict[str, Any] = {
            "api_server": self.api_server, "namespace": self.namespace, "rocklet_image": self.rocklet_image,
            "worker": "w" + uuid.uuid4().hex[:8], "network_policy": self.network_policy,
            "start_timeout_s": 60 if self.fake else 300, "qps": 200, "burst": 200,
        }  # fmt: skip
        base.update(kw)
        return KubernetesBackendConfig(**base)

    def core(self) -> Any:
        import kubernetes

        return kubernetes.client.CoreV1Api(api_client(self.api_server))


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeKube]:
    f = FakeKube()
    yield f
    f.close()
    left = [f"pid {pid}" for pid, _ in f.started if Path(f"/proc/{pid}").exists()]
    left += [d for _, d in f.started if Path(d).exists()]
    assert f.started and left == []  # every pod's process and temp dir went with its pod


@pytest.fixture(scope="module", params=["fake", pytest.param("real", marks=pytest.mark.k8s)])
def cluster(request: pytest.FixtureRequest, fake: FakeKube) -> Cluster:
    if request.param == "fake":
        return Cluster(fake.url, "sandboxes", "python:3.11", "ale-worker:0.1.0", True, fake)
    if not os.environ.get("KUBECONFIG"):
        pytest.skip("k8s: set KUBECONFIG to run against a real cluster (docs/kubernetes.md)")
    image = os.environ.get("ALE_K8S_IMAGE", "ale-worker:0.1.0")
    return Cluster(
        "",
        os.environ.get("ALE_K8S_NAMESPACE", "ale-test"),
        os.environ.get("ALE_K8S_TASK_IMAGE", image),
        image,
        os.environ.get("ALE_K8S_NETWORK_POLICY") == "1",
    )


@pytest.fixture
def backend(cluster: Cluster) -> Iterator[KubernetesBackend]:
    b = KubernetesBackend(cluster.config())
    yield b
    b.reap_orphans(set())
    b.close()


def _stub(backend: KubernetesBackend, sid: str) -> tuple[grpc.Channel, Any]:
    target = parse(str(backend.handle(sid).rocklet_socket))
    assert target is not None
    channel = target.channel([])
    return channel, rocklet_pb2_grpc.RockletServiceStub(channel)


def _sh(stub: Any, command: str, timeout: float = 20) -> Any:
    req = rocklet_pb2.RockletServiceExecRequest(spec=sandbox_pb2.ExecSpec(command=command, timeout_ms=15000))
    return stub.Exec(req, timeout=timeout).result


def _gone(backend: KubernetesBackend, sid: str, timeout: float = 15) -> bool:
    return backend.watcher.wait_for(lambda: backend._pod_of(sid) is None, timeout)


def test_start_exec_remove(cluster: Cluster, backend: KubernetesBackend) -> None:
    handle = backend.start("sb-one", SandboxConfig(image=cluster.image, env={"GREETING": "hi"}))
    assert backend.list() == ["sb-one"] and backend.is_running("sb-one")
    channel, stub = _stub(backend, "sb-one")
    with channel:
        out = _sh(stub, "echo $GREETING; pwd; id -u")
    assert out.exit_code == 0, out
    lines = out.stdout.decode().split()
    assert lines[0] == "hi"
    pod = cluster.core().read_namespaced_pod(handle.extra["pod"], cluster.namespace)
    assert pod.status.pod_ip == handle.extra["pod_ip"]
    backend.remove("sb-one")
    assert _gone(backend, "sb-one")
    assert backend.list() == [] and backend.lost_reason("sb-one") == ""


def test_rocklet_refuses_calls_without_its_token(cluster: Cluster, backend: KubernetesBackend) -> None:
    """Another pod that reaches the Rocklet's port gets nothing without the sandbox's token."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    backend.start("sb-tok", SandboxConfig(image=cluster.image))
    target = parse(str(backend.handle("sb-tok").rocklet_socket))
    assert target is not None
    req = rocklet_pb2.RockletServiceExecRequest(spec=sandbox_pb2.ExecSpec(command="touch /tmp/pwned"))
    with grpc.insecure_channel(target.target) as bare:
        stub = rocklet_pb2_grpc.RockletServiceStub(bare)
        for md in ([], [(TOKEN_METADATA, "0" * 48)], [(TOKEN_METADATA, target.token[:-1])]):
            with pytest.raises(grpc.RpcError) as err:
                stub.Exec(req, metadata=md, timeout=10)
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.RpcError) as err:  # a streaming method is refused the same way
            list(stub.ExecStream(rocklet_pb2.RockletServiceExecStreamRequest(spec=req.spec), timeout=10))
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        # The kubelet's readiness probe carries no token: health answers, and says nothing else.
        assert health_pb2_grpc.HealthStub(bare).Check(health_pb2.HealthCheckRequest(), timeout=10).status == 1
    channel, stub = _stub(backend, "sb-tok")
    with channel:
        assert _sh(stub, "test -e /tmp/pwned; echo $?").stdout.decode().strip() == "1"  # no call got through


def test_pod_spec_contract(fake: FakeKube) -> None:
    """requests = limits, the TTL as activeDeadlineSeconds, the owner, runtimeClass, no API token,
    the Rocklet from an init container, and the namespace's deny-all-egress NetworkPolicy."""
    core = Cluster(fake.url, "spec", "", "", True, fake).core()
    core.create_namespaced_pod(
        "spec", {"metadata": {"name": "worker-pod"}, "spec": {"containers": [{"name": "w", "image": "w"}]}}
    )
    kc = KubernetesBackendConfig(api_server=fake.url, namespace="spec", worker="wspec", owner_pod="worker-pod",
                                 runtime_class="gvisor", rocklet_image="ale-worker:9")  # fmt: skip
    b = KubernetesBackend(kc)
    try:
        limits = Limits(cpu_millis=500, memory_bytes=256 * 2**20, disk_bytes=2**30)
        h = b.start("sb-spec", SandboxConfig(image="task:1", limits=limits, ttl_seconds=600))
        pod = fake.get_pod("spec", h.extra["pod"])
        assert pod is not None
        spec, c = pod["spec"], pod["spec"]["containers"][0]
        assert (
            c["resources"]["requests"]
            == c["resources"]["limits"]
            == {"cpu": "500m", "memory": str(256 * 2**20), "ephemeral-storage": str(2**30)}
        )
        assert spec["activeDeadlineSeconds"] == 600
        assert spec["runtimeClassName"] == "gvisor" and spec["automountServiceAccountToken"] is False
        owner = fake.get_pod("spec", "worker-pod")
        assert owner is not None
        assert pod["metadata"]["ownerReferences"][0]["uid"] == owner["metadata"]["uid"]
        assert spec["initContainers"][0]["image"] == "ale-worker:9" and c["image"] == "task:1"
        assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
        assert c["readinessProbe"]["grpc"]["port"] == kc.rocklet_port
        pol = fake._read("networkpolicies", "spec", "ale-sandboxes")
        assert pol["spec"]["policyTypes"] == ["Ingress", "Egress"]
        assert [r["ports"][0]["port"] for r in pol["spec"]["egress"]] == [kc.proxy_port]  # the proxy only
        b2 = KubernetesBackend(kc.model_copy(update={"worker": "wspec2"}))  # a second worker: no 409 error
        b2.close()
    finally:
        b.reap_orphans(set())
        b.close()


def test_watch_resumes_and_relists_after_410(fake: FakeKube) -> None:
    """A dropped watch resumes from its version; a compacted one (410 Gone) lists again and sees
    what happened while it was away."""
    cl = Cluster(fake.url, "watch", "python:3.11", "", False, fake)
    b = KubernetesBackend(cl.config())
    try:
        b.start("sb-a", SandboxConfig(image=cl.image))
        resumes = b.watcher.resumes
        fake.drop_watches()
        b.start("sb-b", SandboxConfig(image=cl.image))  # Ready is seen only through the resumed watch
        assert b.watcher.resumes > resumes and b.watcher.relists == 1
        fake.pause_watches(True)
        fake.drop_watches()
        name = b.handle("sb-a").extra["pod"]
        fake._delete_pod("watch", name)  # behind the worker's back, while it is not watching
        deadline = time.monotonic() + 10
        while fake.get_pod("watch", name) is not None and time.monotonic() < deadline:
            time.sleep(0.02)
        fake.compact()
        assert b.is_running("sb-a")  # not seen yet
        fake.pause_watches(False)
        assert b.watcher.wait_for(lambda: b.watcher.relists >= 2, 10)
        assert _gone(b, "sb-a")
        assert "deleted by someone else" in b.lost_reason("sb-a") and not b.is_running("sb-a")
        assert b.is_running("sb-b") and "sb-a" in b.list()  # lost, listed until removed
    finally:
        fake.pause_watches(False)
        b.reap_orphans(set())
        b.close()


def test_warm_pool_claims_are_checked_against_the_resource_version(fake: FakeKube) -> None:
    """A claim with a stale resourceVersion gets 409: after a status update it retries and wins;
    after a rival's claim it leaves the pod to the rival and starts cold. Refills follow claims."""
    cl = Cluster(fake.url, "pool", "python:3.11", "", False, fake)
    limits = Limits(cpu_millis=500, memory_bytes=128 * 2**20)
    spec = PoolSpec(image=cl.image, cpu_millis=500, memory_bytes=128 * 2**20, size=2)
    b = KubernetesBackend(cl.config(pools=[spec], refill_batch=2))
    key = pool_key(cl.image, 500, 128 * 2**20)
    ready = lambda n: b.watcher.wait_for(  # noqa: E731
        lambda: sum(1 for p in b.pools.members(key) if p["status"].get("phase") == "Running"
                    and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))) >= n,
        30,
    )  # fmt: skip
    try:
        assert ready(2)
        warm = {p["metadata"]["name"] for p in b.pools.members(key)}
        # 1. The kubelet updated the pod since the watch saw it: 409, re-read, claim again.
        fake.before_patch = lambda ns, name: (fake.bump(ns, name), setattr(fake, "before_patch", None))
        h1 = b.start("sb-p1", SandboxConfig(image=cl.image, limits=limits))
        assert h1.extra["pod"] in warm and b.pools.conflicts == 1
        # 2. A rival claims the pod first: 409, and the pod stays the rival's.
        rival: list[str] = []

        def rival_claims(ns: str, name: str) -> None:
            fake.before_patch = None
            fake._patch(
                ns, name, {"metadata": {"labels": {LABEL_STATE: "claimed", "ale.sandbox_id": "rival"}}}, ""
            )
            rival.append(name)

        left = {p["metadata"]["name"] for p in b.pools.members(key)} & warm
        assert len(left) == 1
        fake.before_patch = rival_claims
        h2 = b.start("sb-p2", SandboxConfig(image=cl.image, limits=limits))
        assert rival == list(left) and h2.extra["pod"] not in warm  # cold start
        assert b.pools.conflicts == 2
        pod = fake.get_pod("pool", rival[0])
        assert pod is not None and pod["metadata"]["labels"]["ale.sandbox_id"] == "rival"
        channel, stub = _stub(b, "sb-p1")
        with channel:
            assert _sh(stub, "echo pooled").stdout == b"pooled\n"
        assert ready(2)  # refilled
        # A request the pool cannot serve (env) is a cold start and takes no warm pod.
        before = {p["metadata"]["name"] for p in b.pools.members(key)}
        h3 = b.start("sb-p3", SandboxConfig(image=cl.image, limits=limits, env={"X": "1"}))
        assert h3.extra["pod"] not in before
        # A warm pod evicted by the kubelet before any claim is deleted and replaced.
        victim = sorted(before)[0]
        fake.kubelet_evict("pool", victim)
        assert b.watcher.wait_for(lambda: victim not in b.watcher.pods, 15)
        assert ready(2) and victim not in {p["metadata"]["name"] for p in b.pools.members(key)}
    finally:
        fake.before_patch = None
        b.reap_orphans(set())
        b.close()


def test_eviction_mid_exec_makes_the_sandbox_lost_and_reported(cluster: Cluster, tmp_path: Path) -> None:
    """Through a real worker: an Exec runs in the pod when the pod is evicted; the call fails, and
    the worker reports the sandbox LOST with the reason."""
    from ale_rock.worker.auth import worker_channel
    from ale_rock.worker.config import WorkerConfig
    from ale_rock.worker.server import serve_worker

    kc = cluster.config()
    worker = serve_worker(
        WorkerConfig(state_dir=tmp_path / "w", worker_id="kw", backend="kubernetes", kubernetes=kc)
    )
    channel = worker_channel(worker.address, worker.secret)
    try:
        ws, rs = worker_pb2_grpc.WorkerServiceStub(channel), rocklet_pb2_grpc.RockletServiceStub(channel)
        spec = sandbox_pb2.SandboxSpec(image=cluster.image, ttl_seconds=900)
        started = ws.StartSandbox(worker_pb2.StartSandboxRequest(sandbox_id="sb-ev", spec=spec))
        assert started.state == sandbox_pb2.SANDBOX_STATE_RUNNING, started.message
        md = [("ale-sandbox-id", "sb-ev")]
        req = rocklet_pb2.RockletServiceExecRequest(
            spec=sandbox_pb2.ExecSpec(command="echo ok", timeout_ms=5000)
        )
        assert rs.Exec(req, metadata=md, timeout=20).result.stdout == b"ok\n"
        outcome: list[Any] = []

        def long_exec() -> None:
            long = rocklet_pb2.RockletServiceExecRequest(
                spec=sandbox_pb2.ExecSpec(command="sleep 60", timeout_ms=60000)
            )
            try:
                outcome.append(rs.Exec(long, metadata=md, timeout=50))
            except grpc.RpcError as e:
                outcome.append(e)

        t = threading.Thread(target=long_exec)
        t.start()
        time.sleep(0.5)  # the command is running in the pod
        pod = next(
            p
            for p in worker.backend.watcher.pods.values()
            if p["metadata"]["labels"].get("ale.sandbox_id") == "sb-ev"
        )  # type: ignore[attr-defined]
        name = pod["metadata"]["name"]
        assert pod["spec"]["activeDeadlineSeconds"] == 900  # the spec's TTL, through the worker
        cluster.core().create_namespaced_pod_eviction(
            name,
            kc.namespace,
            {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": name, "namespace": kc.namespace},
            },
        )
        t.join(30)
        assert not t.is_alive() and isinstance(outcome[0], grpc.RpcError), outcome
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            listed = {
                s.sandbox_id: s
                for s in ws.ListWorkerSandboxes(worker_pb2.ListWorkerSandboxesRequest()).sandboxes
            }
            if listed.get("sb-ev") is not None and listed["sb-ev"].state == sandbox_pb2.SANDBOX_STATE_LOST:
                break
            time.sleep(0.05)
        assert listed["sb-ev"].state == sandbox_pb2.SANDBOX_STATE_LOST, listed
        assert "evicted" in listed["sb-ev"].message
        ws.RemoveSandbox(worker_pb2.RemoveSandboxRequest(sandbox_id="sb-ev"))
        assert "sb-ev" not in {
            s.sandbox_id for s in ws.ListWorkerSandboxes(worker_pb2.ListWorkerSandboxesRequest()).sandboxes
        }
    finally:
        channel.close()
        worker.stop(grace_s=1)


def test_orphans_are_collected(cluster: Cluster) -> None:
    """The owner's deletion takes its sandboxes (garbage collector); a restarted worker reaps the
    pods it no longer keeps."""
    core = cluster.core()
    owner = "owner-" + uuid.uuid4().hex[:6]
    core.create_namespaced_pod(cluster.namespace, {
        "metadata": {"name": owner},
        "spec": {"containers": [{"name": "p", "image": cluster.image, "command": ["sleep", "3600"]}]},
    })  # fmt: skip
    kc = cluster.config(owner_pod=owner)
    b = KubernetesBackend(kc)
    try:
        b.start("sb-o1", SandboxConfig(image=cluster.image))
        name = b.handle("sb-o1").extra["pod"]
        pid = cluster.fake.pid_of(cluster.namespace, name) if cluster.fake else 0
        core.delete_namespaced_pod(owner, cluster.namespace, grace_period_seconds=0)
        assert b.watcher.wait_for(lambda: name not in b.watcher.pods, 60)
        assert "deleted by someone else" in b.lost_reason("sb-o1")
        if pid:
            assert not Path(f"/proc/{pid}").exists()  # the Rocklet process is gone too
    finally:
        b.close()
    # A worker restart: the new instance keeps one sandbox, reaps the other.
    b1 = KubernetesBackend(kc.model_copy(update={"owner_pod": ""}))
    try:
        b1.start("sb-keep", SandboxConfig(image=cluster.image))
        b1.start("sb-drop", SandboxConfig(image=cluster.image))
    finally:
        b1.close()
    b2 = KubernetesBackend(kc.model_copy(update={"owner_pod": ""}))
    try:
        assert sorted(b2.list()) == ["sb-drop", "sb-keep"]
        assert b2.reap_orphans({"sb-keep"}) == ["sb-drop"]
        assert _gone(b2, "sb-drop")
        channel, stub = _stub(b2, "sb-keep")  # adopted: reachable with the token read back from its pod
        with channel:
            assert _sh(stub, "echo kept").stdout == b"kept\n"
    finally:
        b2.reap_orphans(set())
        b2.close()


def test_deadline_from_the_ttl_makes_the_sandbox_lost(fake: FakeKube) -> None:
    cl = Cluster(fake.url, "ttl", "python:3.11", "", False, fake)
    b = KubernetesBackend(cl.config())
    try:
        h = b.start("sb-ttl", SandboxConfig(image=cl.image, labels={LABEL_TTL: "3600"}))  # the label form
        pod = fake.get_pod("ttl", h.extra["pod"])
        assert pod is not None and pod["spec"]["activeDeadlineSeconds"] == 3600
        fake.expire("ttl", h.extra["pod"])  # the deadline passes (without waiting an hour)
        assert b.watcher.wait_for(lambda: bool(b.lost_reason("sb-ttl")), 10)
        assert "activeDeadlineSeconds" in b.lost_reason("sb-ttl") and not b.is_running("sb-ttl")
    finally:
        b.reap_orphans(set())
        b.close()


def test_client_side_qps_limit(fake: FakeKube) -> None:
    cl = Cluster(fake.url, "qps", "", "", False, fake)
    b = KubernetesBackend(cl.config(qps=20, burst=1))
    try:
        t0 = time.monotonic()
        for _ in range(10):
            b._get("nothing")
        assert time.monotonic() - t0 >= 9 / 20 * 0.9  # 10 calls at 20/s after a burst of 1
    finally:
        b.close()
