"""WorkerRegistryService: workers join with the join token and heartbeat their status."""

from __future__ import annotations

from typing import Any

from ale_proto.v1 import worker_pb2, worker_pb2_grpc

from ale_rock.admin.auth import Authenticator
from ale_rock.admin.convert import backend_name, state_from_pb
from ale_rock.admin.errors import invalid
from ale_rock.admin.manager import SandboxManager
from ale_rock.admin.rpc import unary
from ale_rock.admin.state import State
from ale_rock.admin.store import WorkerRecord
from ale_rock.worker.auth import WORKER_SECRET_METADATA, secret_of


class WorkerRegistryServicer(worker_pb2_grpc.WorkerRegistryServiceServicer):
    """Served by the Admin on the same port as SandboxService."""

    def __init__(self, manager: SandboxManager, auth: Authenticator) -> None:
        self.m = manager
        self.auth = auth

    @unary
    async def RegisterWorker(self, request: worker_pb2.RegisterWorkerRequest, context: Any) -> Any:
        self.auth.check_join_token(context.invocation_metadata())
        info = request.worker
        if not info.worker_id or len(info.worker_id) > 128:
            raise invalid("worker.worker_id", "is required (at most 128 characters)")
        if ":" not in info.address:
            raise invalid("worker.address", "must be host:port")
        secret = secret_of(context.invocation_metadata())
        if not 16 <= len(secret) <= 256:
            raise invalid(WORKER_SECRET_METADATA, "the worker credential (16..256 characters) is required")
        rec = WorkerRecord(
            id=info.worker_id, address=info.address, cpu_millis=info.capacity.cpu_millis,
            memory_bytes=info.capacity.memory_bytes, max_sandboxes=info.max_sandboxes,
            backends=[b for b in (backend_name(x) for x in info.backends) if b], labels=dict(info.labels),
            gpus=info.capacity.gpus, secret=secret,
        )
        keep = self.m.register_worker(rec, list(request.running_sandbox_ids))
        return worker_pb2.RegisterWorkerResponse(
            heartbeat_interval_ms=self.m.config.heartbeat_interval_ms, keep_sandbox_ids=keep
        )

    @unary
    async def Heartbeat(self, request: worker_pb2.HeartbeatRequest, context: Any) -> Any:
        self.auth.check_join_token(context.invocation_metadata())
        statuses = [(s.sandbox_id, state_from_pb(s.state) or State.FAILED, s.message) for s in request.sandboxes]
        known = self.m.heartbeat(request.worker_id, statuses)
        return worker_pb2.HeartbeatResponse(heartbeat_interval_ms=self.m.config.heartbeat_interval_ms, known=known)

    @unary
    async def DeregisterWorker(self, request: worker_pb2.DeregisterWorkerRequest, context: Any) -> Any:
        self.auth.check_join_token(context.invocation_metadata())
        self.m.deregister_worker(request.worker_id)
        return worker_pb2.DeregisterWorkerResponse()
