"""The SDK's operations and its method table, written once for :class:`Sandbox` and
:class:`AsyncSandbox` (see ``steps.py`` for how an operation runs, ``methods.py`` for how it
becomes a method of each).

Each function takes the sandbox (or session, or class) first, as a method would;
:class:`SandboxMethods` and :class:`SessionMethods` list them as methods, and the blocking and
asyncio classes (``sandbox.py``, ``async_sandbox.py``) add only their context managers.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict, Unpack

from ale_proto.v1 import common_pb2
from ale_proto.v1 import sandbox_pb2 as pb

from ale_rock.sdk import requests as rq
from ale_rock.sdk import types as t
from ale_rock.sdk.errors import SandboxStartFailed
from ale_rock.sdk.files import DownloadSink, check_upload, prepare_upload, upload_messages
from ale_rock.sdk.methods import (
    class_operation,
    class_stream_operation,
    constructor,
    operation,
    stream_operation,
)
from ale_rock.sdk.steps import Call, Close, Op, Stream


class CreateOptions(TypedDict, total=False):
    """The sandbox's spec for ``create`` (see :func:`ale_rock.sdk.requests.create_request`)."""

    cpu: float | None
    memory: int | str | None
    disk: int | str | None
    max_pids: int | None
    gpus: int | None
    env: Mapping[str, str] | None
    workdir: str
    ttl: float | None
    idle_timeout: float | None
    backend: str
    allow: Iterable[str | tuple[str, int]]
    read_only_root: bool
    labels: Mapping[str, str] | None
    wait: bool
    request_id: str


# -- the sandbox's class: construction ------------------------------------------------------------
def create(cls: Any, image: str = "", *, client: Any = None, address: str | None = None,
           api_key: str | None = None, timeout: float | None = None, **spec: Unpack[CreateOptions]) -> Op[Any]:
    """Create a sandbox (by default waiting until it runs; raises SandboxStartFailed if it fails or
    its worker is lost while it starts)."""
    spec["request_id"] = spec.get("request_id") or uuid.uuid4().hex
    req = rq.create_request(image=image, **spec)
    owns = client is None
    c = client or cls._client_class(address, api_key, timeout)
    try:
        resp = yield Call(c, "CreateSandbox", req, timeout)
    except BaseException:
        if owns:
            yield Close(c)
        raise
    info = t.sandbox_info(resp.sandbox)
    sb = cls(info.id, c, owns, info)
    if info.state in ("failed", "lost"):  # lost: its worker went away while it started
        yield from release(sb)
        raise SandboxStartFailed(f"sandbox {info.id} failed to start: {info.message}", metadata={"id": info.id})
    return sb


def connect(cls: Any, sandbox_id: str, *, client: Any = None, address: str | None = None,
            api_key: str | None = None) -> Op[Any]:
    """Attach to an existing sandbox (raises SandboxNotFound if the namespace has none such)."""
    owns = client is None
    sb = cls(sandbox_id, client or cls._client_class(address, api_key), owns)
    try:
        yield from refresh(sb)
    except BaseException:
        yield from release(sb)
        raise
    return sb


def list_sandboxes(cls: Any, *, client: Any = None, states: Sequence[str] = (),
                   labels: Mapping[str, str] | None = None, address: str | None = None,
                   api_key: str | None = None) -> Op[list[t.SandboxInfo]]:
    """The sandboxes of the caller's namespace (all but deleted by default)."""
    c = client or cls._client_class(address, api_key)
    try:
        out: list[t.SandboxInfo] = []
        token = ""
        wanted = [pb.SandboxState.Value(f"SANDBOX_STATE_{s.upper()}") for s in states]
        while True:
            resp = yield Call(c, "ListSandboxes", pb.ListSandboxesRequest(
                page=common_pb2.PageRequest(page_size=1000, page_token=token), states=wanted,
                label_selector=dict(labels or {})))
            out.extend(t.sandbox_info(s) for s in resp.sandboxes)
            token = resp.page.next_page_token
            if not token:
                return out
    finally:
        if client is None:
            yield Close(c)


