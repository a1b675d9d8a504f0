"""WorkerRegistryService: workers join with the join token and heartbeat their status."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ale_proto.v1 import worker_pb2, worker_pb2_grpc

from ale_rock.admin.auth import Authenticator
from ale_rock.admin.convert import backend_name, spec_from_dict, state_from_pb
from ale_rock.admin.errors import invalid
from ale_rock.admin.manager import SandboxManager
from ale_rock.admin.rpc import unary
from ale_rock.admin.state import State
from ale_rock.admin.store import WorkerRecord
from ale_rock.worker.auth import WORKER_SECRET_METADATA, secret_of

log = logging.getLogger(__name__)


class WorkerRegistryServicer(worker_pb2_grpc.WorkerRegistryServiceServicer):
    """Served by the Admin on the same port as SandboxService."""

    def __init__(self, manager: SandboxManager, auth: Authenticator) -> None:
        self.m = manager
        self.auth = auth
        self._tasks: set[asyncio.Task[None]] = set()

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
        self._restore_policies(rec.id, keep)
        return worker_pb2.RegisterWorkerResponse(
            heartbeat_interval_ms=self.m.config.heartbeat_interval_ms, keep_sandbox_ids=keep
        )

    def _restore_policies(self, worker_id: str, keep: list[str]) -> None:
        """A restarted worker whose sandboxes survived (docker containers) holds no egress policy
        for them (deny-all): send each kept running sandbox's policy again, in the background."""
        pending = []
        for sid in keep:
            rec = self.m.store.get_sandbox(sid)
            network = rec.spec.get("network") if rec is not None and rec.state == State.RUNNING else None
            if network and network.get("allow"):
                pending.append((sid, spec_from_dict({"network": network}).network))
        if not pending:
            return

        async def push() -> None:
            for sid, policy in pending:
                try:
                    client = self.m.client(worker_id)
                    await client.worker.SetNetworkPolicy(
                        worker_pb2.WorkerServiceSetNetworkPolicyRequest(sandbox_id=sid, policy=policy),
                        timeout=30, metadata=client.metadata,
                    )
                except Exception as e:  # noqa: BLE001 - the sandbox stays deny-all; log and go on
                    log.warning("could not restore a network policy", extra={"sandbox_id": sid, "detail": str(e)})

        task = asyncio.get_running_loop().create_task(push())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

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
