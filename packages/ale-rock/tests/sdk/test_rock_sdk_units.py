"""SDK pieces that need no server: argument parsing, error mapping, transfer checksums."""

from __future__ import annotations

import hashlib
from pathlib import Path

import grpc
import pytest
from ale_proto.errors import ERROR_METADATA_KEY, make_error
from ale_proto.v1 import common_pb2, sandbox_pb2
from ale_rock import (
    ChecksumMismatch,
    InvalidArgument,
    QuotaExceeded,
    SandboxLost,
    Unauthenticated,
    Unavailable,
)
from ale_rock.sdk import requests as rq
from ale_rock.sdk.client import Client
from ale_rock.sdk.errors import from_rpc_error
from ale_rock.sdk.files import DownloadSink, prepare_upload, upload_messages


def test_sizes_and_resources() -> None:
    assert rq.parse_size("512Mi", "f") == 512 * 2**20
    assert rq.parse_size("2G", "f") == 2 * 2**30
    assert rq.parse_size(1024, "f") == 1024
    for bad in ("lots", "-1", -5):
        with pytest.raises(InvalidArgument) as e:
            rq.parse_size(bad, "spec.resources.memory_bytes")
        assert e.value.field == "spec.resources.memory_bytes"
    req = rq.create_request(cpu=0.25, memory="64Mi", ttl=60, allow=["pypi.org:443", "example.com", ("h", 80)])
    assert req.spec.resources.cpu_millis == 250 and req.spec.ttl_seconds == 60
    assert [(r.host, r.port) for r in req.spec.network.allow] == [("pypi.org", 443), ("example.com", 0), ("h", 80)]
    with pytest.raises(InvalidArgument) as e:
        rq.create_request(cpu=-1)
    assert e.value.field == "spec.resources.cpu_millis"
    with pytest.raises(InvalidArgument):
        rq.create_request(backend="kvm")
    spec = rq.exec_spec(["ls", "-l"], timeout=1.5, stdin="x")
    assert list(spec.argv) == ["ls", "-l"] and spec.timeout_ms == 1500 and spec.stdin == b"x"


class _FakeRpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, detail: common_pb2.ErrorDetail | None) -> None:
        self._code, self._detail = code, detail

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return "details"

    def trailing_metadata(self) -> tuple[tuple[str, bytes], ...]:
        return ((ERROR_METADATA_KEY, self._detail.SerializeToString()),) if self._detail else ()


def test_errors_are_typed_from_the_error_detail() -> None:
    e = from_rpc_error(_FakeRpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, make_error(
        common_pb2.ERROR_CODE_RESOURCE_EXHAUSTED, "over", "", quota="max_sandboxes")))
    assert isinstance(e, QuotaExceeded) and e.quota == "max_sandboxes"
    e = from_rpc_error(_FakeRpcError(grpc.StatusCode.INVALID_ARGUMENT, make_error(
        common_pb2.ERROR_CODE_INVALID_ARGUMENT, "bad", "spec.image")))
    assert isinstance(e, InvalidArgument) and e.field == "spec.image" and "spec.image" in str(e)
    e = from_rpc_error(_FakeRpcError(grpc.StatusCode.UNAVAILABLE, make_error(common_pb2.ERROR_CODE_LOST, "gone")))
    assert isinstance(e, SandboxLost) and isinstance(e, Unavailable)
    e = from_rpc_error(_FakeRpcError(grpc.StatusCode.UNAVAILABLE, None), "10.0.0.1:7700")
    assert isinstance(e, Unavailable) and "10.0.0.1:7700" in str(e)


def test_api_key_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ALE_ROCK_API_KEY", raising=False)
    with pytest.raises(Unauthenticated):
        Client("127.0.0.1:1")
    monkeypatch.setenv("ALE_ROCK_API_KEY", "k")
    monkeypatch.setenv("ALE_ROCK_ADDRESS", "127.0.0.1:9")
    c = Client()
    assert c.address == "127.0.0.1:9" and c.settings.metadata == (("authorization", "Bearer k"),)
    c.close()


