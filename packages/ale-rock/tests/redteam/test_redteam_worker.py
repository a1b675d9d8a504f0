"""Red team, the worker's port (issue 11 findings 3 and 4), on real admin + worker processes.

Attacks: call WorkerService / the RockletService proxy with no credential or a wrong one (from the
host, and from inside a sandbox through every egress rule admission accepts); point the worker at
a Rocklet socket the sandbox controls. Each test performs the attack and passes because it fails.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from ale_proto.v1 import rocklet_pb2, rocklet_pb2_grpc, sandbox_pb2, worker_pb2, worker_pb2_grpc
from ale_rock.local_cluster import LocalCluster
from ale_rock.sdk import Sandbox
from ale_rock.sdk.errors import InvalidArgument, SandboxError
from ale_rock.worker.auth import WORKER_SECRET_METADATA, worker_channel

from . import _cluster_fixtures as fx

VIA_PROXY = "curl -s -m 5 --proxy http://127.0.0.1:3128 --noproxy ''"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    fx.need_local_backend()
    c = fx.start_cluster(tmp_path_factory.mktemp("redteam-worker"))
    yield c
    c.stop()


@pytest.fixture(scope="module")
def victim(cluster: LocalCluster) -> Iterator[Sandbox]:
    with Sandbox.create(client=cluster.client(), ttl=600) as sb:
        sb.write("/workspace/secret.txt", "victim's secret")
        yield sb


def _attack(ws: Any, rs: Any, md: list[tuple[str, str]], victim_id: str) -> None:
    """List, exec in the victim (only ale-sandbox-id), create and remove, with credential ``md``."""
    spec = sandbox_pb2.ExecSpec(command="cat /workspace/secret.txt")
    sid = [("ale-sandbox-id", victim_id), *md]
    start = worker_pb2.StartSandboxRequest(sandbox_id="evil-1", spec=sandbox_pb2.SandboxSpec())
    fx.unauthenticated(lambda: ws.ListWorkerSandboxes(worker_pb2.ListWorkerSandboxesRequest(), metadata=md, timeout=10))
    fx.unauthenticated(lambda: rs.Exec(rocklet_pb2.RockletServiceExecRequest(spec=spec), metadata=sid, timeout=10))
    fx.unauthenticated(lambda: rs.ExecStream(rocklet_pb2.RockletServiceExecStreamRequest(spec=spec), metadata=sid,
                                           timeout=10))
    fx.unauthenticated(lambda: ws.StartSandbox(start, metadata=md, timeout=10))
    fx.unauthenticated(lambda: ws.RemoveSandbox(worker_pb2.RemoveSandboxRequest(sandbox_id=victim_id), metadata=md,
                                              timeout=10))


def test_worker_rpcs_without_the_worker_credential_are_unauthenticated(cluster: LocalCluster, victim: Sandbox) -> None:
    worker = fx.worker_of(cluster)
    for md in ([], [(WORKER_SECRET_METADATA, "wrong-" + worker["secret"][6:])], [(WORKER_SECRET_METADATA, "")]):
        with grpc.insecure_channel(worker["address"]) as ch:
            _attack(worker_pb2_grpc.WorkerServiceStub(ch), rocklet_pb2_grpc.RockletServiceStub(ch), md, victim.id)
    # The same calls with the admin's credential work: the refusals above are the credential's doing.
    with worker_channel(worker["address"], worker["secret"]) as ch:
        listed = worker_pb2_grpc.WorkerServiceStub(ch).ListWorkerSandboxes(worker_pb2.ListWorkerSandboxesRequest(), timeout=10)
    assert [s.sandbox_id for s in listed.sandboxes] == [victim.id]  # nothing named evil-1 was started
    assert victim.exec("cat /workspace/secret.txt").stdout == "victim's secret"  # and the victim lives


def test_egress_rules_to_the_worker_port_are_refused(cluster: LocalCluster, victim: Sandbox) -> None:
    port = int(fx.worker_of(cluster)["address"].rpartition(":")[2])
    for rule in (("127.0.0.1", port), ("localhost", port), ("::1", port), ("127.0.0.2", 0), ("LocalHost.", port)):
        with pytest.raises(InvalidArgument) as e:
            Sandbox.create(client=cluster.client(), allow=[rule], ttl=60)
        assert e.value.field == "spec.network.allow[0]" and "loopback" in e.value.message, e.value
        with pytest.raises(InvalidArgument, match="loopback"):
            victim.set_network_policy([rule])


def test_worker_unreachable_from_inside_a_sandbox_with_any_admitted_rule(cluster: LocalCluster) -> None:
    worker = fx.worker_of(cluster)
    port = int(worker["address"].rpartition(":")[2])
    # Rules admission accepts but that lead to the host: the wildcard (public addresses only) and a
    # name the admin cannot judge without DNS (this host's own name resolves to one of its addresses).
    allow = ["*", f"{socket.gethostname()}:{port}"]
    with Sandbox.create(client=cluster.client(), allow=allow, ttl=120) as sb:
        for host in ("127.0.0.1", socket.gethostname(), "localhost"):
            r = sb.exec(f"{VIA_PROXY} -o /dev/null -w '%{{http_code}}' -p http://{host}:{port}/ ; echo \" rc=$?\"")
            assert not r.stdout.startswith("200"), (host, r.stdout)
        # No route around the proxy either: the sandbox's network namespace holds loopback only.
        r = sb.exec(f"curl -s -m 3 --noproxy '*' http://127.0.0.1:{port}/; echo rc=$?")
        assert "rc=7" in r.stdout, r.stdout
        events = sb.stats().recent_safety_events
        details = " ".join(str(e.get("detail", "")) for e in events)
        assert len(events) == 3 and ("is loopback" in details or "address of this host" in details), events


def test_a_redirected_rocklet_socket_is_refused(cluster: LocalCluster, victim: Sandbox) -> None:
    """Simulate a sandbox that could write its /run/ale (the backends seal it): swap its socket for
    a symlink to the victim's, or leave its directory writable. The worker refuses both and fails it."""
    victim_socket = fx.slot_of(cluster, victim.id) / "run" / "rocklet.sock"
    for attack in ("symlink", "writable"):
        with Sandbox.create(client=cluster.client(), ttl=120) as evil:
            assert evil.exec("echo ok").stdout == "ok\n"
            run = fx.slot_of(cluster, evil.id) / "run"
            if attack == "symlink":
                (run / "rocklet.sock").unlink()
                os.symlink(victim_socket, run / "rocklet.sock")
            else:
                run.chmod(0o777)
            with pytest.raises(SandboxError) as e:
                evil.exec("cat /workspace/secret.txt")
            assert "victim" not in str(e.value)
            fx.wait_until(lambda: evil.refresh().state == "failed", what=f"{attack}: sandbox marked failed")
            assert "not trustworthy" in evil.info.message
    assert victim.exec("cat /workspace/secret.txt").stdout == "victim's secret"
