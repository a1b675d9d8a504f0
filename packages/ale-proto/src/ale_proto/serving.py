"""Standard services every ALE gRPC server exposes: health checking and reflection.

Needs the ``ale-proto[server]`` extra (grpcio-health-checking, grpcio-reflection); imported
lazily so that plain clients of the contract need only protobuf and grpcio.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def add_standard_services(server: Any, service_full_names: Iterable[str]) -> Any:
    """Add health checking (every named service SERVING) and reflection to ``server``.

    Works for ``grpc.server`` and ``grpc.aio.server``. Returns the health servicer so a server can
    flip services to NOT_SERVING during shutdown.
    """
    try:
        from grpc_health.v1 import health, health_pb2, health_pb2_grpc
        from grpc_reflection.v1alpha import reflection
    except ImportError as e:  # pragma: no cover - depends on installed extras
        raise ImportError("install ale-proto[server] for health checking and reflection") from e

    names = list(service_full_names)
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    for name in ["", *names]:
        servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    _add_reflection(
        server, [*names, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME]
    )
    return servicer


REFLECTION_V1 = "grpc.reflection.v1.ServerReflection"
"""The stable reflection service. grpcio-reflection ships only v1alpha, but current grpcurl,
Postman and grpc-js/C++ reflection clients ask for v1 first (and get UNIMPLEMENTED)."""


def _add_reflection(server: Any, names: list[str]) -> None:
    """Serve reflection as both ``grpc.reflection.v1`` and ``grpc.reflection.v1alpha``.

    The two protocols are the same messages under two package names (identical field numbers),
    so one servicer answers both: v1 is a second route to the v1alpha handler, and a renamed copy
    of the v1alpha file is added to the descriptor pool so v1 can describe itself too.
    """
    import grpc
    from grpc_reflection.v1alpha import reflection, reflection_pb2

    _register_v1_descriptor(reflection_pb2.DESCRIPTOR)
    names = [*names, REFLECTION_V1]
    servicer: Any = (
        reflection.aio.ReflectionServicer(names)
        if isinstance(server, grpc.aio.Server)
        else reflection.ReflectionServicer(names)
    )
    method = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    for service in (reflection.SERVICE_NAME, REFLECTION_V1):
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service, {"ServerReflectionInfo": method}),)
        )


def _register_v1_descriptor(v1alpha_file: Any) -> None:
    """Add ``grpc/reflection/v1/reflection.proto`` (v1alpha's file, renamed) to the default pool."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    pool = descriptor_pool.Default()
    try:
        pool.FindServiceByName(REFLECTION_V1)
        return  # already there (a newer grpcio-reflection, or a second server in this process)
    except KeyError:
        pass
    proto = descriptor_pb2.FileDescriptorProto()
    v1alpha_file.CopyToProto(proto)
    proto.name = "grpc/reflection/v1/reflection.proto"
    proto.package = "grpc.reflection.v1"
    for message in proto.message_type:
        for field in message.field:
            if field.HasField("type_name"):
                field.type_name = field.type_name.replace(".grpc.reflection.v1alpha.", ".grpc.reflection.v1.")
    for service in proto.service:
        for m in service.method:
            m.input_type = m.input_type.replace(".grpc.reflection.v1alpha.", ".grpc.reflection.v1.")
            m.output_type = m.output_type.replace(".grpc.reflection.v1alpha.", ".grpc.reflection.v1.")
    pool.Add(proto)


# -- binding: one server per port ---------------------------------------------------------------

NO_REUSEPORT = ("grpc.so_reuseport", 0)
"""gRPC's default enables SO_REUSEPORT, so a second server on a taken port starts and silently
shares it (the kernel splits connections between the two). Every ALE server turns it off."""


class RunningServer:
    """A started gRPC server on ``address`` (``bind:port``): :meth:`stop` stops serving, then
    :meth:`close` releases what it served (a subclass's override); :meth:`wait` blocks until it stops."""

    def __init__(self, server: Any, port: int, bind: str) -> None:
        self.server, self.port = server, port
        self.address = f"{bind}:{port}"

    def close(self) -> None:
        """Release what the server served, once it no longer serves (nothing here)."""

    def stop(self, grace: float = 1.0) -> None:
        """Stop serving (``grace`` seconds for calls in flight), then :meth:`close`."""
        self.server.stop(grace).wait(grace + 1)
        self.close()

    def wait(self) -> None:
        """Block until the server stops."""
        self.server.wait_for_termination()


class PortInUse(SystemExit):
    """A server could not bind its port because another process holds it.

    A ``SystemExit`` so a CLI that does not catch it ends with exactly one line naming the port
    (no traceback) and a non-zero status; in-process callers can still catch it by type.
    """

    def __init__(self, address: str, reason: str = "already in use") -> None:
        self.address = address
        super().__init__(f"error: cannot listen on {address}: port {_port_of(address)} is {reason}")


def _port_of(address: str) -> str:
    return address.rpartition(":")[2] or address


def _split(address: str) -> tuple[str, int] | None:
    """(host, port) of a TCP ``host:port`` address; None for unix sockets and unparsable ones."""
    if address.startswith("unix:"):
        return None
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    try:
        return host, int(port)
    except ValueError:
        return None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on at ``host`` right now (the kernel's pick; free until someone binds it).

    For launchers that must pass a port on a command line, and for tests that need an address
    nothing answers on. A server that can bind port 0 itself should do that instead (no race).
    """
    import socket

    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_is_free(address: str) -> bool:
    """True when a plain listener (no SO_REUSEPORT) could bind ``host:port`` right now.

    A listener that set SO_REUSEPORT (any gRPC server with default options) still refuses a
    socket that did not, so this also catches servers built by other tools.
    """
    import errno
    import socket

    split = _split(address)
    if split is None or split[1] == 0:
        return True
    host, port = split
    if host in ("", "*"):
        host = "::"
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError:
        return True  # let the server report an unresolvable host itself
    for family, kind, proto, _, sockaddr in infos[:1]:
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no owner
            try:
                s.bind(sockaddr)
            except OSError as e:
                if e.errno == errno.EADDRINUSE:
                    return False
                if e.errno != errno.EADDRNOTAVAIL:
                    raise
    return True


def bind(server: Any, address: str, credentials: Any = None) -> int:
    """``add_insecure_port`` (or ``add_secure_port`` with ``credentials``) that refuses a taken port.

    Raises :class:`PortInUse` when another process listens on the port; returns the bound port.
    Build the server with :data:`NO_REUSEPORT` in its options so a race between two starts cannot
    end with both bound either.
    """
    if not port_is_free(address):
        raise PortInUse(address)
    try:
        port = (
            server.add_secure_port(address, credentials)
            if credentials is not None
            else server.add_insecure_port(address)
        )
    except RuntimeError as e:  # grpcio >= 1.5x raises instead of returning 0
        raise PortInUse(address, f"not available ({e})") from None
    if not port:
        raise PortInUse(address, "not available")
    return int(port)


def construct_listener(address: str, factory: Any, *args: Any, **kwargs: Any) -> Any:
    """``factory(*args, **kwargs)`` for a listener that binds in its constructor (an HTTP server),
    with a taken port reported as :class:`PortInUse` instead of a traceback."""
    import errno

    if not port_is_free(address):
        raise PortInUse(address)
    try:
        return factory(*args, **kwargs)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise PortInUse(address) from None
        raise


# -- garbage requests: INVALID_ARGUMENT, not INTERNAL/UNKNOWN ----------------------------------


class _Undecodable:
    """What a strict deserializer returns for bytes that are not the request message."""

    def __init__(self, error: Exception) -> None:
        self.error = error


def _strict(deserializer: Any) -> Any:
    def parse(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception as e:  # noqa: BLE001 - any failure to parse is the client's fault
            return _Undecodable(e)

    return parse


_GARBAGE = "the request bytes do not decode as the method's request message"


def _wrap_handler(handler: Any, aio: bool) -> Any:
    """The handler with a deserializer that never raises and behaviours that answer an
    undecodable request with INVALID_ARGUMENT (gRPC itself says INTERNAL, or UNKNOWN on asyncio)."""
    import inspect

    import grpc

    if handler is None or handler.request_deserializer is None:
        return handler
    bad = grpc.StatusCode.INVALID_ARGUMENT
    streaming_in, streaming_out = bool(handler.request_streaming), bool(handler.response_streaming)
    attr, make = {
        (False, False): ("unary_unary", grpc.unary_unary_rpc_method_handler),
        (False, True): ("unary_stream", grpc.unary_stream_rpc_method_handler),
        (True, False): ("stream_unary", grpc.stream_unary_rpc_method_handler),
        (True, True): ("stream_stream", grpc.stream_stream_rpc_method_handler),
    }[(streaming_in, streaming_out)]
    behavior = getattr(handler, attr)
    if behavior is None:  # pragma: no cover - a handler always has its kind's behaviour
        return handler

    def check_sync(request: Any, context: Any) -> Any:
        if streaming_in:

            def requests() -> Any:
                for item in request:
                    if isinstance(item, _Undecodable):
                        context.abort(bad, _GARBAGE)
                    yield item

            return requests()
        if isinstance(request, _Undecodable):
            context.abort(bad, _GARBAGE)
        return request

    async def check_async(request: Any, context: Any) -> Any:
        if streaming_in:

            async def requests() -> Any:
                async for item in request:
                    if isinstance(item, _Undecodable):
                        await context.abort(bad, _GARBAGE)
                    yield item

            return requests()
        if isinstance(request, _Undecodable):
            await context.abort(bad, _GARBAGE)
        return request

    new: Any
    if aio and inspect.isasyncgenfunction(behavior):

        async def new(request: Any, context: Any) -> Any:
            async for item in behavior(await check_async(request, context), context):
                yield item

    elif aio and inspect.iscoroutinefunction(behavior):

        async def new(request: Any, context: Any) -> Any:
            return await behavior(await check_async(request, context), context)

    elif streaming_out and inspect.isgeneratorfunction(behavior):

        def new(request: Any, context: Any) -> Any:
            yield from behavior(check_sync(request, context), context)

    else:

        def new(request: Any, context: Any) -> Any:
            return behavior(check_sync(request, context), context)

    return make(
        new,
        request_deserializer=_strict(handler.request_deserializer),
        response_serializer=handler.response_serializer,
    )


def strict_requests() -> list[Any]:
    """Interceptors for ``grpc.server(interceptors=...)``: undecodable requests get INVALID_ARGUMENT."""
    import grpc

    class StrictRequests(grpc.ServerInterceptor):  # type: ignore[misc]
        def __init__(self) -> None:
            self.wrapped = _Wrapped(aio=False)

        def intercept_service(self, continuation: Any, handler_call_details: Any) -> Any:
            return self.wrapped(continuation(handler_call_details))

    return [StrictRequests()]


def strict_requests_aio() -> list[Any]:
    """:func:`strict_requests` for ``grpc.aio.server(interceptors=...)``."""
    import grpc

    class StrictRequestsAio(grpc.aio.ServerInterceptor):  # type: ignore[misc]
        def __init__(self) -> None:
            self.wrapped = _Wrapped(aio=True)

        async def intercept_service(self, continuation: Any, handler_call_details: Any) -> Any:
            return self.wrapped(await continuation(handler_call_details))

    return [StrictRequestsAio()]


class _Wrapped:
    """:func:`_wrap_handler`, once per method handler: a server hands the interceptor the same
    handler object for every call of a method, and building the wrapper per call cost a
    measurable share of a small call's CPU."""

    def __init__(self, aio: bool) -> None:
        self.aio = aio
        self.cache: dict[int, tuple[Any, Any]] = {}  # id(handler) -> (handler, wrapped): kept alive

    def __call__(self, handler: Any) -> Any:
        hit = self.cache.get(id(handler))
        if hit is not None and hit[0] is handler:
            return hit[1]
        wrapped = _wrap_handler(handler, self.aio)
        if handler is not None and len(self.cache) < 4096:
            self.cache[id(handler)] = (handler, wrapped)
        return wrapped
