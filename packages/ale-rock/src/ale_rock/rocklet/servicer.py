"""RockletService over gRPC: a thin mapping between protobuf messages and the engines."""

from __future__ import annotations

import os
import queue
import signal as _signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import grpc
from ale_proto.errors import abort, make_error
from ale_proto.v1 import common_pb2, rocklet_pb2, rocklet_pb2_grpc, sandbox_pb2
from google.protobuf import timestamp_pb2

from ale_rock.rocklet.exec import ExecEngine
from ale_rock.rocklet.files import MAX_UPLOAD_CHUNK, FileMeta, FileOps
from ale_rock.rocklet.sessions import SessionManager
from ale_rock.rocklet.types import EndReason, ExecOutcome, ExecRequest, RockletError

VERSION = "0.1.0"
_CODES = {
    "invalid": common_pb2.ERROR_CODE_INVALID_ARGUMENT,
    "not_found": common_pb2.ERROR_CODE_NOT_FOUND,
    "exists": common_pb2.ERROR_CODE_ALREADY_EXISTS,
    "busy": common_pb2.ERROR_CODE_FAILED_PRECONDITION,
    "exhausted": common_pb2.ERROR_CODE_RESOURCE_EXHAUSTED,
    "internal": common_pb2.ERROR_CODE_INTERNAL,
}
T = TypeVar("T")


def _abort(context: grpc.ServicerContext, e: RockletError) -> None:
    abort(context, make_error(_CODES.get(e.kind, common_pb2.ERROR_CODE_INTERNAL), e.message, e.field, **e.metadata))


def _guard(context: grpc.ServicerContext, fn: Callable[[], T]) -> T:
    try:
        return fn()
    except RockletError as e:
        _abort(context, e)
        raise  # unreachable: abort raises


def exec_request(spec: Any, exec_id: str) -> ExecRequest:
    """ExecSpec -> ExecRequest."""
    return ExecRequest(
        command=spec.command,
        argv=list(spec.argv),
        env=dict(spec.env),
        cwd=spec.cwd,
        timeout_ms=spec.timeout_ms,
        idle_timeout_ms=spec.idle_timeout_ms,
        max_output_bytes=spec.max_output_bytes,
        stdin=spec.stdin,
        background=spec.background,
        exec_id=exec_id,
    )


def exec_result(o: ExecOutcome) -> Any:
    """ExecOutcome -> ExecResult."""
    return sandbox_pb2.ExecResult(
        end_reason=int(o.end_reason),  # type: ignore[arg-type]
        exit_code=o.exit_code,
        signal=o.signal,
        stdout=o.stdout,
        stderr=o.stderr,
        stdout_truncated=o.stdout_truncated,
        stderr_truncated=o.stderr_truncated,
        stdout_spill_path=o.stdout_spill_path,
        stderr_spill_path=o.stderr_spill_path,
        duration_s=o.duration_s,
        pid=o.pid,
        exec_id=o.exec_id,
        error=o.error,
        stdout_total_bytes=o.stdout_total_bytes,
        stderr_total_bytes=o.stderr_total_bytes,
        spill_truncated=o.spill_truncated,
        oom_killed=o.oom_killed,
    )


def file_info(m: FileMeta) -> Any:
    """FileMeta -> FileInfo."""
    ts = timestamp_pb2.Timestamp()
    ts.FromNanoseconds(int(m.mtime * 1e9))
    return sandbox_pb2.FileInfo(
        path=m.path, size=m.size, mode=m.mode, is_dir=m.is_dir, is_symlink=m.is_symlink, modify_time=ts
    )


