"""SandboxService calls that run inside a sandbox: validated here, then forwarded to the
RockletService proxy on the sandbox's worker with metadata ``ale-sandbox-id``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from ale_proto.v1 import rocklet_pb2 as rpb
from ale_proto.v1 import sandbox_pb2 as spb

from ale_rock.admin import validation as v
from ale_rock.admin.config import AdminConfig
from ale_rock.admin.errors import invalid
from ale_rock.admin.rpc import remaining, streaming, unary
from ale_rock.admin.store import SandboxRecord
from ale_rock.admin.workers import WorkerClient

SANDBOX_ID_METADATA = "ale-sandbox-id"


class Placement(Protocol):
    """Where a running sandbox lives (implemented by :class:`~ale_rock.admin.manager.SandboxManager`)."""

    config: AdminConfig

    def running(self, namespace: str, sandbox_id: str) -> SandboxRecord:
        """The sandbox if it accepts commands (NOT_FOUND / LOST / FAILED_PRECONDITION otherwise)."""
        ...

    def worker_address(self, worker_id: str) -> str:
        """The address of a live worker (UNAVAILABLE otherwise)."""
        ...

    def client(self, worker_id: str) -> WorkerClient: ...


class Forwarder:
    """Exec, sessions and files: each call is validated, then relayed to the sandbox's worker.

    The methods have the servicer's signature ``(request, context)``; the servicer delegates to them.
    """

    def __init__(self, placement: Placement, namespace_of: Callable[[Any], str]) -> None:
        self.m = placement
        self._namespace_of = namespace_of

    def _ns(self, context: Any) -> str:
        return self._namespace_of(context)

    def _target(self, context: Any, sandbox_id: str, field: str = "sandbox_id") -> tuple[Any, dict[str, Any]]:
        ns = self._ns(context)
        rec = self.m.running(ns, v.sandbox_id(sandbox_id, field))
        self.m.worker_address(rec.worker_id)
        client = self.m.client(rec.worker_id)
        md = ((SANDBOX_ID_METADATA, rec.id), *client.metadata)
        return client.rocklet, {"metadata": md, "timeout": remaining(context)}

    @unary
    async def Exec(self, request: spb.ExecRequest, context: Any) -> Any:
        v.exec_spec(request.spec, self.m.config)
        v.exec_id(request.exec_id)
        stub, kw = self._target(context, request.sandbox_id)
        resp = await stub.Exec(rpb.RockletServiceExecRequest(spec=request.spec, exec_id=request.exec_id), **kw)
        return spb.ExecResponse(result=resp.result)

    @streaming
    async def ExecStream(self, request: spb.ExecStreamRequest, context: Any) -> AsyncIterator[Any]:
        v.exec_spec(request.spec, self.m.config, stream=True)
        v.exec_id(request.exec_id)
        stub, kw = self._target(context, request.sandbox_id)
        call = stub.ExecStream(rpb.RockletServiceExecStreamRequest(spec=request.spec, exec_id=request.exec_id), **kw)
        try:
            async for ev in call:
                out = spb.ExecStreamResponse()
                out.ParseFromString(ev.SerializeToString())  # same field numbers: a zero-copy-ish relay
                yield out
        finally:
            call.cancel()  # the client went away: interrupt the command in the sandbox too

    @unary
    async def SignalProcess(self, request: spb.SignalProcessRequest, context: Any) -> Any:
        targets = [bool(request.exec_id), bool(request.pid), bool(request.session_id), request.all_processes]
        if sum(targets) != 1:
            raise invalid("exec_id", "exactly one of exec_id, pid, session_id and all_processes must be set")
        v.exec_id(request.exec_id)
        if request.session_id:
            v.session_id(request.session_id)
        v.signal(request.signal)
        if request.all_processes and request.signal not in (0, 9):
            raise invalid("signal", "all_processes kills with SIGKILL: leave signal 0 or set 9")
        stub, kw = self._target(context, request.sandbox_id)
        resp = await stub.SignalProcess(
            rpb.RockletServiceSignalProcessRequest(
                exec_id=request.exec_id, pid=request.pid, session_id=request.session_id, signal=request.signal,
                all_processes=request.all_processes,
            ), **kw,
        )
        return spb.SignalProcessResponse(delivered=resp.delivered)

    @unary
    async def CreateSession(self, request: spb.CreateSessionRequest, context: Any) -> Any:
        v.session_spec(request.spec)
        stub, kw = self._target(context, request.sandbox_id)
        resp = await stub.CreateSession(rpb.RockletServiceCreateSessionRequest(spec=request.spec), **kw)
        return spb.CreateSessionResponse(session_id=resp.session_id)

    @unary
    async def RunInSession(self, request: spb.RunInSessionRequest, context: Any) -> Any:
        v.session_id(request.session_id)
        v.session_command(request.command, self.m.config)
        stub, kw = self._target(context, request.sandbox_id)
        resp = await stub.RunInSession(
            rpb.RockletServiceRunInSessionRequest(session_id=request.session_id, command=request.command), **kw
        )
        return spb.RunInSessionResponse(result=resp.result)

    @unary
    async def SendSessionInput(self, request: spb.SendSessionInputRequest, context: Any) -> Any:
        v.session_id(request.session_id)
        v.small_size(len(request.data), "data")
        stub, kw = self._target(context, request.sandbox_id)
        await stub.SendSessionInput(
            rpb.RockletServiceSendSessionInputRequest(
                session_id=request.session_id, data=request.data, interrupt=request.interrupt
            ), **kw,
        )
        return spb.SendSessionInputResponse()

    @unary
    async def ReadSessionOutput(self, request: spb.ReadSessionOutputRequest, context: Any) -> Any:
        v.session_id(request.session_id)
        stub, kw = self._target(context, request.sandbox_id)
        resp = await stub.ReadSessionOutput(
            rpb.RockletServiceReadSessionOutputRequest(session_id=request.session_id, wait_ms=request.wait_ms), **kw
        )
        return spb.ReadSessionOutputResponse(output=resp.output, closed=resp.closed)

    @unary
    async def CloseSession(self, request: spb.CloseSessionRequest, context: Any) -> Any:
        v.session_id(request.session_id)
        stub, kw = self._target(context, request.sandbox_id)
        await stub.CloseSession(rpb.RockletServiceCloseSessionRequest(session_id=request.session_id), **kw)
        return spb.CloseSessionResponse()

    @unary
    async def UploadFile(self, request_iterator: AsyncIterator[spb.UploadFileRequest], context: Any) -> Any:
        first = await anext(aiter(request_iterator), None)
        if first is None or first.WhichOneof("part") != "header":
            raise invalid("header", "the first message of an upload must be its header")
        header = first.header
        v.path(header.path, "header.path")
        if header.sha256 and (len(header.sha256) != 64 or any(c not in "0123456789abcdef" for c in header.sha256)):
            raise invalid("header.sha256", "must be 64 lowercase hex digits")
        stub, kw = self._target(context, header.sandbox_id, "header.sandbox_id")

        async def relay() -> AsyncIterator[rpb.RockletServiceUploadFileRequest]:
            yield rpb.RockletServiceUploadFileRequest(header=header)
            async for msg in request_iterator:
                if msg.WhichOneof("part") != "chunk":
                    raise invalid("chunk", "only data chunks may follow the header")
                yield rpb.RockletServiceUploadFileRequest(chunk=msg.chunk)

        resp = await stub.UploadFile(relay(), **kw)
        return spb.UploadFileResponse(size=resp.size, sha256=resp.sha256)

    @streaming
    async def DownloadFile(self, request: spb.DownloadFileRequest, context: Any) -> AsyncIterator[Any]:
        v.path(request.path)
        v.small_size(request.chunk_size, "chunk_size")
        stub, kw = self._target(context, request.sandbox_id)
        call = stub.DownloadFile(
            rpb.RockletServiceDownloadFileRequest(path=request.path, chunk_size=request.chunk_size), **kw
        )
        try:
            async for part in call:
                out = spb.DownloadFileResponse()
                out.ParseFromString(part.SerializeToString())
                yield out
        finally:
            call.cancel()

    @unary
    async def ReadFile(self, request: spb.ReadFileRequest, context: Any) -> Any:
        v.path(request.path)
        v.small_size(request.limit, "limit")
        stub, kw = self._target(context, request.sandbox_id)
        resp = await stub.ReadFile(
            rpb.RockletServiceReadFileRequest(path=request.path, offset=request.offset, limit=request.limit), **kw
        )
        return spb.ReadFileResponse(data=resp.data, size=resp.size, eof=resp.eof)

    @unary
    async def WriteFile(self, request: spb.WriteFileRequest, context: Any) -> Any:
        v.path(request.path)
        v.small_size(len(request.data), "data")
        if request.mode > 0o7777:
            raise invalid("mode", "must be permission bits (at most 0o7777)")
        stub, kw = self._target(context, request.sandbox_id)
        resp = await stub.WriteFile(
            rpb.RockletServiceWriteFileRequest(
                path=request.path, data=request.data, mode=request.mode, append=request.append
            ), **kw,
        )
        return spb.WriteFileResponse(size=resp.size)

    @unary
    async def ListFiles(self, request: spb.ListFilesRequest, context: Any) -> Any:
        v.path(request.path)
        v.page_size(request)
        stub, kw = self._target(context, request.sandbox_id)
        resp = await stub.ListFiles(
            rpb.RockletServiceListFilesRequest(path=request.path, recursive=request.recursive, page=request.page),
            **kw,
        )
        return spb.ListFilesResponse(files=resp.files, page=resp.page)
