"""Operations as methods of both SDKs: each descriptor here turns one operation of ``ops.py`` into
a blocking method on a :class:`~ale_rock.sdk.steps.Blocking` class and a coroutine (or async
iterator) on an :class:`~ale_rock.sdk.steps.Asyncio` one.

So the method table is written once (``ops.SandboxMethods``), and type checkers still see each
method's parameters and result on both sides (the overloads of ``__get__`` pick the side by the
type of the instance, or of the class for class-level operations).
"""

from __future__ import annotations

import functools
import types
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from ale_rock.sdk.steps import Asyncio, Blocking, Op, Stream, aiterating, awaitable, blocking, iterating

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
SB = TypeVar("SB", bound=Blocking)
SA = TypeVar("SA", bound=Asyncio)


class _Pair:
    """The blocking and the asyncio function of one operation, picked by the class they serve."""

    def __init__(self, op: Callable[..., Any], sync: Callable[..., Any], aio: Callable[..., Any]) -> None:
        self._sync, self._aio = sync, aio
        functools.update_wrapper(self, op)  # type: ignore[arg-type]  # name, doc, __wrapped__ (the operation)

    def _pick(self, owner: type[Any]) -> Callable[..., Any]:
        return self._aio if issubclass(owner, Asyncio) else self._sync

    def _bind(self, obj: object, owner: type[Any] | None) -> Any:
        cls = type(obj) if owner is None else owner
        return self._pick(cls) if obj is None else types.MethodType(self._pick(cls), obj)

    def _bind_class(self, owner: type[Any]) -> Any:
        return types.MethodType(self._pick(owner), owner)


class operation(_Pair, Generic[P, R]):  # noqa: N801 - used like a decorator
    """An operation on an instance (``sb.exec(...)``, ``session.run(...)``)."""

    def __init__(self, op: Callable[Concatenate[Any, P], Op[R]]) -> None:
        super().__init__(op, blocking(op), awaitable(op))

    @overload
    def __get__(self, obj: Blocking, owner: type[Any] | None = None) -> Callable[P, R]: ...

    @overload
    def __get__(self, obj: Asyncio, owner: type[Any] | None = None) -> Callable[P, Coroutine[Any, Any, R]]: ...

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Callable[..., Any]: ...

    def __get__(self, obj: object, owner: type[Any] | None = None) -> Any:
        return self._bind(obj, owner)


class stream_operation(_Pair, Generic[P, T]):  # noqa: N801 - used like a decorator
    """A streaming operation on an instance (``sb.exec_stream(...)``): an iterator or an async one."""

    def __init__(self, op: Callable[Concatenate[Any, P], Stream[T]]) -> None:
        super().__init__(op, iterating(op), aiterating(op))

    @overload
    def __get__(self, obj: Blocking, owner: type[Any] | None = None) -> Callable[P, Iterator[T]]: ...

    @overload
    def __get__(self, obj: Asyncio, owner: type[Any] | None = None) -> Callable[P, AsyncIterator[T]]: ...

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Callable[..., Any]: ...

    def __get__(self, obj: object, owner: type[Any] | None = None) -> Any:
        return self._bind(obj, owner)


class class_operation(_Pair, Generic[P, R]):  # noqa: N801 - used like classmethod
    """An operation on the class (``Sandbox.list(...)``)."""

    def __init__(self, op: Callable[Concatenate[Any, P], Op[R]]) -> None:
        super().__init__(op, blocking(op), awaitable(op))

    @overload
    def __get__(self, obj: object, owner: type[Blocking]) -> Callable[P, R]: ...

    @overload
    def __get__(self, obj: object, owner: type[Asyncio]) -> Callable[P, Coroutine[Any, Any, R]]: ...

    def __get__(self, obj: object, owner: type[Any]) -> Any:
        return self._bind_class(owner)


class class_stream_operation(_Pair, Generic[P, T]):  # noqa: N801 - used like classmethod
    """A streaming operation on the class (``Sandbox.watch(...)``)."""

    def __init__(self, op: Callable[Concatenate[Any, P], Stream[T]]) -> None:
        super().__init__(op, iterating(op), aiterating(op))

    @overload
    def __get__(self, obj: object, owner: type[Blocking]) -> Callable[P, Iterator[T]]: ...

    @overload
    def __get__(self, obj: object, owner: type[Asyncio]) -> Callable[P, AsyncIterator[T]]: ...

    def __get__(self, obj: object, owner: type[Any]) -> Any:
        return self._bind_class(owner)


class constructor(_Pair, Generic[P]):  # noqa: N801 - used like classmethod
    """A class-level operation returning an instance of the class it is called on (``create``,
    ``connect``): type checkers see ``Sandbox.create(...) -> Sandbox`` and
    ``AsyncSandbox.create(...) -> Coroutine[..., AsyncSandbox]``."""

    def __init__(self, op: Callable[Concatenate[Any, P], Op[Any]]) -> None:
        super().__init__(op, blocking(op), awaitable(op))

    @overload
    def __get__(self, obj: object, owner: type[SB]) -> Callable[P, SB]: ...

    @overload
    def __get__(self, obj: object, owner: type[SA]) -> Callable[P, Coroutine[Any, Any, SA]]: ...

    def __get__(self, obj: object, owner: type[Any]) -> Any:
        return self._bind_class(owner)
