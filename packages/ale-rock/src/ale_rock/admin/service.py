"""SandboxService: lifecycle RPCs (thin over :class:`~ale_rock.admin.manager.SandboxManager`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ale_proto.v1 import common_pb2, sandbox_pb2, sandbox_pb2_grpc, worker_pb2

from ale_rock.admin import validation as v
from ale_rock.admin.auth import Authenticator
from ale_rock.admin.convert import (
    backend_name,
    sandbox_to_pb,
    spec_to_dict,
    state_from_pb,
    state_to_pb,
)
from ale_rock.admin.errors import AdminError, Code, invalid
from ale_rock.admin.forward import Forwarder
from ale_rock.admin.lifecycle import CreateRequest
from ale_rock.admin.manager import SandboxManager
from ale_rock.admin.rpc import remaining, streaming, unary
from ale_rock.admin.state import State
from ale_rock.backends.docker_snap import foreign_snapshot


class SandboxServicer(sandbox_pb2_grpc.SandboxServiceServicer):
    """The client-facing API. Every call is authenticated and scoped to the key's namespace."""

    def __init__(self, manager: SandboxManager, auth: Authenticator, hub: Any = None) -> None:
        self.m = manager
        self.auth = auth
        self.hub = hub  # an EnvHub: images naming a registered spec resolve to its docker build
        self.forward = Forwarder(manager, self._ns)

    def _resolve_image(self, spec: sandbox_pb2.SandboxSpec) -> bool:
        """Replace an image naming an EnvHub spec by its build; True when it did."""
        if self.hub is None or not spec.image or backend_name(spec.backend) not in ("", "docker"):
            return False
        from ale_rock.envhub.hub import HubError

        try:
            artifact = self.hub.resolve_image(spec.image, "docker")
        except HubError as e:
            raise invalid("spec.image", f"{spec.image!r} names an EnvHub spec: {e.message}") from None
        if not artifact:
            return False
        spec.image = artifact
        return True

    def _ns(self, context: Any) -> str:
        return self.auth.namespace_of(context.invocation_metadata())

    @unary
    async def CreateSandbox(self, request: sandbox_pb2.CreateSandboxRequest, context: Any) -> Any:
        ns = self._ns(context)
        v.request_id(request.request_id)
        spec = v.create_spec(request.spec, self.m.config, self.m.egress_protected())
        if foreign_snapshot(spec.image, ns):  # another namespace's snapshot: absent for this one
            raise AdminError(Code.NOT_FOUND, f"image {spec.image!r} not found", field="spec.image")
        if not self._resolve_image(spec) and not self.m.is_known_image(spec.image, ns):
            raise invalid("spec.image", f"unknown image {spec.image!r}")
        rec = await self.m.create(
            CreateRequest(
                namespace=ns, spec=spec_to_dict(spec), cpu_millis=spec.resources.cpu_millis,
                memory_bytes=spec.resources.memory_bytes, ttl_seconds=spec.ttl_seconds,
                idle_timeout_s=spec.idle_timeout_seconds, backend=backend_name(spec.backend),
                gpus=spec.resources.gpus, request_id=request.request_id,
            ),
            wait=request.wait,
        )
        return sandbox_pb2.CreateSandboxResponse(sandbox=sandbox_to_pb(rec))

    @unary
    async def GetSandbox(self, request: sandbox_pb2.GetSandboxRequest, context: Any) -> Any:
        ns = self._ns(context)
        rec = self.m.get(ns, v.sandbox_id(request.sandbox_id))
        return sandbox_pb2.GetSandboxResponse(sandbox=sandbox_to_pb(rec))

    @unary
    async def ListSandboxes(self, request: sandbox_pb2.ListSandboxesRequest, context: Any) -> Any:
        ns = self._ns(context)
        v.page_size(request)
        states: list[State] = []
        for i, s in enumerate(request.states):
            st = state_from_pb(s)
            if st is None:
                raise invalid(f"states[{i}]", f"unknown state {s}")
            states.append(st)
        try:
            offset = int(request.page.page_token or "0")
        except ValueError:
            raise invalid("page.page_token", "malformed page token") from None
        recs = [
            r for r in self.m.list_sandboxes(ns, states)
            if all(r.spec.get("labels", {}).get(k) == val for k, val in request.label_selector.items())
        ]
        size = request.page.page_size or 100
        page = recs[offset: offset + size]
        nxt = str(offset + size) if offset + size < len(recs) else ""
        return sandbox_pb2.ListSandboxesResponse(
            sandboxes=[sandbox_to_pb(r) for r in page],
            page=common_pb2.PageResponse(next_page_token=nxt, total_size=len(recs)),
        )

    @streaming
    async def WatchSandboxes(self, request: sandbox_pb2.WatchSandboxesRequest, context: Any) -> AsyncIterator[Any]:
        ns = self._ns(context)
        for i, sid in enumerate(request.sandbox_ids):
            v.sandbox_id(sid, f"sandbox_ids[{i}]")
        async for change in self.m.watch(ns, set(request.sandbox_ids), request.send_initial):
            yield sandbox_pb2.WatchSandboxesResponse(
                sandbox=sandbox_to_pb(change.record), previous_state=state_to_pb(change.previous),  # type: ignore[arg-type]
            )

    @unary
    async def StopSandbox(self, request: sandbox_pb2.StopSandboxRequest, context: Any) -> Any:
        ns = self._ns(context)
        rec = await self.m.stop(ns, v.sandbox_id(request.sandbox_id), request.grace_period_ms or 5000)
        return sandbox_pb2.StopSandboxResponse(sandbox=sandbox_to_pb(rec))

    @unary
    async def DeleteSandbox(self, request: sandbox_pb2.DeleteSandboxRequest, context: Any) -> Any:
        ns = self._ns(context)
        await self.m.delete(ns, v.sandbox_id(request.sandbox_id))
        return sandbox_pb2.DeleteSandboxResponse()

    @unary
    async def CommitSandbox(self, request: sandbox_pb2.CommitSandboxRequest, context: Any) -> Any:
        ns = self._ns(context)
        v.commit_name(request.name)
        info = await self.m.commit(ns, v.sandbox_id(request.sandbox_id), request.name, request.format)
        return sandbox_pb2.CommitSandboxResponse(image=info.image, size_bytes=info.size_bytes, digest=info.digest)

    @unary
    async def GetSandboxStats(self, request: sandbox_pb2.GetSandboxStatsRequest, context: Any) -> Any:
        ns = self._ns(context)
        rec = self.m.get(ns, v.sandbox_id(request.sandbox_id))
        self.m.worker_address(rec.worker_id)
        client = self.m.client(rec.worker_id)
        resp = await client.worker.GetSandboxStats(
            worker_pb2.WorkerServiceGetSandboxStatsRequest(sandbox_id=rec.id), timeout=remaining(context, 30),
            metadata=client.metadata,
        )
        return sandbox_pb2.GetSandboxStatsResponse(stats=resp.stats)

    @unary
    async def SetNetworkPolicy(self, request: sandbox_pb2.SetNetworkPolicyRequest, context: Any) -> Any:
        ns = self._ns(context)
        v.policy(request.policy, "policy", self.m.egress_protected())
        rec = self.m.running(ns, v.sandbox_id(request.sandbox_id))
        client = self.m.client(rec.worker_id)
        await client.worker.SetNetworkPolicy(
            worker_pb2.WorkerServiceSetNetworkPolicyRequest(sandbox_id=rec.id, policy=request.policy),
            timeout=remaining(context, 30), metadata=client.metadata,
        )
        spec = dict(rec.spec)
        spec["network"] = spec_to_dict(sandbox_pb2.SandboxSpec(network=request.policy)).get("network", {})
        self.m.update_spec(rec.id, spec)
        return sandbox_pb2.SetNetworkPolicyResponse(policy=request.policy)

    @unary
    async def GetNetworkPolicy(self, request: sandbox_pb2.GetNetworkPolicyRequest, context: Any) -> Any:
        ns = self._ns(context)
        rec = self.m.get(ns, v.sandbox_id(request.sandbox_id))
        return sandbox_pb2.GetNetworkPolicyResponse(policy=sandbox_to_pb(rec).spec.network)

    # -- calls that run inside the sandbox: relayed to its worker by the Forwarder -------------
    async def Exec(self, request: sandbox_pb2.ExecRequest, context: Any) -> Any:
        return await self.forward.Exec(request, context)

    async def ExecStream(self, request: sandbox_pb2.ExecStreamRequest, context: Any) -> AsyncIterator[Any]:
        async for out in self.forward.ExecStream(request, context):
            yield out

    async def SignalProcess(self, request: sandbox_pb2.SignalProcessRequest, context: Any) -> Any:
        return await self.forward.SignalProcess(request, context)

    async def CreateSession(self, request: sandbox_pb2.CreateSessionRequest, context: Any) -> Any:
        return await self.forward.CreateSession(request, context)

    async def RunInSession(self, request: sandbox_pb2.RunInSessionRequest, context: Any) -> Any:
        return await self.forward.RunInSession(request, context)

    async def SendSessionInput(self, request: sandbox_pb2.SendSessionInputRequest, context: Any) -> Any:
        return await self.forward.SendSessionInput(request, context)

    async def ReadSessionOutput(self, request: sandbox_pb2.ReadSessionOutputRequest, context: Any) -> Any:
        return await self.forward.ReadSessionOutput(request, context)

    async def CloseSession(self, request: sandbox_pb2.CloseSessionRequest, context: Any) -> Any:
        return await self.forward.CloseSession(request, context)

    async def UploadFile(self, request_iterator: AsyncIterator[sandbox_pb2.UploadFileRequest], context: Any) -> Any:
        return await self.forward.UploadFile(request_iterator, context)

    async def DownloadFile(self, request: sandbox_pb2.DownloadFileRequest, context: Any) -> AsyncIterator[Any]:
        async for part in self.forward.DownloadFile(request, context):
            yield part

    async def ReadFile(self, request: sandbox_pb2.ReadFileRequest, context: Any) -> Any:
        return await self.forward.ReadFile(request, context)

    async def WriteFile(self, request: sandbox_pb2.WriteFileRequest, context: Any) -> Any:
        return await self.forward.WriteFile(request, context)

    async def ListFiles(self, request: sandbox_pb2.ListFilesRequest, context: Any) -> Any:
        return await self.forward.ListFiles(request, context)