class RockletServicer(rocklet_pb2_grpc.RockletServiceServicer):
    """Serves one sandbox's commands, sessions and files."""

    def __init__(
        self, execs: ExecEngine, sessions: SessionManager, files: FileOps, uid: int | None = None,
        own_sandbox: Callable[[], bool] = lambda: False,
    ) -> None:
        self.execs = execs
        self.sessions = sessions
        self.files = files
        self.own_sandbox = own_sandbox
        """Whether every other process this Rocklet can see is its sandbox's (``RockletSettings``)."""
        self.uid = os.getuid() if uid is None else uid
        self.started = time.monotonic()

    # -- exec ----------------------------------------------------------------------------------

    def Exec(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        req = exec_request(request.spec, request.exec_id)
        holder: dict[str, str] = {}

        def on_start(pid: int, exec_id: str) -> None:
            holder["id"] = exec_id
            # A caller that goes away (deadline, cancel) interrupts its command.
            context.add_callback(lambda: self.execs.cancel(exec_id))

        outcome = _guard(context, lambda: self.execs.run(req, on_start=on_start))
        return rocklet_pb2.RockletServiceExecResponse(result=exec_result(outcome))

    def ExecStream(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:  # noqa: N802
        req = exec_request(request.spec, request.exec_id)
        if req.background:
            abort(
                context,
                make_error(
                    common_pb2.ERROR_CODE_INVALID_ARGUMENT,
                    "background is not allowed in a stream",
                    "spec.background",
                ),
            )
        events: queue.Queue[Any] = queue.Queue(maxsize=256)
        Resp = rocklet_pb2.RockletServiceExecStreamResponse

        def offer(event: Any) -> None:
            # Back-pressure on a slow reader, but never block forever on one that went away.
            while context.is_active():
                try:
                    events.put(event, timeout=0.5)
                    return
                except queue.Full:
                    continue

        def on_start(pid: int, exec_id: str) -> None:
            context.add_callback(lambda: self.execs.cancel(exec_id))
            offer(Resp(started=sandbox_pb2.ExecStarted(pid=pid, exec_id=exec_id)))

        def on_output(stream: str, data: bytes) -> None:
            offer(Resp(stdout=data) if stream == "stdout" else Resp(stderr=data))

        def run() -> None:
            try:
                outcome = self.execs.run(req, on_output=on_output, on_start=on_start)
                offer(Resp(exit=exec_result(outcome)))
            except RockletError as e:
                offer(e)
            offer(None)

        threading.Thread(target=run, daemon=True).start()
        while context.is_active():
            try:
                event = events.get(timeout=0.5)
            except queue.Empty:
                continue
            if event is None:
                return
            if isinstance(event, RockletError):
                _abort(context, event)
            yield event

    def SignalProcess(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        targets = [bool(request.exec_id), bool(request.pid), bool(request.session_id), request.all_processes]
        if sum(targets) != 1:
            abort(
                context,
                make_error(
                    common_pb2.ERROR_CODE_INVALID_ARGUMENT,
                    "set exactly one of exec_id, pid, session_id, all_processes",
                    "exec_id",
                ),
            )
        if request.all_processes:
            if request.signal not in (0, int(_signal.SIGKILL)):
                abort(context, make_error(common_pb2.ERROR_CODE_INVALID_ARGUMENT,
                                          "all_processes kills with SIGKILL: leave signal 0 or set 9", "signal"))
            if not self.own_sandbox():
                abort(context, make_error(common_pb2.ERROR_CODE_FAILED_PRECONDITION,
                                          "this Rocklet does not run in a sandbox of its own (settings own_sandbox): "
                                          "all_processes would reach processes that are not the sandbox's",
                                          "all_processes"))
            killed = _guard(context, self.execs.kill_all)
            return rocklet_pb2.RockletServiceSignalProcessResponse(delivered=killed > 0)
        sig = request.signal or int(_signal.SIGINT)
        if not 0 < sig < 65:
            abort(context, make_error(common_pb2.ERROR_CODE_INVALID_ARGUMENT, f"no signal {sig}", "signal"))
        if request.session_id:
            delivered = _guard(context, lambda: self.sessions.signal(request.session_id, sig))
        else:
            delivered = _guard(context, lambda: self.execs.signal(request.exec_id, request.pid, sig))
        return rocklet_pb2.RockletServiceSignalProcessResponse(delivered=delivered)

    # -- sessions ------------------------------------------------------------------------------

    def CreateSession(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        spec = request.spec
        sid = _guard(
            context, lambda: self.sessions.create(spec.session_id, spec.shell, dict(spec.env), spec.cwd)
        )
        return rocklet_pb2.RockletServiceCreateSessionResponse(session_id=sid)

    def RunInSession(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        c = request.command
        outcome = _guard(
            context,
            lambda: self.sessions.run(
                request.session_id, c.command, c.timeout_ms, c.idle_timeout_ms, c.max_output_bytes
            ),
        )
        return rocklet_pb2.RockletServiceRunInSessionResponse(result=exec_result(outcome))

    def SendSessionInput(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        _guard(context, lambda: self.sessions.get(request.session_id).send(request.data, request.interrupt))
        return rocklet_pb2.RockletServiceSendSessionInputResponse()

    def ReadSessionOutput(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        wait_ms = min(request.wait_ms, 60_000)
        data, closed = _guard(context, lambda: self.sessions.get(request.session_id).read(wait_ms))
        return rocklet_pb2.RockletServiceReadSessionOutputResponse(output=data, closed=closed)

    def CloseSession(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        _guard(context, lambda: self.sessions.close(request.session_id))
        return rocklet_pb2.RockletServiceCloseSessionResponse()

    # -- files ---------------------------------------------------------------------------------

    def UploadFile(self, request_iterator: Iterator[Any], context: grpc.ServicerContext) -> Any:  # noqa: N802
        first = next(request_iterator, None)
        if first is None or not first.HasField("header"):
            abort(
                context,
                make_error(
                    common_pb2.ERROR_CODE_INVALID_ARGUMENT, "the first message must be a header", "header"
                ),
            )
        h = first.header  # type: ignore[union-attr]

        def chunks() -> Iterator[bytes]:
            for part in request_iterator:
                if part.HasField("chunk"):
                    if len(part.chunk) > MAX_UPLOAD_CHUNK:  # the contract's limit, not the transport's
                        raise RockletError(
                            "invalid", f"at most {MAX_UPLOAD_CHUNK} bytes (1 MiB) per message, got {len(part.chunk)}", "chunk"
                        )
                    yield part.chunk

        size, digest = _guard(
            context, lambda: self.files.upload(h.path, chunks(), h.mode, h.is_tar, h.sha256)
        )
        return rocklet_pb2.RockletServiceUploadFileResponse(size=size, sha256=digest)

    def DownloadFile(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:  # noqa: N802
        import hashlib

        meta, chunks = _guard(context, lambda: self.files.download(request.path, request.chunk_size))
        Resp = rocklet_pb2.RockletServiceDownloadFileResponse
        yield Resp(info=file_info(meta))
        digest = hashlib.sha256()
        for chunk in chunks:
            digest.update(chunk)
            yield Resp(chunk=chunk)
        yield Resp(sha256=digest.hexdigest())

    def ReadFile(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        data, size, eof = _guard(
            context, lambda: self.files.read(request.path, request.offset, request.limit)
        )
        return rocklet_pb2.RockletServiceReadFileResponse(data=data, size=size, eof=eof)

    def WriteFile(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        if request.mode > 0o7777:
            abort(
                context,
                make_error(common_pb2.ERROR_CODE_INVALID_ARGUMENT, "mode must be permission bits", "mode"),
            )
        size = _guard(
            context, lambda: self.files.write(request.path, request.data, request.mode, request.append)
        )
        return rocklet_pb2.RockletServiceWriteFileResponse(size=size)

    def ListFiles(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        metas, nxt, total = _guard(
            context,
            lambda: self.files.list(
                request.path, request.recursive, request.page.page_size, request.page.page_token
            ),
        )
        return rocklet_pb2.RockletServiceListFilesResponse(
            files=[file_info(m) for m in metas],
            page=common_pb2.PageResponse(next_page_token=nxt, total_size=total),
        )

    def GetInfo(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        return rocklet_pb2.GetInfoResponse(
            version=VERSION,
            uptime_s=time.monotonic() - self.started,
            workdir=self.files.workdir,
            uid=self.uid,
        )


__all__ = ["EndReason", "RockletServicer", "exec_request", "exec_result", "file_info"]
