"""While a worker stops a sandbox its processes die: its status must read STOPPED, never FAILED
(the admin-restart race: a heartbeat or the crash reaper in that window made the Admin record a
client's stop as a failure). While it starts one, the container is listed before its main process
runs: that reads PENDING, and neither the crash reaper nor a re-registration may remove it (on a
loaded Docker engine the reaper stopped containers half-way through ``docker start``). While it
removes one, its processes die on purpose: no status is reported and nothing is reaped (a
client's delete read FAILED first, then DELETED)."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest
from ale_proto.v1 import sandbox_pb2, worker_pb2
from ale_rock.backends.base import Limits
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


class SlowStartBackend:
    """A backend whose ``start`` lists the sandbox at once but runs it only when released."""

    name = "fake"

    def __init__(self) -> None:
        self.listed: list[str] = []
        self.running = False
        self.stopped: list[str] = []
        self.in_start, self.release = threading.Event(), threading.Event()

    def list(self) -> list[str]:
        return list(self.listed)

    def is_running(self, sandbox_id: str) -> bool:
        return self.running

    def start(self, sandbox_id: str, config: Any) -> Any:
        self.listed.append(sandbox_id)  # the container exists, its process is not up yet
        self.in_start.set()
        assert self.release.wait(10)
        self.running = True
        return SimpleNamespace(rocklet_socket="/nonexistent", extra={})

    def stop(self, sandbox_id: str, grace: float) -> None:
        self.stopped.append(sandbox_id)
        self.running = False


class _Gateway:
    def register(self, *args: Any) -> None:
        pass


def test_a_sandbox_being_started_reads_pending_and_is_not_reaped() -> None:
    backend = SlowStartBackend()
    servicer = WorkerServicer(backend, _Gateway(), max_sandboxes=4, capacity=Limits())  # type: ignore[arg-type]
    replies: list[Any] = []
    request = worker_pb2.StartSandboxRequest(sandbox_id=SID, namespace="default")
    call = threading.Thread(target=lambda: replies.append(servicer.StartSandbox(request, None)))  # type: ignore[arg-type]
    call.start()
    try:
        assert backend.in_start.wait(10)
        assert servicer.starting() == {SID}
        assert servicer.status_of(SID)[0] == sandbox_pb2.SANDBOX_STATE_PENDING
        assert [s.state for s in servicer.statuses()] == [sandbox_pb2.SANDBOX_STATE_PENDING]
        assert servicer.reap_crashed() == [] and backend.stopped == []
    finally:
        backend.release.set()
        call.join(10)
    assert replies[0].state == sandbox_pb2.SANDBOX_STATE_RUNNING
    assert servicer.starting() == set()
    assert servicer.status_of(SID)[0] == sandbox_pb2.SANDBOX_STATE_RUNNING
    # Once started, a process that dies is a crash again.
    backend.running = False
    assert servicer.reap_crashed() == [SID] and backend.stopped == [SID]


def test_a_start_that_is_refused_is_no_longer_starting() -> None:
    backend = SlowStartBackend()

    def refuse(sandbox_id: str, config: Any) -> Any:
        raise ValueError("image: unknown image 'nope'")

    backend.start = refuse  # type: ignore[method-assign]
    servicer = WorkerServicer(backend, _Gateway(), max_sandboxes=4, capacity=Limits())  # type: ignore[arg-type]
    with pytest.raises(Exception):  # noqa: B017,PT011 - a grpc abort without a context
        servicer.StartSandbox(worker_pb2.StartSandboxRequest(sandbox_id=SID), None)  # type: ignore[arg-type]
    assert servicer.starting() == set()


class SlowRemoveBackend(SlowStopBackend):
    """``remove`` kills the processes at once and blocks until released."""

    def __init__(self) -> None:
        super().__init__()
        self.gone = False
        self.in_remove = threading.Event()
        self.stops: list[str] = []

    def list(self) -> list[str]:
        return [] if self.gone else [SID]

    def stop(self, sandbox_id: str, grace: float) -> None:
        self.stops.append(sandbox_id)

    def remove(self, sandbox_id: str) -> None:
        self.running = False
        self.in_remove.set()
        assert self.release.wait(10)
        self.gone = True


class _ForgetfulGateway:
    def forget(self, sandbox_id: str) -> None:
        pass


def test_a_sandbox_being_removed_is_neither_reported_nor_reaped() -> None:
    backend = SlowRemoveBackend()
    servicer = WorkerServicer(backend, _ForgetfulGateway(), max_sandboxes=1, capacity=None)  # type: ignore[arg-type]
    call = threading.Thread(target=servicer.remove, args=(SID,))
    call.start()
    try:
        assert backend.in_remove.wait(10)
        assert servicer.statuses() == []
        assert servicer.reap_crashed() == [] and backend.stops == []
    finally:
        backend.release.set()
        call.join(10)
    assert servicer.statuses() == [] and servicer.table.removing == set()


class ListingBackend:
    """Says who runs in one listing (``running_states``) and counts the per-sandbox questions."""

    name = "fake"

    def __init__(self, listed: dict[str, bool], fresh: dict[str, bool]) -> None:
        self.listed, self.fresh = listed, fresh
        self.asked: list[str] = []
        self.stopped: list[str] = []

    def running_states(self) -> dict[str, bool]:
        return dict(self.listed)

    def list(self) -> list[str]:
        return sorted(self.listed)

    def is_running(self, sandbox_id: str) -> bool:
        self.asked.append(sandbox_id)
        return self.fresh[sandbox_id]

    def stop(self, sandbox_id: str, grace: float) -> None:
        self.stopped.append(sandbox_id)


def test_statuses_come_from_one_listing_and_a_not_running_is_asked_again() -> None:
    # "a" and "b" run; "c" did not run when listed but does now (a start that ended meanwhile);
    # "d" really died.
    backend = ListingBackend({"a": True, "b": True, "c": False, "d": False},
                             {"a": True, "b": True, "c": True, "d": False})
    servicer = WorkerServicer(backend, None, max_sandboxes=8, capacity=None)  # type: ignore[arg-type]
    states = {s.sandbox_id: s.state for s in servicer.statuses()}
    assert states == {"a": sandbox_pb2.SANDBOX_STATE_RUNNING, "b": sandbox_pb2.SANDBOX_STATE_RUNNING,
                      "c": sandbox_pb2.SANDBOX_STATE_RUNNING, "d": sandbox_pb2.SANDBOX_STATE_FAILED}
    assert sorted(backend.asked) == ["c", "d"]  # no question per running sandbox
    backend.asked.clear()
    assert servicer.reap_crashed() == ["d"] and backend.stopped == ["d"]
    assert sorted(backend.asked) == ["c", "d"]
