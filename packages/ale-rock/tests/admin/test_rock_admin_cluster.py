"""The Admin as a real process on a real port, with stand-in workers (real processes):
lifecycle, quotas, TTL/idle cleanup, namespaces, auth, WatchSandboxes, and kill -9 faults."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from ale_rock import (
    Client,
    FailedPrecondition,
    InvalidArgument,
    QuotaExceeded,
    Sandbox,
    SandboxChange,
    SandboxLost,
    SandboxNotFound,
    SandboxStartFailed,
    Unauthenticated,
    Unavailable,
)
from ale_rock.local_cluster import LocalCluster

from .._wait import wait_until

FAST = {"heartbeat_interval_ms": 200, "worker_lost_after_s": 1.5, "lost_worker_grace_s": 0, "reaper_interval_s": 0.2}


def test_lifecycle_through_the_sdk(make_cluster: Callable[..., LocalCluster]) -> None:
    cluster = make_cluster()
    client = cluster.client()
    sb = Sandbox.create(client=client, cpu=0.5, memory="64Mi", labels={"team": "rl"})
    assert sb.info.state == "running" and sb.info.cpu_millis == 500 and sb.info.worker_id == "w1"
    result = sb.exec("echo hello; echo oops >&2; exit 3")
    assert (result.stdout, result.stderr, result.exit_code, result.ok) == ("hello\n", "oops\n", 3, False)
    events = list(sb.exec_stream("echo a; echo b"))
    assert [e.kind for e in events] == ["started", "stdout", "stdout", "exit"]
    assert [i.id for i in Sandbox.list(client=client, labels={"team": "rl"})] == [sb.id]
    assert Sandbox.list(client=client, labels={"team": "other"}) == []
    assert sb.stop().state == "stopped"
    with pytest.raises(FailedPrecondition):
        sb.exec("true")
    again = Sandbox.connect(sb.id, client=client)
    assert again.info.state == "stopped"
    sb.delete()
    assert Sandbox.list(client=client) == []
    assert [i.state for i in Sandbox.list(client=client, states=["deleted"])] == ["deleted"]
    sb.delete()  # idempotent


def test_start_failure_and_unknown_image(make_cluster: Callable[..., LocalCluster]) -> None:
    cluster = make_cluster(admin_config={"images": ["", "fail", "base:1"]})
    client = cluster.client()
    with pytest.raises(SandboxStartFailed, match="image 'fail'"):
        Sandbox.create("fail", client=client)
    assert [i.state for i in Sandbox.list(client=client)] == ["failed"]
    with pytest.raises(InvalidArgument) as e:
        Sandbox.create("nope:latest", client=client)
    assert e.value.field == "spec.image"


def test_quotas_and_global_cap(make_cluster: Callable[..., LocalCluster]) -> None:
    cluster = make_cluster(
        namespaces={"a": "key-a", "b": "key-b"},
        admin_config={"quotas": {"a": {"max_sandboxes": 2, "max_cpu_millis": 100_000, "max_memory_bytes": 2**40},
                                 "b": {"max_cpu_millis": 1500, "max_memory_bytes": 2**40}},
                      "max_concurrent_sandboxes": 4},
    )
    a, b = cluster.client("a"), cluster.client("b")
    keep = [Sandbox.create(client=a, cpu=0.1), Sandbox.create(client=a, cpu=0.1)]
    with pytest.raises(QuotaExceeded) as e:
        Sandbox.create(client=a, cpu=0.1)
    assert e.value.quota == "max_sandboxes" and "max_sandboxes" in str(e.value)
    keep.append(Sandbox.create(client=b, cpu=1.0))
    with pytest.raises(QuotaExceeded) as e:
        Sandbox.create(client=b, cpu=1.0)
    assert e.value.quota == "max_cpu_millis" and e.value.field == "spec.resources.cpu_millis"
    keep.append(Sandbox.create(client=b, cpu=0.5))
    with pytest.raises(QuotaExceeded) as e:  # 4 active across namespaces: the global cap
        Sandbox.create(client=b, cpu=0.0)
    assert e.value.quota == "max_concurrent_sandboxes"
    keep[0].stop()  # stopped sandboxes free their quota
    Sandbox.create(client=a, cpu=0.1).delete()


def test_namespace_isolation_and_auth(make_cluster: Callable[..., LocalCluster]) -> None:
    cluster = make_cluster(namespaces={"a": "key-a", "b": "key-b"})
    sb = Sandbox.create(client=cluster.client("a"))
    other = Sandbox(sb.id, cluster.client("b"))
    for op in (other.refresh, lambda: other.exec("true"), other.stop, other.delete, other.stats):
        with pytest.raises(SandboxNotFound):
            op()
    assert Sandbox.list(client=cluster.client("b")) == []
    assert sb.exec("echo still").stdout == "still\n"
    with pytest.raises(Unauthenticated):
        Sandbox.list(client=Client(cluster.address, "wrong-key"))
    with pytest.raises(Unauthenticated):
        Client(cluster.address, "")
    with pytest.raises(SandboxNotFound):
        Sandbox.connect("sb-000000000000", client=cluster.client("a"))


def test_worker_needs_the_join_token(make_cluster: Callable[..., LocalCluster]) -> None:
    from ale_proto.v1 import worker_pb2, worker_pb2_grpc

    cluster = make_cluster(workers=0)
    stub = worker_pb2_grpc.WorkerRegistryServiceStub(grpc.insecure_channel(cluster.address))
    req = worker_pb2.RegisterWorkerRequest(worker=worker_pb2.WorkerInfo(worker_id="evil", address="1.2.3.4:1"))
    for md in ((), (("authorization", f"Bearer {cluster.api_key()}"),)):
        with pytest.raises(grpc.RpcError) as e:
            stub.RegisterWorker(req, metadata=md, timeout=5)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(Unavailable, match="no worker"):
        Sandbox.create(client=cluster.client())


def test_ttl_and_idle_cleanup(make_cluster: Callable[..., LocalCluster]) -> None:
    cluster = make_cluster(admin_config=FAST)
    client = cluster.client()
    short = Sandbox.create(client=client, ttl=1)
    idle = Sandbox.create(client=client, idle_timeout=1)
    busy = Sandbox.create(client=client, idle_timeout=2)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:  # keep `busy` busy past its idle timeout
        busy.exec("true")
        time.sleep(0.3)
    wait_until(lambda: short.refresh().state == "deleted", what="ttl delete")
    wait_until(lambda: idle.refresh().state == "stopped", what="idle stop")
    assert busy.refresh().state == "running"


def _watch(client: Client, ids: list[str]) -> tuple[list[SandboxChange], threading.Thread]:
    seen: list[SandboxChange] = []

    def run() -> None:
        try:
            for ev in Sandbox.watch(client=client, ids=ids, send_initial=True):
                seen.append(ev)
        except Exception:  # the test closes the channel to end the stream
            pass

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return seen, th


def _sandbox_processes(marker: str) -> list[int]:
    """Pids whose command line mentions ``marker`` (a worker's state dir)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmd:
                out.append(int(entry))
    return out


# A worker too busy to heart-beat (a loaded engine) is declared lost while the Admin has a call in
# flight to it, and comes back within the grace. The Admin used to close a lost worker's channel,
# which cancelled that call: a create stayed PENDING until its TTL and the client's CreateSandbox,
# DeleteSandbox or Exec ran into its deadline (a CI run of the docker-worker restart test).
SLOW_WORKER = {**FAST, "worker_lost_after_s": 1.0, "lost_worker_grace_s": 60}


def _was_lost(cluster: LocalCluster) -> bool:
    return "worker lost" in (cluster.dir / "admin.log").read_text()


def test_a_create_in_flight_when_its_worker_is_lost_and_back_finishes(
        make_cluster: Callable[..., LocalCluster]) -> None:
    cluster = make_cluster(admin_config=SLOW_WORKER)
    t0 = time.monotonic()
    sb = Sandbox.create(client=cluster.client(), env={"FAKE_MUTE_S": "2.5", "FAKE_START_S": "4"}, timeout=30)
    assert sb.info.state == "running", sb.info.message
    assert time.monotonic() - t0 < 15
    assert _was_lost(cluster)  # the scenario happened: lost, then back
    assert sb.exec("echo ok").stdout == "ok\n"
    sb.delete()
    assert sb.refresh().state == "deleted"


def test_an_exec_in_flight_when_its_worker_is_lost_and_back_finishes(
        make_cluster: Callable[..., LocalCluster]) -> None:
    cluster = make_cluster(admin_config=SLOW_WORKER)
    sb = Sandbox.create(client=cluster.client())
    result = sb.exec("sleep 3; echo done", env={"FAKE_MUTE_S": "2"}, timeout=30)
    assert (result.stdout, result.exit_code) == ("done\n", 0)
    assert _was_lost(cluster)
    assert sb.refresh().state == "running"


def test_a_create_in_flight_when_its_worker_is_lost_for_good_fails_typed(
        make_cluster: Callable[..., LocalCluster]) -> None:
    """No grace: its sandboxes are LOST at once; the create answers with that, not a deadline."""
    cluster = make_cluster(admin_config={**SLOW_WORKER, "lost_worker_grace_s": 0})
    t0 = time.monotonic()
    with pytest.raises(SandboxStartFailed, match="stopped heart-beating") as e:
        Sandbox.create(client=cluster.client(), env={"FAKE_MUTE_S": "2.5", "FAKE_START_S": "4"}, timeout=30)
    assert time.monotonic() - t0 < 15, e.value
    assert _was_lost(cluster)


def test_watch_and_lost_worker_then_reschedule(make_cluster: Callable[..., LocalCluster]) -> None:
    cluster = make_cluster(workers=1, admin_config=FAST, real=True)
    client = cluster.client()
    doomed = Sandbox.create(client=client)
    assert doomed.info.worker_id == "w1"
    watch_client = cluster.client()
    seen, th = _watch(watch_client, [doomed.id])
    wait_until(lambda: seen, what="initial snapshot")
    assert seen[0].sandbox.state == "running" and seen[0].previous_state == "unspecified"
    cluster.start_worker("w2")
    cluster.kill_worker("w1")
    wait_until(lambda: any(c.sandbox.state == "lost" for c in seen), what="LOST event")
    lost = next(c for c in seen if c.sandbox.state == "lost")
    assert lost.previous_state == "running" and "heart" in lost.sandbox.message
    with pytest.raises(SandboxLost):
        doomed.exec("true")
    fresh = Sandbox.create(client=client)
    assert fresh.info.worker_id == "w2" and fresh.exec("echo ok").stdout == "ok\n"
    doomed.delete()
    assert doomed.refresh().state == "deleted"
    watch_client.close()
    th.join(timeout=10)
    # a restarted w1 is told to keep nothing: no process or sandbox dir of the killed one is left
    state = cluster.worker_state_dir("w1")
    cluster.start_worker("w1")
    w1_pid = cluster.worker_pids()["w1"]
    wait_until(lambda: set(_sandbox_processes(str(state) + "/")) <= {w1_pid}, what="orphans reaped", timeout=30)
    sandboxes_dir = state / "sandboxes"
    wait_until(lambda: not sandboxes_dir.exists() or not any(sandboxes_dir.iterdir()), what="dirs reaped", timeout=30)


def test_kill_9_admin_recovers_state_and_clients_see_unavailable(make_cluster: Callable[..., LocalCluster]) -> None:
    cluster = make_cluster(admin_config=FAST, real=True)
    client = cluster.client(timeout=5)
    sb = Sandbox.create(client=client, labels={"k": "v"})
    stopped = Sandbox.create(client=client)
    stopped.stop()
    cluster.kill_admin()
    with pytest.raises(Unavailable, match="cannot reach the admin"):
        sb.exec("true")
    cluster.start_admin()  # same port, same database
    states = wait_until(lambda: _states(cluster), what="list after restart")
    assert states == {sb.id: "running", stopped.id: "stopped"}
    # the worker kept heart-beating to the new admin: the old sandbox still runs commands
    wait_until(lambda: _exec_ok(Sandbox(sb.id, cluster.client())), what="exec after restart")
    assert Sandbox.connect(sb.id, client=cluster.client()).info.labels == {"k": "v"}


def _states(cluster: LocalCluster) -> dict[str, str] | None:
    try:
        return {i.id: i.state for i in Sandbox.list(client=cluster.client())}
    except Unavailable:  # the channel's reconnect backoff may still be running
        return None


def _exec_ok(sb: Sandbox) -> bool:
    try:
        return sb.exec("echo back").stdout == "back\n"
    except Unavailable:
        return False


def test_health_and_reflection(make_cluster: Callable[..., LocalCluster]) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    cluster = make_cluster(workers=0)
    channel = grpc.insecure_channel(cluster.address)
    health = health_pb2_grpc.HealthStub(channel)
    resp = health.Check(health_pb2.HealthCheckRequest(service="ale.v1.SandboxService"), timeout=5)
    assert resp.status == health_pb2.HealthCheckResponse.SERVING
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    refl = reflection_pb2_grpc.ServerReflectionStub(channel)
    out = list(refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5))
    names = {s.name for s in out[0].list_services_response.service}
    assert {"ale.v1.SandboxService", "ale.v1.WorkerRegistryService"} <= names


