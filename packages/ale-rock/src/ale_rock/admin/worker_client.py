"""WorkerService over gRPC: the Admin's :class:`~ale_rock.admin.workers.WorkerClient`."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
from ale_proto.errors import error_detail_of
from ale_proto.v1 import rocklet_pb2_grpc, worker_pb2, worker_pb2_grpc

from ale_rock.admin.convert import spec_from_dict, state_from_pb
from ale_rock.admin.rpc import cancelled_by_its_channel
from ale_rock.admin.state import State
from ale_rock.admin.workers import CommitInfo, WorkerCallError
from ale_rock.grpc_options import channel_options
from ale_rock.worker.auth import WORKER_SECRET_METADATA

CHANNEL_OPTIONS = channel_options(16 * 2**20)


def _wrap(e: grpc.aio.AioRpcError) -> WorkerCallError:
    detail = error_detail_of(e)
    unavailable = e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    return WorkerCallError(detail.message or str(e.code()), unavailable=unavailable, code=e.code().name)


class GrpcWorkerClient:
    """Talks to one worker's WorkerService; also hands out its RockletService proxy stub."""

    def __init__(self, address: str, secret: str = "") -> None:
        self.address = address
        self.metadata: tuple[tuple[str, str], ...] = ((WORKER_SECRET_METADATA, secret),)
        """The worker credential: sent on every call (the worker refuses calls without it)."""
        self.channel = grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
        self._stub = worker_pb2_grpc.WorkerServiceStub(self.channel)
        self.worker = self._stub
        self.rocklet = rocklet_pb2_grpc.RockletServiceStub(self.channel)

    async def _call(self, method: Any, request: Any, timeout: float) -> Any:
        try:
            return await method(request, timeout=timeout, metadata=self.metadata)
        except grpc.aio.AioRpcError as e:
            raise _wrap(e) from e
        except asyncio.CancelledError:
            if not cancelled_by_its_channel():
                raise
            # The client was closed under the call (the worker re-registered elsewhere, or its
            # grace ended): the worker is unreachable, as far as this call knows.
            raise WorkerCallError(f"the connection to worker {self.address} was closed", unavailable=True,
                                  code="UNAVAILABLE") from None

    async def start(self, sandbox_id: str, namespace: str, spec: dict[str, Any], timeout: float) -> tuple[State, str]:
        resp = await self._call(
            self._stub.StartSandbox,
            worker_pb2.StartSandboxRequest(sandbox_id=sandbox_id, namespace=namespace, spec=spec_from_dict(spec)),
            timeout,
        )
        return state_from_pb(resp.state) or State.FAILED, resp.message

    async def stop(self, sandbox_id: str, grace_ms: int, timeout: float) -> None:
        await self._call(
            self._stub.StopSandbox,
            worker_pb2.WorkerServiceStopSandboxRequest(sandbox_id=sandbox_id, grace_period_ms=grace_ms), timeout,
        )

    async def remove(self, sandbox_id: str, timeout: float) -> None:
        await self._call(self._stub.RemoveSandbox, worker_pb2.RemoveSandboxRequest(sandbox_id=sandbox_id), timeout)

    async def commit(self, sandbox_id: str, name: str, fmt: int, timeout: float) -> CommitInfo:
        resp = await self._call(
            self._stub.CommitSandbox,
            worker_pb2.WorkerServiceCommitSandboxRequest(
                sandbox_id=sandbox_id, name=name, format=fmt  # type: ignore[arg-type]
            ),
            timeout,
        )
        return CommitInfo(resp.image, resp.size_bytes, resp.digest)

    async def close(self) -> None:
        await self.channel.close()
