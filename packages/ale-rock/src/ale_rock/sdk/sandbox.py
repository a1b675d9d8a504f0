"""The blocking SDK: ``Sandbox`` and its ``Session``.

>>> with Sandbox.create(image="", cpu=0.5, memory="256Mi") as sb:   # doctest: +SKIP
...     print(sb.exec("echo hi").stdout)
"""

from __future__ import annotations

import builtins
import os
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ale_proto.v1 import common_pb2
from ale_proto.v1 import sandbox_pb2 as pb

from ale_rock.sdk import requests as rq
from ale_rock.sdk import types as t
from ale_rock.sdk.client import Client
from ale_rock.sdk.errors import SandboxStartFailed
from ale_rock.sdk.files import DownloadSink, check_upload, prepare_upload, upload_messages


class Session:
    """A persistent shell in a sandbox: cwd, env and background jobs persist between commands."""

    def __init__(self, sandbox: Sandbox, session_id: str) -> None:
        self.sandbox = sandbox
        self.id = session_id

    def run(self, command: str, timeout: float | None = None, idle_timeout: float | None = None,
            max_output_bytes: int | None = None) -> t.ExecResult:
        """Run one command and wait for it (or its timeout: the job is interrupted, output kept)."""
        cmd = pb.SessionCommand(
            command=command, timeout_ms=rq._nonneg(timeout, "command.timeout_ms", 1000),
            idle_timeout_ms=rq._nonneg(idle_timeout, "command.idle_timeout_ms", 1000),
            max_output_bytes=rq._nonneg(max_output_bytes, "command.max_output_bytes", cap=2**63),
        )
        resp = self.sandbox._call(
            "RunInSession", pb.RunInSessionRequest(sandbox_id=self.sandbox.id, session_id=self.id, command=cmd),
            rq.rpc_deadline(timeout, self.sandbox.client.settings.timeout),
        )
        return t.exec_result(resp.result)

    def send(self, data: bytes | str, interrupt: bool = False) -> None:
        """Write raw input to the session's terminal (optionally Ctrl-C first)."""
        raw = data.encode() if isinstance(data, str) else data
        self.sandbox._call("SendSessionInput", pb.SendSessionInputRequest(
            sandbox_id=self.sandbox.id, session_id=self.id, data=raw, interrupt=interrupt))

    def read(self, wait: float = 0.0) -> bytes:
        """Output produced since the last read, waiting up to ``wait`` seconds for some."""
        resp = self.sandbox._call("ReadSessionOutput", pb.ReadSessionOutputRequest(
            sandbox_id=self.sandbox.id, session_id=self.id, wait_ms=int(wait * 1000)), timeout=wait + 30)
        return bytes(resp.output)

    def interrupt(self, signal: int = 2) -> bool:
        """Signal the session's foreground job (SIGINT by default); False if nothing was running."""
        resp = self.sandbox._call("SignalProcess", pb.SignalProcessRequest(
            sandbox_id=self.sandbox.id, session_id=self.id, signal=signal))
        return bool(resp.delivered)

    def close(self) -> None:
        """Close the session and kill its processes."""
        self.sandbox._call("CloseSession", pb.CloseSessionRequest(sandbox_id=self.sandbox.id, session_id=self.id))

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Sandbox:
    """A sandbox managed by an Admin. Use :meth:`create` or :meth:`connect`; a context manager
    deletes it on exit."""

    def __init__(self, sandbox_id: str, client: Client, owns_client: bool = False,
                 info: t.SandboxInfo | None = None) -> None:
        self.id = sandbox_id
        self.client = client
        self._owns_client = owns_client
        self._info = info

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def create(
        cls, image: str = "", *, cpu: float | None = None, memory: int | str | None = None,
        disk: int | str | None = None, max_pids: int | None = None, gpus: int | None = None,
        env: Mapping[str, str] | None = None, workdir: str = "", ttl: float | None = None,
        idle_timeout: float | None = None, backend: str = "", allow: Iterable[str | tuple[str, int]] = (),
        read_only_root: bool = False, labels: Mapping[str, str] | None = None, wait: bool = True,
        client: Client | None = None, address: str | None = None, api_key: str | None = None,
        timeout: float | None = None, request_id: str = "",
    ) -> Sandbox:
        """Create a sandbox (by default waiting until it runs; raises SandboxStartFailed if it fails)."""
        req = rq.create_request(
            image=image, cpu=cpu, memory=memory, disk=disk, max_pids=max_pids, gpus=gpus, env=env,
            workdir=workdir, ttl=ttl, idle_timeout=idle_timeout, backend=backend, allow=allow,
            read_only_root=read_only_root, labels=labels, wait=wait, request_id=request_id or uuid.uuid4().hex,
        )
        owns = client is None
        c = client or Client(address, api_key, timeout)
        try:
            resp = c.call("CreateSandbox", req, timeout)
        except BaseException:
            if owns:
                c.close()
            raise
        info = t.sandbox_info(resp.sandbox)
        sb = cls(info.id, c, owns, info)
        if info.state == "failed":
            sb._release()
            raise SandboxStartFailed(f"sandbox {info.id} failed to start: {info.message}", metadata={"id": info.id})
        return sb

    @classmethod
    def connect(cls, sandbox_id: str, *, client: Client | None = None, address: str | None = None,
                api_key: str | None = None) -> Sandbox:
        """Attach to an existing sandbox (raises SandboxNotFound if the namespace has none such)."""
        owns = client is None
        c = client or Client(address, api_key)
        sb = cls(sandbox_id, c, owns)
        try:
            sb.refresh()
        except BaseException:
            sb._release()
            raise
        return sb

    @staticmethod
    def list(*, client: Client | None = None, states: Sequence[str] = (), labels: Mapping[str, str] | None = None,
             address: str | None = None, api_key: str | None = None) -> list[t.SandboxInfo]:
        """The sandboxes of the caller's namespace (all but deleted by default)."""
        c = client or Client(address, api_key)
        try:
            out: list[t.SandboxInfo] = []
            token = ""
            wanted = [pb.SandboxState.Value(f"SANDBOX_STATE_{s.upper()}") for s in states]
            while True:
                resp = c.call("ListSandboxes", pb.ListSandboxesRequest(
                    page=common_pb2.PageRequest(page_size=1000, page_token=token), states=wanted,
                    label_selector=dict(labels or {})))
                out.extend(t.sandbox_info(s) for s in resp.sandboxes)
                token = resp.page.next_page_token
                if not token:
                    return out
        finally:
            if client is None:
                c.close()

    @staticmethod
    def watch(*, client: Client, ids: Sequence[str] = (), send_initial: bool = False,
              timeout: float = 24 * 3600) -> Iterator[t.SandboxChange]:
        """Stream state changes of the namespace's sandboxes (or of ``ids``) until you stop iterating."""
        req = pb.WatchSandboxesRequest(sandbox_ids=list(ids), send_initial=send_initial)
        for ev in client.stream("WatchSandboxes", req, timeout):
            yield t.sandbox_change(ev)

    def _call(self, method: str, request: Any, timeout: float | None = None) -> Any:
        return self.client.call(method, request, timeout)

    def _release(self) -> None:
        if self._owns_client:
            self.client.close()
            self._owns_client = False

    # -- lifecycle -----------------------------------------------------------------------------
    def refresh(self) -> t.SandboxInfo:
        """Fetch the sandbox's current state."""
        self._info = t.sandbox_info(self._call("GetSandbox", pb.GetSandboxRequest(sandbox_id=self.id)).sandbox)
        return self._info

    @property
    def info(self) -> t.SandboxInfo:
        return self._info or self.refresh()

    @property
    def state(self) -> str:
        return self.refresh().state

    def stop(self, grace: float = 5.0) -> t.SandboxInfo:
        """SIGTERM its processes, SIGKILL after ``grace`` seconds; files stay until delete."""
        resp = self._call("StopSandbox", pb.StopSandboxRequest(sandbox_id=self.id, grace_period_ms=int(grace * 1000)),
                          timeout=grace + self.client.settings.timeout)
        self._info = t.sandbox_info(resp.sandbox)
        return self._info

    def delete(self) -> None:
        """Delete the sandbox and everything it left."""
        try:
            self._call("DeleteSandbox", pb.DeleteSandboxRequest(sandbox_id=self.id))
        finally:
            self._release()

    def commit(self, name: str = "", fmt: str = "") -> str:
        """Snapshot to an image (docker) or archive (local); returns a reference usable as ``image``."""
        fmt_value = {"": 0, "image": 1, "archive": 2}[fmt]
        resp = self._call("CommitSandbox", pb.CommitSandboxRequest(sandbox_id=self.id, name=name, format=fmt_value),  # type: ignore[arg-type]
                          timeout=600)
        return str(resp.image)

    def stats(self) -> t.SandboxStats:
        return t.sandbox_stats(self._call("GetSandboxStats", pb.GetSandboxStatsRequest(sandbox_id=self.id)).stats)

    def network_policy(self) -> builtins.list[tuple[str, int]]:
        """The egress allow-list in force, as (host, port) pairs (port 0 = any)."""
        resp = self._call("GetNetworkPolicy", pb.GetNetworkPolicyRequest(sandbox_id=self.id))
        return [(r.host, r.port) for r in resp.policy.allow]

    def set_network_policy(self, allow: Iterable[str | tuple[str, int]]) -> None:
        """Replace the egress allow-list (deny by default; [] blocks everything)."""
        self._call("SetNetworkPolicy", pb.SetNetworkPolicyRequest(
            sandbox_id=self.id, policy=pb.NetworkPolicy(allow=rq.egress_rules(allow))))

    # -- commands ------------------------------------------------------------------------------
    def exec(
        self, command: str | Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str = "",
        timeout: float | None = None, idle_timeout: float | None = None, stdin: bytes | str | None = None,
        max_output_bytes: int | None = None, background: bool = False, exec_id: str = "",
    ) -> t.ExecResult:
        """Run a command (a shell line or an argv list) and return its result."""
        spec = rq.exec_spec(command, env=env, cwd=cwd, timeout=timeout, idle_timeout=idle_timeout, stdin=stdin,
                            max_output_bytes=max_output_bytes, background=background)
        resp = self._call("Exec", pb.ExecRequest(sandbox_id=self.id, spec=spec, exec_id=exec_id),
                          rq.rpc_deadline(timeout, self.client.settings.timeout))
        return t.exec_result(resp.result)

    def exec_stream(
        self, command: str | Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str = "",
        timeout: float | None = None, idle_timeout: float | None = None, stdin: bytes | str | None = None,
        exec_id: str = "",
    ) -> Iterator[t.ExecEvent]:
        """Run a command and yield its output as it comes, then an "exit" event with the result."""
        spec = rq.exec_spec(command, env=env, cwd=cwd, timeout=timeout, idle_timeout=idle_timeout, stdin=stdin)
        for ev in self.client.stream("ExecStream", pb.ExecStreamRequest(sandbox_id=self.id, spec=spec, exec_id=exec_id),
                                     rq.rpc_deadline(timeout, 24 * 3600)):
            yield t.exec_event(ev)

    def signal(self, *, exec_id: str = "", pid: int = 0, signal: int = 2) -> bool:
        """Signal a running command by exec id or pid."""
        resp = self._call("SignalProcess", pb.SignalProcessRequest(sandbox_id=self.id, exec_id=exec_id, pid=pid,
                                                                   signal=signal))
        return bool(resp.delivered)

    def session(self, session_id: str = "", *, shell: str = "", env: Mapping[str, str] | None = None,
                cwd: str = "") -> Session:
        """Open a persistent shell session."""
        resp = self._call("CreateSession", pb.CreateSessionRequest(
            sandbox_id=self.id, spec=pb.SessionSpec(session_id=session_id, shell=shell, env=dict(env or {}), cwd=cwd)))
        return Session(self, resp.session_id)

    # -- files ---------------------------------------------------------------------------------
    def upload(self, local_path: str | os.PathLike[str], remote_path: str, mode: int = 0) -> int:
        """Upload a file (or a directory, as tar) of any size; returns the bytes sent. SHA-256 checked."""
        src = prepare_upload(local_path)
        try:
            resp = self.client.call("UploadFile", upload_messages(src, self.id, remote_path, mode),
                                                 timeout=max(self.client.settings.timeout, src.size / 2**20))
            check_upload(src, resp)
            return src.size
        finally:
            src.cleanup()

    def download(self, remote_path: str, local_path: str | os.PathLike[str]) -> Path:
        """Download a file (or a directory, extracted from tar) to ``local_path``; SHA-256 checked."""
        sink = DownloadSink(local_path)
        try:
            for part in self.client.stream("DownloadFile", pb.DownloadFileRequest(sandbox_id=self.id, path=remote_path),
                                           timeout=24 * 3600):
                sink.feed(part)
        except BaseException:
            sink.abort()
            raise
        return sink.finish()

    def read(self, path: str) -> bytes:
        """The whole content of a file."""
        out, offset = bytearray(), 0
        while True:
            resp = self._call("ReadFile", pb.ReadFileRequest(sandbox_id=self.id, path=path, offset=offset))
            out += resp.data
            offset += len(resp.data)
            if resp.eof or not resp.data:
                return bytes(out)

    def write(self, path: str, data: bytes | str, mode: int = 0, append: bool = False) -> int:
        """Write a small file (≤ 4 MiB; use upload for more); parents are created. Returns its size."""
        raw = data.encode() if isinstance(data, str) else data
        resp = self._call("WriteFile", pb.WriteFileRequest(sandbox_id=self.id, path=path, data=raw, mode=mode,
                                                           append=append))
        return int(resp.size)

    def ls(self, path: str, recursive: bool = False) -> builtins.list[t.FileEntry]:
        """Entries of a directory, sorted by path."""
        out: builtins.list[t.FileEntry] = []
        token = ""
        while True:
            resp = self._call("ListFiles", pb.ListFilesRequest(
                sandbox_id=self.id, path=path, recursive=recursive, page=common_pb2.PageRequest(page_token=token)))
            out.extend(t.file_entry(f) for f in resp.files)
            token = resp.page.next_page_token
            if not token:
                return out

    # -- context manager -----------------------------------------------------------------------
    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()

    def __repr__(self) -> str:
        return f"Sandbox({self.id!r})"
