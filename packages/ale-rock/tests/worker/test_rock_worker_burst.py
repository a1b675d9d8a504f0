"""The worker's server serves a burst of thousands of calls (gRPC's default pending-call limits CANCEL them)."""

from __future__ import annotations

import asyncio

import grpc
from ale_proto.v1 import worker_pb2
from ale_rock.worker.auth import WORKER_SECRET_METADATA
from ale_rock.worker.server import WorkerHandle


def test_a_burst_of_thousands_of_calls_is_served_not_cancelled(worker: WorkerHandle) -> None:
    """The Admin forwards every create, stop and exec of the sandboxes placed on a worker: thousands
    in flight on one worker must wait their turn, not come back CANCELLED."""
    from ale_proto.v1 import worker_pb2_grpc

    async def main() -> dict[str, int]:
        channel = grpc.aio.insecure_channel(worker.address)
        stub = worker_pb2_grpc.WorkerServiceStub(channel)
        codes: dict[str, int] = {}
        md = ((WORKER_SECRET_METADATA, worker.secret),)

        async def call() -> None:
            try:
                await stub.ListWorkerSandboxes(worker_pb2.ListWorkerSandboxesRequest(), timeout=120, metadata=md)
                code = "OK"
            except grpc.aio.AioRpcError as e:
                code = e.code().name
            codes[code] = codes.get(code, 0) + 1

        try:
            await asyncio.gather(*(call() for _ in range(4000)))
        finally:
            await channel.close()
        return codes

    assert asyncio.run(main()) == {"OK": 4000}
