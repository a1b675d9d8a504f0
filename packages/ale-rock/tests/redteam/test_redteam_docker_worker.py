"""Red team, the worker's port and a worker's restart on the Docker backend (issue 11 findings 3
and 10), on real admin + worker processes whose worker runs ``backend: docker``.

Attacks: egress rules to the worker's port (loopback, the host's own addresses), to the admin's
port; from inside a docker sandbox whose policy admits everything admission accepts (``*``),
connect to the worker's port through the host's addresses; call the worker with only
``ale-sandbox-id`` metadata; kill -9 the worker process and bring it back (its healthy containers
must come back RUNNING with their data, not be reaped). Each test passes because the attack fails.

The worker listens on every address (``0.0.0.0``) so that the host's non-loopback addresses really
lead to it: a refusal is the gateway's doing, not a missing listener.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from ale_proto.v1 import rocklet_pb2, rocklet_pb2_grpc, sandbox_pb2, worker_pb2, worker_pb2_grpc
from ale_rock.backends.docker_engine import engine_problem
from ale_rock.local_cluster import LocalCluster, real_worker_argv
from ale_rock.sdk import Sandbox
from ale_rock.sdk.errors import InvalidArgument
from ale_rock.worker.auth import WORKER_SECRET_METADATA, worker_channel

from . import _cluster_fixtures as fx
from . import _egress_fixtures as egress_fx

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[4]


def _engine_problem() -> str:
    return engine_problem() or egress_fx.problem()


_PROBLEM = _engine_problem()
if _PROBLEM:
    pytestmark = [pytest.mark.docker, pytest.mark.skip(reason=_PROBLEM)]

# From inside the sandbox: CONNECT host:port through the Rocklet's egress proxy, print the status
# line; with a third argument, then GET / through the tunnel and print the body (positive control).
CONNECT = (
    "import os, socket, sys\n"
    "port = os.environ['HTTP_PROXY'].rsplit(':', 1)[1]\n"
    "s = socket.create_connection(('127.0.0.1', int(port)), timeout=20)\n"
    "s.sendall(('CONNECT %s:%s HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n' % (sys.argv[1], sys.argv[2])).encode())\n"
    "head = b''\n"
    "while b'\\r\\n\\r\\n' not in head and (c := s.recv(1)): head += c\n"
    "print(head.split(b'\\r\\n')[0].decode(errors='replace'))\n"
    "if len(sys.argv) > 3 and b' 200 ' in head:\n"
    "    s.sendall(b'GET / HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n')\n"
    "    data = b''\n"
    "    while chunk := s.recv(65536): data += chunk\n"
    "    print(data.decode(errors='replace'))\n"
)
# And straight out of the container, around the proxy (a docker sandbox has no network).
DIRECT = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3); print('connected')\n"
    "except OSError as e: print('refused', e)\n"
)


def _host_addresses() -> list[str]:
    """This host's non-loopback addresses, read independently of ALE's admission code."""
    out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=10).stdout.split()
    return [a for a in out if not a.startswith("10.213.")]  # not the egress fixture's veth


@pytest.fixture(scope="module")
def far() -> Iterator[tuple[str, int]]:
    """A server on "another machine" (a network namespace): what egress may reach."""
    with egress_fx.remote_http_server() as address:
        yield address


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    subprocess.run(["bash", str(REPO / "scripts" / "build_base_image.sh")], check=True, timeout=900,
                   capture_output=True)
    # A worker id of its own: docker containers are labelled with it, and other tests share the engine.
    argv = real_worker_argv({"backend": "docker", "pool_size": 0, "retry_interval_s": 0.2,
                             "address": "0.0.0.0:0", "cpu_millis": 16000})  # room on a 2-core CI box
    c = LocalCluster(workers=0, worker_argv=argv, admin_config=dict(fx.FAST_ADMIN),
                     workdir=tmp_path_factory.mktemp("redteam-docker-worker"))
    c.docker_worker = f"rdw{uuid.uuid4().hex[:8]}"  # type: ignore[attr-defined]
    try:
        c.start()
        c.start_worker(c.docker_worker)  # type: ignore[attr-defined]
        yield c
    finally:
        c.stop()
        leftover = _containers(c.docker_worker)  # type: ignore[attr-defined]
        if leftover:
            subprocess.run(["docker", "rm", "-f", *leftover], capture_output=True, timeout=120)
        assert leftover == [], "the worker left containers behind"


def _wid(cluster: LocalCluster) -> str:
    return str(cluster.docker_worker)  # type: ignore[attr-defined]


def _containers(worker: str) -> list[str]:
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=ale.worker={worker}"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


@pytest.fixture(scope="module")
def victim(cluster: LocalCluster) -> Iterator[Sandbox]:
    with Sandbox.create(client=cluster.client(), ttl=600) as sb:
        sb.write("/workspace/secret.txt", "victim's secret")
        yield sb


def test_egress_rules_to_the_worker_the_host_and_the_admin_are_refused(cluster: LocalCluster,
                                                                        victim: Sandbox) -> None:
    port = int(fx.worker_of(cluster, _wid(cluster))["address"].rpartition(":")[2])
    hosts = _host_addresses()
    assert hosts, "this host has no non-loopback address to attack through"
    rules = [("127.0.0.1", port), ("localhost", port), *((h, port) for h in hosts),
             ("127.0.0.1", cluster.admin_port), *((h, cluster.admin_port) for h in hosts)]
    for rule in rules:
        with pytest.raises(InvalidArgument) as e:
            Sandbox.create(client=cluster.client(), allow=[rule], ttl=60)
        assert e.value.field == "spec.network.allow[0]", e.value
        assert "loopback" in e.value.message or "address of this host" in e.value.message, e.value
        with pytest.raises(InvalidArgument):
            victim.set_network_policy([rule])
    assert victim.network_policy() == []  # nothing was let through


def test_worker_unreachable_from_inside_a_docker_sandbox_with_the_widest_rule(cluster: LocalCluster,
                                                                              far: tuple[str, int]) -> None:
    port = int(fx.worker_of(cluster, _wid(cluster))["address"].rpartition(":")[2])
    targets = ["127.0.0.1", socket.gethostname(), *_host_addresses()]
    for host in targets[2:]:  # the worker really listens there: only the gateway can stop this
        socket.create_connection((host, port), timeout=5).close()
    far_ip, far_port = far
    with Sandbox.create(client=cluster.client(), allow=["*", f"{far_ip}:{far_port}"], ttl=120) as sb:
        sb.write("/tmp/connect.py", CONNECT)
        sb.write("/tmp/direct.py", DIRECT)
        # Positive control: the proxy and the gateway work, so the refusals below are real.
        ok = sb.exec(f"python3 /tmp/connect.py {far_ip} {far_port} get", timeout=60)
        assert ok.stdout.startswith("HTTP/1.1 200") and "hello from afar" in ok.stdout, ok
        for host in targets:
            r = sb.exec(f"python3 /tmp/connect.py {host} {port}", timeout=60)
            assert r.stdout.strip() and " 200 " not in r.stdout.splitlines()[0], (host, r.stdout, r.stderr)
            # No route around the proxy: the container's network namespace has no way out.
            d = sb.exec(f"python3 /tmp/direct.py {host} {port}", timeout=30)
            assert d.stdout.startswith("refused"), (host, d.stdout, d.stderr)
        # Each attempt was the gateway's refusal (the wildcard admits public addresses only; an
        # explicit rule to the host is refused at admission; both again at connect time).
        events = sb.stats().recent_safety_events
        for host in targets:
            assert any(e.get("kind") == "egress_blocked" and f"{host} {port}" in str(e.get("command"))
                       for e in events), (host, events)


def _attack(ch: grpc.Channel, md: list[tuple[str, str]], victim_id: str) -> None:
    """Exec, stream, read a file in the victim (only ale-sandbox-id), list and remove, with ``md``."""
    ws, rs = worker_pb2_grpc.WorkerServiceStub(ch), rocklet_pb2_grpc.RockletServiceStub(ch)
    spec = sandbox_pb2.ExecSpec(command="cat /workspace/secret.txt")
    sid = [("ale-sandbox-id", victim_id), *md]
    read = rocklet_pb2.RockletServiceReadFileRequest(path="/workspace/secret.txt")
    fx.unauthenticated(lambda: rs.Exec(rocklet_pb2.RockletServiceExecRequest(spec=spec), metadata=sid, timeout=10))
    fx.unauthenticated(lambda: rs.ExecStream(rocklet_pb2.RockletServiceExecStreamRequest(spec=spec), metadata=sid,
                                           timeout=10))
    fx.unauthenticated(lambda: rs.ReadFile(read, metadata=sid, timeout=10))
    fx.unauthenticated(lambda: ws.ListWorkerSandboxes(worker_pb2.ListWorkerSandboxesRequest(), metadata=md, timeout=10))
    fx.unauthenticated(lambda: ws.RemoveSandbox(worker_pb2.RemoveSandboxRequest(sandbox_id=victim_id), metadata=md,
                                              timeout=10))


def test_worker_rpcs_without_the_credential_are_unauthenticated_on_docker(cluster: LocalCluster,
                                                                          victim: Sandbox) -> None:
    worker = fx.worker_of(cluster, _wid(cluster))
    host = "127.0.0.1:" + worker["address"].rpartition(":")[2]
    for md in ([], [(WORKER_SECRET_METADATA, "wrong-" + worker["secret"][6:])]):
        with grpc.insecure_channel(host) as ch:
            _attack(ch, md, victim.id)
    # With the admin's credential the same exec works: the refusals were the credential's doing.
    spec = sandbox_pb2.ExecSpec(command="cat /workspace/secret.txt")
    with worker_channel(host, worker["secret"]) as ch:
        res = rocklet_pb2_grpc.RockletServiceStub(ch).Exec(
            rocklet_pb2.RockletServiceExecRequest(spec=spec), metadata=[("ale-sandbox-id", victim.id)], timeout=30)
    assert res.result.stdout == b"victim's secret"
    assert victim.refresh().state == "running"


def test_kill_9_of_a_docker_worker_and_restart_within_the_grace_keeps_its_sandboxes(
        cluster: LocalCluster, victim: Sandbox, far: tuple[str, int]) -> None:
    victim.write("/workspace/work.txt", "hours of work")
    # A sandbox with an egress rule: the restarted worker must give it its policy back.
    far_ip, far_port = far
    with Sandbox.create(client=cluster.client(), allow=[f"{far_ip}:{far_port}"], ttl=120) as out:
        out.write("/tmp/connect.py", CONNECT)
        assert "hello from afar" in out.exec(f"python3 /tmp/connect.py {far_ip} {far_port} get", timeout=60).stdout
        _kill_and_restart(cluster, victim)
        # The admin sends the policy again right after the worker re-registers (deny-all until then).
        fx.wait_until(lambda: "hello from afar" in out.exec(f"python3 /tmp/connect.py {far_ip} {far_port} get",
                                                            timeout=60).stdout, what="the policy restored")
        assert out.network_policy() == [(far_ip, far_port)]


def _kill_and_restart(cluster: LocalCluster, victim: Sandbox) -> None:
    wid = _wid(cluster)
    before = set(_containers(wid))
    assert before
    cluster.kill_worker(wid, signal.SIGKILL)
    # Down long enough for the admin to lose it (the real scenario: down > worker_lost_after_s).
    fx.wait_until(lambda: not _alive(cluster, wid), timeout=10, what="the admin to lose the worker")
    assert victim.refresh().state == "running"  # within the grace (60 s here): not LOST
    assert set(_containers(wid)) == before  # the engine keeps the containers of a dead worker
    cluster.start_worker(wid)  # same worker id and state dir; waits until it is alive again
    assert victim.refresh().state == "running", victim.info.message
    assert victim.read("/workspace/work.txt") == b"hours of work"
    assert victim.read("/workspace/secret.txt") == b"victim's secret"
    r = victim.exec("echo alive; id -u")
    assert (r.stdout, r.exit_code) == ("alive\n1000\n", 0)
    # Several heartbeats later (0.2 s each) nothing was reconciled away.
    fx.wait_until(lambda: victim.exec("true").exit_code == 0, what="exec after heartbeats")
    assert set(_containers(wid)) == before
    worker = fx.worker_of(cluster, wid)
    with worker_channel("127.0.0.1:" + worker["address"].rpartition(":")[2], worker["secret"]) as ch:
        listed = worker_pb2_grpc.WorkerServiceStub(ch).ListWorkerSandboxes(
            worker_pb2.ListWorkerSandboxesRequest(), timeout=10)
    assert victim.id in {s.sandbox_id for s in listed.sandboxes}
    # A sandbox created after the restart works too (the worker is fully back).
    with Sandbox.create(client=cluster.client(), ttl=60) as sb:
        assert sb.exec("echo new").stdout == "new\n"


def _alive(cluster: LocalCluster, worker_id: str) -> bool:
    import sqlite3

    with sqlite3.connect(str(cluster.dir / "admin.db"), timeout=5) as db:
        row = db.execute("SELECT alive FROM workers WHERE id = ?", (worker_id,)).fetchone()
    return bool(row and row[0])
