"""How the SDK is written once for both blocking and asyncio code.

Each SDK operation (``ops.py``) is a generator that *yields* the RPCs it needs as plain step
objects and receives their results; it never does I/O itself. Two small drivers run those
generators: :func:`drive` over a :class:`~ale_rock.sdk.client.Client` (gRPC's blocking stack)
and :func:`adrive` over an :class:`~ale_rock.sdk.client.AsyncClient` (``grpc.aio``). A failed
step is thrown back into the generator, so its ``try``/``finally`` clean-ups run on both stacks.

This keeps each transport native (no event-loop thread behind the blocking SDK, interceptors on
a blocking channel still see every call) while the logic exists once.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator, Iterator
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


class Blocking:
    """Base of the blocking SDK's classes (their operations run on gRPC's blocking stack)."""


class Asyncio:
    """Base of the asyncio SDK's classes (their operations are coroutines on ``grpc.aio``)."""


SB = TypeVar("SB", bound=Blocking)
SA = TypeVar("SA", bound=Asyncio)


@dataclass(frozen=True)
class Call:
    """A unary (or client-streaming) RPC on ``client``; the step's result is the response."""

    client: Any
    method: str
    request: Any
    timeout: float | None = None


@dataclass(frozen=True)
class Close:
    """Close ``client`` (a connection the operation opened itself)."""

    client: Any


@dataclass(frozen=True)
class Stream(Generic[T]):
    """A server-streaming RPC, each message passed through ``convert``.

    Returned by a streaming operation, it is handed to the caller item by item; yielded as a step,
    it is consumed whole (``convert`` is then a sink, e.g. a download's) and its result is None.
    """

    client: Any
    method: str
    request: Any
    timeout: float | None
    convert: Callable[[Any], T]


@dataclass(frozen=True)
class Sleep:
    """Wait ``seconds`` (a retry's back-off)."""

    seconds: float


Step = Call | Stream[Any] | Close | Sleep
Op = Generator[Step, Any, R]
"""An SDK operation: yields steps, returns the operation's result."""


async def _blocking_perform(step: Step) -> Any:
    """Perform a step on the blocking stack (a coroutine that never suspends: see :func:`drive`)."""
    if isinstance(step, Call):
        return step.client.call(step.method, step.request, step.timeout)
    if isinstance(step, Stream):
        for item in step.client.stream(step.method, step.request, step.timeout):
            step.convert(item)
    elif isinstance(step, Sleep):
        time.sleep(step.seconds)
    else:
        step.client.close()
    return None


async def _asyncio_perform(step: Step) -> Any:
    if isinstance(step, Call):
        return await step.client.call(step.method, step.request, step.timeout)
    if isinstance(step, Stream):
        async for item in step.client.stream(step.method, step.request, step.timeout):
            step.convert(item)
    elif isinstance(step, Sleep):
        await asyncio.sleep(step.seconds)
    else:
        await step.client.close()
    return None


async def _run(op: Op[R], perform: Callable[[Step], Awaitable[Any]]) -> R:
    """Feed each step's result (or error) back into the operation until it returns."""
    try:
        step = next(op)
        while True:
            try:
                result = await perform(step)
            except BaseException as e:  # noqa: BLE001 - the operation decides; it re-raises
                step = op.throw(e)
            else:
                step = op.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def drive(op: Op[R]) -> R:
    """Run an operation on the blocking stack.

    The blocking performer never awaits anything, so the coroutine finishes on its first send.
    """
    coro = _run(op, _blocking_perform)
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("a blocking SDK step suspended")  # pragma: no cover - a bug in a performer


async def adrive(op: Op[R]) -> R:
    """Run an operation on the asyncio stack."""
    return await _run(op, _asyncio_perform)


def _documented(method: Any, op: Callable[..., Any], result: str) -> Any:
    """``method`` shows ``op``'s name, doc and parameters, with the result it really has (``help()``).

    ``result`` formats the type inside the operation's ``Op[...]``/``Stream[...]``, e.g. "Iterator[{}]".
    """
    functools.update_wrapper(method, op)
    sig = inspect.signature(op)
    inner = str(sig.return_annotation)
    if "[" in inner:
        inner = inner[inner.index("[") + 1 : -1]
    method.__signature__ = sig.replace(return_annotation=result.format(inner))
    return method


def blocking(op: Callable[P, Op[R]]) -> Callable[P, R]:
    """The blocking method of an operation."""

    def method(*args: P.args, **kwargs: P.kwargs) -> R:
        return drive(op(*args, **kwargs))

    return _documented(method, op, "{}")  # type: ignore[no-any-return]


def awaitable(op: Callable[P, Op[R]]) -> Callable[P, Coroutine[Any, Any, R]]:
    """The asyncio method of an operation."""

    async def method(*args: P.args, **kwargs: P.kwargs) -> R:
        return await adrive(op(*args, **kwargs))

    return _documented(method, op, "{}")  # type: ignore[no-any-return]


def iterating(op: Callable[P, Stream[T]]) -> Callable[P, Iterator[T]]:
    """The blocking method of a streaming operation (a generator)."""

    def method(*args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        s = op(*args, **kwargs)
        for item in s.client.stream(s.method, s.request, s.timeout):
            yield s.convert(item)

    return _documented(method, op, "Iterator[{}]")  # type: ignore[no-any-return]


def aiterating(op: Callable[P, Stream[T]]) -> Callable[P, AsyncIterator[T]]:
    """The asyncio method of a streaming operation (an async generator)."""

    async def method(*args: P.args, **kwargs: P.kwargs) -> AsyncIterator[T]:
        s = op(*args, **kwargs)
        async for item in s.client.stream(s.method, s.request, s.timeout):
            yield s.convert(item)

    return _documented(method, op, "AsyncIterator[{}]")  # type: ignore[no-any-return]