def watch(cls: Any, *, client: Any, ids: Sequence[str] = (), send_initial: bool = False,
          timeout: float = 24 * 3600) -> Stream[t.SandboxChange]:
    """Stream state changes of the namespace's sandboxes (or of ``ids``) until you stop iterating."""
    req = pb.WatchSandboxesRequest(sandbox_ids=list(ids), send_initial=send_initial)
    return Stream(client, "WatchSandboxes", req, timeout, t.sandbox_change)


def release(sb: Any) -> Op[None]:
    """Close the sandbox's client if the sandbox opened it."""
    if sb._owns_client:
        sb._owns_client = False
        yield Close(sb.client)


# -- lifecycle ------------------------------------------------------------------------------------
def refresh(sb: Any) -> Op[t.SandboxInfo]:
    """Fetch the sandbox's current state."""
    resp = yield Call(sb.client, "GetSandbox", pb.GetSandboxRequest(sandbox_id=sb.id))
    sb._info = t.sandbox_info(resp.sandbox)
    return sb._info  # type: ignore[no-any-return]


def stop(sb: Any, grace: float = 5.0) -> Op[t.SandboxInfo]:
    """SIGTERM its processes, SIGKILL after ``grace`` seconds; files stay until delete."""
    resp = yield Call(sb.client, "StopSandbox", pb.StopSandboxRequest(sandbox_id=sb.id, grace_period_ms=int(grace * 1000)),
                      grace + sb.client.settings.timeout)
    sb._info = t.sandbox_info(resp.sandbox)
    return sb._info  # type: ignore[no-any-return]


def delete(sb: Any) -> Op[None]:
    """Delete the sandbox and everything it left."""
    try:
        yield Call(sb.client, "DeleteSandbox", pb.DeleteSandboxRequest(sandbox_id=sb.id))
    finally:
        yield from release(sb)


def commit(sb: Any, name: str = "", fmt: str = "") -> Op[str]:
    """Snapshot to an image (docker) or archive (local); returns a reference usable as ``image``."""
    fmt_value = {"": 0, "image": 1, "archive": 2}[fmt]
    resp = yield Call(sb.client, "CommitSandbox", pb.CommitSandboxRequest(sandbox_id=sb.id, name=name, format=fmt_value),  # type: ignore[arg-type]
                      600)
    return str(resp.image)


def stats(sb: Any) -> Op[t.SandboxStats]:
    """CPU, memory, disk and process counts of the sandbox."""
    resp = yield Call(sb.client, "GetSandboxStats", pb.GetSandboxStatsRequest(sandbox_id=sb.id))
    return t.sandbox_stats(resp.stats)


def network_policy(sb: Any) -> Op[list[tuple[str, int]]]:
    """The egress allow-list in force, as (host, port) pairs (port 0 = any)."""
    resp = yield Call(sb.client, "GetNetworkPolicy", pb.GetNetworkPolicyRequest(sandbox_id=sb.id))
    return [(r.host, r.port) for r in resp.policy.allow]


def set_network_policy(sb: Any, allow: Iterable[str | tuple[str, int]]) -> Op[None]:
    """Replace the egress allow-list (deny by default; [] blocks everything)."""
    yield Call(sb.client, "SetNetworkPolicy", pb.SetNetworkPolicyRequest(
        sandbox_id=sb.id, policy=pb.NetworkPolicy(allow=rq.egress_rules(allow))))


# -- commands -------------------------------------------------------------------------------------
def exec_command(
    sb: Any, command: str | Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str = "",
    timeout: float | None = None, idle_timeout: float | None = None, stdin: bytes | str | None = None,
    max_output_bytes: int | None = None, background: bool = False, exec_id: str = "",
) -> Op[t.ExecResult]:
    """Run a command (a shell line or an argv list) and return its result."""
    spec = rq.exec_spec(command, env=env, cwd=cwd, timeout=timeout, idle_timeout=idle_timeout, stdin=stdin,
                        max_output_bytes=max_output_bytes, background=background)
    resp = yield Call(sb.client, "Exec", pb.ExecRequest(sandbox_id=sb.id, spec=spec, exec_id=exec_id),
                      rq.rpc_deadline(timeout, sb.client.settings.timeout))
    return t.exec_result(resp.result)


