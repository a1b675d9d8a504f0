"""While a worker stops a sandbox its processes die: its status must read STOPPED, never FAILED
(the admin-restart race: a heartbeat or the crash reaper in that window made the Admin record a
client's stop as a failure)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from ale_proto.v1 import sandbox_pb2, worker_pb2
from ale_rock.worker.servicer import WorkerServicer

SID = "sb-0123456789ab"


class SlowStopBackend:
    """Only what StopSandbox and the status/reaper paths call; ``stop`` blocks until released."""

    name = "fake"

    def __init__(self) -> None:
        self.running = True
        self.in_stop, self.release = threading.Event(), threading.Event()

    def list(self) -> list[str]:
        return [SID]

    def is_running(self, sandbox_id: str) -> bool:
        return self.running

    def stop(self, sandbox_id: str, grace: float) -> None:
        self.running = False  # SIGTERM sent: the main process is gone before stop returns
        self.in_stop.set()
        assert self.release.wait(10)


def test_a_sandbox_being_stopped_reads_stopped_not_crashed() -> None:
    backend = SlowStopBackend()
    servicer = WorkerServicer(backend, None, max_sandboxes=1, capacity=None)  # type: ignore[arg-type]
    call = threading.Thread(target=servicer.StopSandbox,
                            args=(worker_pb2.WorkerServiceStopSandboxRequest(sandbox_id=SID, grace_period_ms=1), None))
    call.start()
    try:
        assert backend.in_stop.wait(10)
        assert servicer.status_of(SID)[0] == sandbox_pb2.SANDBOX_STATE_STOPPED
        assert servicer.reap_crashed() == []
    finally:
        backend.release.set()
        call.join(10)
    assert servicer.status_of(SID)[0] == sandbox_pb2.SANDBOX_STATE_STOPPED


def test_a_stop_that_fails_does_not_read_stopped() -> None:
    backend: Any = SlowStopBackend()

    def broken(sandbox_id: str, grace: float) -> None:
        raise RuntimeError("backend down")

    backend.stop = broken
    servicer = WorkerServicer(backend, None, max_sandboxes=1, capacity=None)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError):
        servicer.StopSandbox(worker_pb2.WorkerServiceStopSandboxRequest(sandbox_id=SID), None)  # type: ignore[arg-type]
    assert servicer.status_of(SID)[0] == sandbox_pb2.SANDBOX_STATE_RUNNING