def test_sigterm_is_graceful(make_cluster: Callable[..., LocalCluster]) -> None:
    cluster = make_cluster(workers=0)
    assert cluster.kill_admin(signal.SIGTERM) == 0
    assert "admin shutting down" in (cluster.dir / "admin.log").read_text()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_tls(make_cluster: Callable[..., LocalCluster], tmp_path: Path) -> None:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )
    cluster = make_cluster(workers=0, admin_config={"tls": {"cert_file": str(cert), "key_file": str(key)}})
    secure = Client(cluster.address, cluster.api_key(), timeout=10, tls_ca=cert)
    assert Sandbox.list(client=secure) == []
    with pytest.raises(Unavailable):
        Sandbox.list(client=Client(cluster.address, cluster.api_key(), timeout=5))


def test_admin_and_worker_log_one_json_format(make_cluster: Callable[..., LocalCluster]) -> None:
    """Both processes write one JSON object per line with the same keys (the worker used to write
    ``t``/``lvl`` lines by string formatting, which a quote in a message made invalid JSON)."""
    cluster = make_cluster(real=True)  # started: the worker has registered, both have logged
    keys = {"ts", "level", "logger", "msg"}
    for name in ("admin.log", "worker-w1.log"):
        lines = [ln for ln in (cluster.dir / name).read_text().splitlines() if ln.startswith("{")]
        assert lines, name
        for ln in lines:
            record = json.loads(ln)
            assert keys <= record.keys(), (name, ln)
        assert any(json.loads(ln)["logger"].startswith("ale_rock.") for ln in lines), name