def exec_stream(
    sb: Any, command: str | Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str = "",
    timeout: float | None = None, idle_timeout: float | None = None, stdin: bytes | str | None = None,
    exec_id: str = "",
) -> Stream[t.ExecEvent]:
    """Run a command and yield its output as it comes, then an "exit" event with the result."""
    spec = rq.exec_spec(command, env=env, cwd=cwd, timeout=timeout, idle_timeout=idle_timeout, stdin=stdin)
    return Stream(sb.client, "ExecStream", pb.ExecStreamRequest(sandbox_id=sb.id, spec=spec, exec_id=exec_id),
                  rq.rpc_deadline(timeout, 24 * 3600), t.exec_event)


def signal(sb: Any, *, exec_id: str = "", pid: int = 0, signal: int = 2) -> Op[bool]:
    """Signal a running command by exec id or pid."""
    resp = yield Call(sb.client, "SignalProcess", pb.SignalProcessRequest(sandbox_id=sb.id, exec_id=exec_id, pid=pid,
                                                                          signal=signal))
    return bool(resp.delivered)


def kill_all(sb: Any) -> Op[bool]:
    """SIGKILL every process in the sandbox but its Rocklet, until none is left (commands in flight,
    sessions' shells and anything detached or started with a scrubbed environment); True if there
    were any. What an episode does before its hidden tests run."""
    resp = yield Call(sb.client, "SignalProcess", pb.SignalProcessRequest(sandbox_id=sb.id, all_processes=True))
    return bool(resp.delivered)


def session(sb: Any, session_id: str = "", *, shell: str = "", env: Mapping[str, str] | None = None,
            cwd: str = "") -> Op[Any]:
    """Open a persistent shell session."""
    resp = yield Call(sb.client, "CreateSession", pb.CreateSessionRequest(
        sandbox_id=sb.id, spec=pb.SessionSpec(session_id=session_id, shell=shell, env=dict(env or {}), cwd=cwd)))
    return sb._session_class(sb, resp.session_id)


# -- files ----------------------------------------------------------------------------------------
def upload(sb: Any, local_path: str | os.PathLike[str], remote_path: str, mode: int = 0) -> Op[int]:
    """Upload a file (or a directory, as tar) of any size; returns the bytes sent. SHA-256 checked."""
    src = prepare_upload(local_path)
    try:
        resp = yield Call(sb.client, "UploadFile", upload_messages(src, sb.id, remote_path, mode),
                          max(sb.client.settings.timeout, src.size / 2**20))
        check_upload(src, resp)
        return src.size
    finally:
        src.cleanup()


def download(sb: Any, remote_path: str, local_path: str | os.PathLike[str]) -> Op[Path]:
    """Download a file (or a directory, extracted from tar) to ``local_path``; SHA-256 checked."""
    sink = DownloadSink(local_path)
    try:
        yield Stream(sb.client, "DownloadFile", pb.DownloadFileRequest(sandbox_id=sb.id, path=remote_path), 24 * 3600,
                    sink.feed)
    except BaseException:
        sink.abort()
        raise
    return sink.finish()


def read(sb: Any, path: str) -> Op[bytes]:
    """The whole content of a file."""
    out, offset = bytearray(), 0
    while True:
        resp = yield Call(sb.client, "ReadFile", pb.ReadFileRequest(sandbox_id=sb.id, path=path, offset=offset))
        out += resp.data
        offset += len(resp.data)
        if resp.eof or not resp.data:
            return bytes(out)


def write(sb: Any, path: str, data: bytes | str, mode: int = 0, append: bool = False) -> Op[int]:
    """Write a small file (≤ 4 MiB; use upload for more); parents are created. Returns its size."""
    raw = data.encode() if isinstance(data, str) else data
    resp = yield Call(sb.client, "WriteFile", pb.WriteFileRequest(sandbox_id=sb.id, path=path, data=raw, mode=mode,
                                                                  append=append))
    return int(resp.size)


def ls(sb: Any, path: str, recursive: bool = False) -> Op[list[t.FileEntry]]:
    """Entries of a directory, sorted by path."""
    out: list[t.FileEntry] = []
    token = ""
    while True:
        resp = yield Call(sb.client, "ListFiles", pb.ListFilesRequest(
            sandbox_id=sb.id, path=path, recursive=recursive, page=common_pb2.PageRequest(page_token=token)))
        out.extend(t.file_entry(f) for f in resp.files)
        token = resp.page.next_page_token
        if not token:
            return out


