"""The Admin's worker client against a real WorkerService on a real port: a call whose channel is
closed under it ends as an UNAVAILABLE WorkerCallError (grpc.aio raises CancelledError there, which
used to escape and leave a create PENDING), while a cancellation of the caller still cancels."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from ale_proto.v1 import sandbox_pb2, worker_pb2, worker_pb2_grpc
from ale_rock.admin.worker_client import GrpcWorkerClient
from ale_rock.admin.workers import WorkerCallError


class _SlowWorker(worker_pb2_grpc.WorkerServiceServicer):
    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def StartSandbox(self, request: Any, context: Any) -> Any:  # noqa: N802
        self.entered.set()
        self.release.wait(10)
        return worker_pb2.StartSandboxResponse(state=sandbox_pb2.SANDBOX_STATE_RUNNING)


@pytest.fixture
def slow_worker() -> Iterator[tuple[str, _SlowWorker]]:
    servicer = _SlowWorker()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    worker_pb2_grpc.add_WorkerServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}", servicer
    finally:
        servicer.release.set()
        server.stop(0)


async def _entered(servicer: _SlowWorker) -> None:
    assert await asyncio.to_thread(servicer.entered.wait, 10)


def test_a_call_whose_channel_is_closed_is_unavailable(slow_worker: tuple[str, _SlowWorker]) -> None:
    address, servicer = slow_worker

    async def run() -> None:
        client = GrpcWorkerClient(address)
        call = asyncio.create_task(client.start("sb-000000000001", "default", {}, timeout=20))
        await _entered(servicer)
        await client.close()
        with pytest.raises(WorkerCallError) as e:
            await asyncio.wait_for(call, 10)
        assert e.value.unavailable and "closed" in str(e.value)

    asyncio.run(run())


def test_cancelling_the_caller_still_cancels_the_call(slow_worker: tuple[str, _SlowWorker]) -> None:
    address, servicer = slow_worker

    async def run() -> None:
        client = GrpcWorkerClient(address)
        call = asyncio.create_task(client.start("sb-000000000002", "default", {}, timeout=20))
        await _entered(servicer)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await client.close()

    asyncio.run(run())