def test_upload_stream_and_download_checksum(tmp_path: Path) -> None:
    f = tmp_path / "f.bin"
    f.write_bytes(b"x" * (3 * 2**20 + 5))
    src = prepare_upload(f)
    msgs = list(upload_messages(src, "sb-000000000000", "/w/f.bin", 0))
    assert msgs[0].header.sha256 == hashlib.sha256(f.read_bytes()).hexdigest() and msgs[0].header.size == src.size
    assert b"".join(m.chunk for m in msgs[1:]) == f.read_bytes() and len(msgs) == 5
    sink = DownloadSink(tmp_path / "out.bin")
    sink.feed(sandbox_pb2.DownloadFileResponse(info=sandbox_pb2.FileInfo(path="/w/f.bin")))
    sink.feed(sandbox_pb2.DownloadFileResponse(chunk=b"abc"))
    sink.feed(sandbox_pb2.DownloadFileResponse(sha256="0" * 64))
    with pytest.raises(ChecksumMismatch):
        sink.finish()
    assert not (tmp_path / "out.bin").exists()
    sink = DownloadSink(tmp_path / "out.bin")
    sink.feed(sandbox_pb2.DownloadFileResponse(chunk=b"abc"))
    sink.feed(sandbox_pb2.DownloadFileResponse(sha256=hashlib.sha256(b"abc").hexdigest()))
    assert sink.finish().read_bytes() == b"abc"
    tree = tmp_path / "tree"
    (tree / "d").mkdir(parents=True)
    (tree / "d" / "x").write_text("1")
    tar_src = prepare_upload(tree)
    assert tar_src.is_tar and tar_src.temporary
    tar_src.cleanup()
    assert not tar_src.path.exists()


def test_blocking_and_asyncio_sdks_are_one_set_of_operations() -> None:
    """Every public method of the blocking SDK is the asyncio one's operation: same op, same signature."""
    import inspect

    from ale_rock.sdk import AsyncSandbox, AsyncSession, Sandbox, Session

    for sync_cls, async_cls in ((Sandbox, AsyncSandbox), (Session, AsyncSession)):
        public = {n for n in dir(async_cls) if not n.startswith("_")}
        assert public - {"state"} <= {n for n in dir(sync_cls) if not n.startswith("_")}
        for name in public - {"info"}:
            a, s = inspect.getattr_static(async_cls, name), inspect.getattr_static(sync_cls, name)
            a, s = getattr(a, "__func__", a), getattr(s, "__func__", s)
            assert a.__wrapped__ is s.__wrapped__, name  # both wrap the same operation of sdk/ops.py
            params = [inspect.signature(getattr(c, name)).parameters for c in (async_cls, sync_cls)]
            assert params[0] == params[1], name
    assert str(inspect.signature(Sandbox.exec_stream).return_annotation) == "Iterator[t.ExecEvent]"
    assert str(inspect.signature(AsyncSandbox.read).return_annotation) == "bytes"


def test_a_failed_step_runs_the_operation_cleanup_on_both_stacks() -> None:
    """The drivers throw a step's error into the operation: its finally/except clauses run, then it propagates."""
    import asyncio

    from ale_rock.sdk.steps import Call, Close, adrive, drive

    class Blocking:
        closed = 0

        def call(self, method: str, request: object, timeout: float | None) -> object:
            raise Unavailable("down")

        def close(self) -> None:
            self.closed += 1

    class Asyncio(Blocking):
        async def call(self, method: str, request: object, timeout: float | None) -> object:  # type: ignore[override]
            raise Unavailable("down")

        async def close(self) -> None:  # type: ignore[override]
            self.closed += 1

    def op(client: object):  # type: ignore[no-untyped-def]
        try:
            yield Call(client, "GetSandbox", None)
        finally:
            yield Close(client)

    b, a = Blocking(), Asyncio()
    with pytest.raises(Unavailable):
        drive(op(b))
    with pytest.raises(Unavailable):
        asyncio.run(adrive(op(a)))
    assert (b.closed, a.closed) == (1, 1)
