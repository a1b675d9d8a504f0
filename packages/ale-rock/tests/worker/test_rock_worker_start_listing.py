"""StartSandbox answers from the worker's own count, not a backend listing per create (a docker
listing is an engine round trip), and the capacity limit and idempotent retries stay exact."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest
from ale_proto.v1 import sandbox_pb2, worker_pb2
from ale_rock.backends.base import Limits, SandboxConfig, SandboxHandle
from ale_rock.worker.servicer import WorkerServicer


class CountingBackend:
    """Holds sandbox ids in memory and counts ``list`` calls."""

    name = "fake"

    def __init__(self, existing: tuple[str, ...] = ()) -> None:
        self.ids = set(existing)
        self.lists = 0

    def list(self) -> list[str]:
        self.lists += 1
        return sorted(self.ids)

    def start(self, sandbox_id: str, config: SandboxConfig) -> SandboxHandle:
        if sandbox_id in self.ids:
            raise FileExistsError(sandbox_id)
        self.ids.add(sandbox_id)
        return SandboxHandle(sandbox_id=sandbox_id, rocklet_socket=Path("/nonexistent"), host_dir=Path("/nonexistent"))

    def remove(self, sandbox_id: str) -> None:
        self.ids.discard(sandbox_id)

    def is_running(self, sandbox_id: str) -> bool:
        return sandbox_id in self.ids


class Gateway:
    def register(self, *_: Any) -> None: ...
    def forget(self, *_: Any) -> None: ...


class Aborted(Exception):
    pass


class Context:
    """Just enough of grpc.ServicerContext for ``abort``."""

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)

    def abort_with_status(self, status: Any) -> None:
        raise Aborted(status.code, status.details)

    def set_trailing_metadata(self, *_: Any) -> None: ...


def _start(servicer: WorkerServicer, sid: str) -> Any:
    return servicer.StartSandbox(worker_pb2.StartSandboxRequest(sandbox_id=sid), Context())  # type: ignore[arg-type]


def test_creates_do_not_list_and_the_limit_and_retries_stay_exact() -> None:
    backend = CountingBackend(existing=("old-1",))  # a survivor of a restart counts from the start
    servicer = WorkerServicer(backend, Gateway(), max_sandboxes=4, capacity=Limits())  # type: ignore[arg-type]
    for i in range(3):
        assert _start(servicer, f"s-{i}").state == sandbox_pb2.SANDBOX_STATE_RUNNING
    assert backend.lists == 1  # once, to learn what the backend held; never per create
    with pytest.raises(Aborted, match="maximum of 4"):
        _start(servicer, "s-3")  # old-1 + 3: full, confirmed by the backend's own listing
    # A sandbox that vanished outside the worker frees its place (the limit re-counts at the edge).
    backend.ids.discard("old-1")
    assert _start(servicer, "s-3").state == sandbox_pb2.SANDBOX_STATE_RUNNING
    servicer.remove("s-0")
    lists = backend.lists
    assert _start(servicer, "s-4").state == sandbox_pb2.SANDBOX_STATE_RUNNING and backend.lists == lists
    # A repeated id is answered with its status and starts nothing new.
    assert _start(servicer, "s-4").state == sandbox_pb2.SANDBOX_STATE_RUNNING
    assert sorted(backend.ids) == ["s-1", "s-2", "s-3", "s-4"]
