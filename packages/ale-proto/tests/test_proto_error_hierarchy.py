"""The one exception hierarchy: a server raises X, the client catches the same X (sync and asyncio gRPC)."""

from __future__ import annotations

import asyncio
import pickle
import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from ale_proto import errors
from ale_proto.errors import AleError, ErrorCode
from ale_proto.v1 import trainer_pb2, trainer_pb2_grpc

CLASSES = sorted(errors._BY_NAME.values(), key=lambda c: c.__name__)


def _raise(job_id: str) -> None:
    """The server side: raise the class named by the request, with a field and metadata."""
    cls = errors._BY_NAME[job_id]
    raise cls(f"{job_id} happened", "spec.thing", {"quota": "cpu"})


class _Sync(trainer_pb2_grpc.TrainerServiceServicer):
    def GetJob(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC method name
        try:
            _raise(request.job_id)
        except AleError as e:
            errors.abort_with(context, e)


class _Async(trainer_pb2_grpc.TrainerServiceServicer):
    async def GetJob(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC method name
        try:
            _raise(request.job_id)
        except AleError as e:
            await errors.abort_with(context, e)


@pytest.fixture(scope="module")
def sync_address() -> Iterator[str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trainer_pb2_grpc.add_TrainerServiceServicer_to_server(_Sync(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(grace=None)


@pytest.fixture(scope="module")
def aio_address() -> Iterator[str]:
    """An asyncio server on its own loop thread (the transport the Admin uses)."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def serve() -> None:
        server = grpc.aio.server()
        trainer_pb2_grpc.add_TrainerServiceServicer_to_server(_Async(), server)
        box["port"] = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        box["server"] = server
        ready.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(serve(), loop).result(10)
    yield f"127.0.0.1:{box['port']}"
    asyncio.run_coroutine_threadsafe(box["server"].stop(None), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


def _check(err: AleError, cls: type[AleError]) -> None:
    assert type(err) is cls
    assert err.code == cls.code and err.field == "spec.thing" and err.message == f"{cls.__name__} happened"
    assert err.metadata == {"quota": "cpu"}  # the class name travels beside, not inside, the metadata


@pytest.mark.parametrize("transport", ["sync", "aio"])
def test_server_raises_x_client_catches_x(transport: str, sync_address: str, aio_address: str) -> None:
    address = sync_address if transport == "sync" else aio_address
    with grpc.insecure_channel(address) as channel:
        stub = trainer_pb2_grpc.TrainerServiceStub(channel)
        for cls in CLASSES:
            with pytest.raises(grpc.RpcError) as info:
                stub.GetJob(trainer_pb2.GetJobRequest(job_id=cls.__name__), timeout=5)
            assert info.value.code() == errors.status_code_of(cls.code)
            with pytest.raises(cls) as caught:
                raise errors.error_from_rpc(info.value)
            _check(caught.value, cls)


def test_aio_client_rebuilds_the_same_class(aio_address: str) -> None:
    async def run() -> None:
        async with grpc.aio.insecure_channel(aio_address) as channel:
            stub = trainer_pb2_grpc.TrainerServiceStub(channel)
            for cls in (errors.FileNotFound, errors.SandboxLost, errors.EnvNotFound):
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await stub.GetJob(trainer_pb2.GetJobRequest(job_id=cls.__name__), timeout=5)
                _check(errors.error_from_rpc(info.value), cls)

    asyncio.run(run())


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_catching_the_base_catches_every_class(cls: type[AleError]) -> None:
    with pytest.raises(AleError):
        raise cls("boom")
    with pytest.raises(errors.class_for_code(cls.code)):  # and the class of its code
        raise cls("boom")
    back = pickle.loads(pickle.dumps(cls("m", "f", {"k": "v"})))  # crosses process pools intact
    assert type(back) is cls and (back.message, back.field, back.metadata) == ("m", "f", {"k": "v"})


def test_one_class_per_code_and_code_first_construction() -> None:
    for code in ErrorCode:
        if code is ErrorCode.UNSPECIFIED:
            continue
        err = AleError(code, "why", field="f")
        assert type(err) is errors.class_for_code(code) and err.code == code and err.field == "f"
        assert err.code == code.name  # the SDK's string codes still compare equal
    assert isinstance(errors.SandboxLost("x"), errors.Unavailable)
    assert isinstance(errors.FileNotFound("x", "path"), FileNotFoundError)
    assert not isinstance(errors.FileNotFound("x", "path"), errors.SandboxNotFound)
    assert isinstance(errors.SandboxNotFound("x"), KeyError) and str(errors.SandboxNotFound("x")) == "x"


def test_a_class_that_contradicts_the_code_is_not_trusted() -> None:
    detail = errors.make_error(ErrorCode.UNAVAILABLE, "m", "path", error_type="FileNotFound")
    assert type(errors.error_from_detail(detail)) is errors.Unavailable
    # A server that sends no class name (the Rocklet): a NOT_FOUND on a path field is a file.
    assert type(errors.error_from_detail(errors.make_error(ErrorCode.NOT_FOUND, "m", "path"))) is errors.FileNotFound
