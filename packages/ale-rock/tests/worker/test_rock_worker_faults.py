"""Worker faults: admin down then up, keep-list reaping, kill -9 and restart, graceful SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from ale_proto.serving import free_port
from ale_proto.v1 import rocklet_pb2, rocklet_pb2_grpc, sandbox_pb2, worker_pb2, worker_pb2_grpc
from ale_rock.worker.auth import worker_channel
from ale_rock.worker.config import WorkerConfig
from ale_rock.worker.server import serve_worker

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (tmpfs mounts, cgroups)")


class FakeRegistry(worker_pb2_grpc.WorkerRegistryServiceServicer):
    """A stand-in admin that records what workers tell it."""

    def __init__(self, keep: list[str]) -> None:
        self.keep = keep
        self.registrations: list[tuple[worker_pb2.RegisterWorkerRequest, str]] = []
        self.heartbeats: list[worker_pb2.HeartbeatRequest] = []

    def RegisterWorker(self, request, context):  # noqa: N802
        self.registrations.append((request, dict(context.invocation_metadata()).get("authorization", "")))
        return worker_pb2.RegisterWorkerResponse(heartbeat_interval_ms=100, keep_sandbox_ids=self.keep)

    def Heartbeat(self, request, context):  # noqa: N802
        self.heartbeats.append(request)
        return worker_pb2.HeartbeatResponse(heartbeat_interval_ms=100, known=True)


def _wait(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_registers_once_the_admin_is_up_and_reaps_what_it_does_not_keep(tmp_path: Path, leaks_of) -> None:
    port = free_port()
    handle = serve_worker(
        WorkerConfig(
            state_dir=tmp_path,
            pool_size=0,
            admin_address=f"127.0.0.1:{port}",
            join_token="s3cret",
            worker_id="w-reg",
            retry_interval_s=0.2,
        )
    )
    try:
        ws = worker_pb2_grpc.WorkerServiceStub(worker_channel(handle.address, handle.secret))
        # The admin is down: the worker keeps serving.
        for sid in ("keep-me", "drop-me"):
            assert (
                ws.StartSandbox(
                    worker_pb2.StartSandboxRequest(sandbox_id=sid, spec=sandbox_pb2.SandboxSpec())
                ).state
                == sandbox_pb2.SANDBOX_STATE_RUNNING
            )
        registry = FakeRegistry(keep=["keep-me"])
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        worker_pb2_grpc.add_WorkerRegistryServiceServicer_to_server(registry, server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        server.start()
        try:
            _wait(lambda: len(registry.heartbeats) >= 2)
            request, auth = registry.registrations[0]
            assert auth == "Bearer s3cret"
            assert request.worker.worker_id == "w-reg" and request.worker.address == handle.address
            assert request.worker.capacity.cpu_millis > 0 and request.worker.max_sandboxes > 0
            assert sorted(request.running_sandbox_ids) == ["drop-me", "keep-me"]
            _wait(lambda: [s.sandbox_id for s in registry.heartbeats[-1].sandboxes] == ["keep-me"])
            assert registry.heartbeats[-1].sandboxes[0].state == sandbox_pb2.SANDBOX_STATE_RUNNING
            # One default sandbox (1000 millicores) is reserved out of the capacity.
            assert registry.heartbeats[-1].free.cpu_millis == request.worker.capacity.cpu_millis - 1000
        finally:
            server.stop(0)
    finally:
        handle.stop(grace_s=1)
    assert leaks_of(tmp_path) == []


def _start_worker_process(state: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ale_rock.worker",
            "-c",
            f"state_dir={state}",
            "-c",
            "pool_size=0",
            "-c",
            "address=127.0.0.1:0",
            "-c",
            f"secret_file={state / 'worker.secret'}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"listening on (\S+)", line)
    assert match, line
    return proc, match.group(1)


def _start_sandbox_with_child(address: str, sid: str, state: Path) -> None:
    channel = worker_channel(address, (Path(state) / "worker.secret").read_text())
    ws, rs = worker_pb2_grpc.WorkerServiceStub(channel), rocklet_pb2_grpc.RockletServiceStub(channel)
    assert (
        ws.StartSandbox(
            worker_pb2.StartSandboxRequest(sandbox_id=sid, spec=sandbox_pb2.SandboxSpec()), timeout=60
        ).state
        == sandbox_pb2.SANDBOX_STATE_RUNNING
    )
    spec = sandbox_pb2.ExecSpec(command="sleep 600", background=True)
    rs.Exec(rocklet_pb2.RockletServiceExecRequest(spec=spec), metadata=[("ale-sandbox-id", sid)], timeout=30)
    channel.close()


def test_kill_9_then_restart_reaps_orphans(tmp_path: Path, leaks_of) -> None:
    proc, address = _start_worker_process(tmp_path)
    try:
        _start_sandbox_with_child(address, "victim-1", tmp_path)
        assert leaks_of(tmp_path)  # a live sandbox: processes, a mount, a dir
        proc.kill()
        proc.wait(timeout=10)
        # The sandboxes' processes die with the worker (--die-with-parent) ...
        _wait(lambda: not any(x.startswith("process") for x in leaks_of(tmp_path)), timeout=15)
        # ... but the mount and the dir stay until a worker on the same state dir starts again.
        assert leaks_of(tmp_path)
        proc, address = _start_worker_process(tmp_path)
        assert leaks_of(tmp_path, ignore=frozenset({proc.pid})) == []
        ws = worker_pb2_grpc.WorkerServiceStub(worker_channel(address, (tmp_path / "worker.secret").read_text()))
        assert ws.ListWorkerSandboxes(worker_pb2.ListWorkerSandboxesRequest()).sandboxes == []
    finally:
        proc.kill()
        proc.wait(timeout=10)
    subprocess.run(
        [
            sys.executable,
            "-c",
            f"from ale_rock.backends.local import reap_state_dir; reap_state_dir({str(tmp_path)!r})",
        ],
        check=True,
    )
    assert leaks_of(tmp_path) == []


def test_sigterm_shuts_down_gracefully(tmp_path: Path, leaks_of) -> None:
    proc, address = _start_worker_process(tmp_path)
    try:
        _start_sandbox_with_child(address, "graceful-1", tmp_path)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert leaks_of(tmp_path) == []