# -- sessions (a persistent shell: cwd, env and background jobs persist between commands) ---------
def session_run(s: Any, command: str, timeout: float | None = None, idle_timeout: float | None = None,
                max_output_bytes: int | None = None) -> Op[t.ExecResult]:
    """Run one command and wait for it (or its timeout: the job is interrupted, output kept)."""
    cmd = pb.SessionCommand(
        command=command, timeout_ms=rq._nonneg(timeout, "command.timeout_ms", 1000),
        idle_timeout_ms=rq._nonneg(idle_timeout, "command.idle_timeout_ms", 1000),
        max_output_bytes=rq._nonneg(max_output_bytes, "command.max_output_bytes", cap=2**63),
    )
    resp = yield Call(s.sandbox.client, "RunInSession",
                      pb.RunInSessionRequest(sandbox_id=s.sandbox.id, session_id=s.id, command=cmd),
                      rq.rpc_deadline(timeout, s.sandbox.client.settings.timeout))
    return t.exec_result(resp.result)


def session_send(s: Any, data: bytes | str, interrupt: bool = False) -> Op[None]:
    """Write raw input to the session's terminal (optionally Ctrl-C first)."""
    raw = data.encode() if isinstance(data, str) else data
    yield Call(s.sandbox.client, "SendSessionInput", pb.SendSessionInputRequest(
        sandbox_id=s.sandbox.id, session_id=s.id, data=raw, interrupt=interrupt))


def session_read(s: Any, wait: float = 0.0) -> Op[bytes]:
    """Output produced since the last read, waiting up to ``wait`` seconds for some."""
    resp = yield Call(s.sandbox.client, "ReadSessionOutput", pb.ReadSessionOutputRequest(
        sandbox_id=s.sandbox.id, session_id=s.id, wait_ms=int(wait * 1000)), wait + 30)
    return bytes(resp.output)


def session_interrupt(s: Any, signal: int = 2) -> Op[bool]:
    """Signal the session's foreground job (SIGINT by default); False if nothing was running."""
    resp = yield Call(s.sandbox.client, "SignalProcess", pb.SignalProcessRequest(
        sandbox_id=s.sandbox.id, session_id=s.id, signal=signal))
    return bool(resp.delivered)


def session_close(s: Any) -> Op[None]:
    """Close the session and kill its processes."""
    yield Call(s.sandbox.client, "CloseSession", pb.CloseSessionRequest(sandbox_id=s.sandbox.id, session_id=s.id))


# -- the two SDKs' classes, written once ---------------------------------------------------------
class SessionMethods:
    """A session handle: its sandbox, its id and its operations (see ``methods.py``)."""

    def __init__(self, sandbox: Any, session_id: str) -> None:
        self.sandbox = sandbox
        self.id = session_id

    run = operation(session_run)
    send = operation(session_send)
    read = operation(session_read)
    interrupt = operation(session_interrupt)
    close = operation(session_close)


class SandboxMethods:
    """A sandbox handle: its id, its client, whether it opened that client, its last info, and
    its operations (see ``methods.py``)."""

    def __init__(self, sandbox_id: str, client: Any, owns_client: bool = False,
                 info: t.SandboxInfo | None = None) -> None:
        self.id = sandbox_id
        self.client = client
        self._owns_client = owns_client
        self._info = info

    create = constructor(create)
    connect = constructor(connect)
    list = class_operation(list_sandboxes)
    watch = class_stream_operation(watch)
    _release = operation(release)

    refresh = operation(refresh)
    stop = operation(stop)
    delete = operation(delete)
    commit = operation(commit)
    stats = operation(stats)
    network_policy = operation(network_policy)
    set_network_policy = operation(set_network_policy)

    exec = operation(exec_command)
    exec_stream = stream_operation(exec_stream)
    signal = operation(signal)
    kill_all = operation(kill_all)
    session = operation(session)

    upload = operation(upload)
    download = operation(download)
    read = operation(read)
    write = operation(write)
    ls = operation(ls)

    def __repr__(self) -> str:
        return f"Sandbox({self.id!r})"
