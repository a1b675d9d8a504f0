"""How the SDK is written once for both blocking and asyncio code.

Each SDK operation (``ops.py``) is a generator that *yields* the RPCs it needs as plain step
objects and receives their results; it never does I/O itself. Two small drivers run those
generators: :func:`blocking` over a :class:`~ale_rock.sdk.client.Client` (gRPC's blocking stack)
and :func:`awaitable` over an :class:`~ale_rock.sdk.client.AsyncClient` (``grpc.aio``). A failed
step is thrown back into the generator, so its ``try``/``finally`` clean-ups run on both stacks.

This keeps each transport native (no event-loop thread behind the blocking SDK, interceptors on
a blocking channel still see every call) while the logic exists once.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Iterator
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    """A unary (or client-streaming) RPC on ``client``; the step's result is the response."""

    client: Any
    method: str
    request: Any
    timeout: float | None = None


@dataclass(frozen=True)
class Drain:
    """A server-streaming RPC consumed whole: ``feed`` gets each message; the result is None."""

    client: Any
    method: str
    request: Any
    timeout: float | None
    feed: Callable[[Any], None]


@dataclass(frozen=True)
class Close:
    """Close ``client`` (a connection the operation opened itself)."""

    client: Any


@dataclass(frozen=True)
class Stream(Generic[T]):
    """A server-streaming RPC handed to the caller item by item, each passed through ``convert``."""

    client: Any
    method: str
    request: Any
    timeout: float | None
    convert: Callable[[Any], T]


Step = Call | Drain | Close
Op = Generator[Step, Any, R]
"""An SDK operation: yields steps, returns the operation's result."""


def _perform(step: Step) -> Any:
    if isinstance(step, Call):
        return step.client.call(step.method, step.request, step.timeout)
    if isinstance(step, Drain):
        for item in step.client.stream(step.method, step.request, step.timeout):
            step.feed(item)
        return None
    step.client.close()
    return None


async def _aperform(step: Step) -> Any:
    if isinstance(step, Call):
        return await step.client.call(step.method, step.request, step.timeout)
    if isinstance(step, Drain):
        async for item in step.client.stream(step.method, step.request, step.timeout):
            step.feed(item)
        return None
    await step.client.close()
    return None


def drive(op: Op[R]) -> R:
    """Run an operation on the blocking stack."""
    try:
        step = next(op)
        while True:
            try:
                result = _perform(step)
            except BaseException as e:  # noqa: BLE001 - the operation decides; it re-raises
                step = op.throw(e)
            else:
                step = op.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def adrive(op: Op[R]) -> R:
    """Run an operation on the asyncio stack."""
    try:
        step = next(op)
        while True:
            try:
                result = await _aperform(step)
            except BaseException as e:  # noqa: BLE001 - the operation decides; it re-raises
                step = op.throw(e)
            else:
                step = op.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def blocking(op: Callable[P, Op[R]]) -> Callable[P, R]:
    """The blocking method of an operation."""

    @functools.wraps(op)
    def method(*args: P.args, **kwargs: P.kwargs) -> R:
        return drive(op(*args, **kwargs))

    return method


def awaitable(op: Callable[P, Op[R]]) -> Callable[P, Coroutine[Any, Any, R]]:
    """The asyncio method of an operation."""

    @functools.wraps(op)
    async def method(*args: P.args, **kwargs: P.kwargs) -> R:
        return await adrive(op(*args, **kwargs))

    return method


def iterating(op: Callable[P, Stream[T]]) -> Callable[P, Iterator[T]]:
    """The blocking method of a streaming operation (a generator)."""

    @functools.wraps(op)
    def method(*args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        s = op(*args, **kwargs)
        for item in s.client.stream(s.method, s.request, s.timeout):
            yield s.convert(item)

    return method


def aiterating(op: Callable[P, Stream[T]]) -> Callable[P, AsyncIterator[T]]:
    """The asyncio method of a streaming operation (an async generator)."""

    @functools.wraps(op)
    async def method(*args: P.args, **kwargs: P.kwargs) -> AsyncIterator[T]:
        s = op(*args, **kwargs)
        async for item in s.client.stream(s.method, s.request, s.timeout):
            yield s.convert(item)

    return method
