"""Create many sandboxes at once with bounded concurrency and retries.

One sandbox's create-with-retries is an operation (``steps.py``), written once; the blocking group
runs those on a thread pool, the asyncio group gathers them under a semaphore.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

from ale_rock.sdk import ops
from ale_rock.sdk.async_sandbox import AsyncSandbox
from ale_rock.sdk.client import AsyncClient, Client
from ale_rock.sdk.errors import DeadlineExceeded, SandboxStartFailed, Unavailable
from ale_rock.sdk.sandbox import Sandbox
from ale_rock.sdk.steps import Op, Sleep, adrive, drive

RETRYABLE = (Unavailable, DeadlineExceeded, SandboxStartFailed)
"""Errors worth another try (a lost worker, a timeout, a start that failed). Quota and argument
errors are not retried: they would fail the same way."""

SB = TypeVar("SB", bound=ops.SandboxMethods)


def _backoff(attempt: int) -> float:
    return min(0.2 * 2**attempt, 5.0)


def create_with_retries(cls: Any, client: Any, retries: int, create_kwargs: dict[str, Any]) -> Op[Any]:
    """Create one sandbox, retrying :data:`RETRYABLE` errors with exponential back-off."""
    for attempt in range(retries + 1):
        try:
            return (yield from ops.create(cls, client=client, **create_kwargs))
        except RETRYABLE:
            if attempt == retries:
                raise
            yield Sleep(_backoff(attempt))
    raise AssertionError("unreachable")


def _first_error(results: Sequence[Any]) -> BaseException | None:
    return next((r for r in results if isinstance(r, BaseException)), None)


class _Group(Generic[SB]):
    """N sandboxes sharing one client."""

    def __init__(self, sandboxes: list[SB], client: Any, owns_client: bool) -> None:
        self.sandboxes = sandboxes
        self.client = client
        self._owns = owns_client

    def __iter__(self) -> Iterator[SB]:
        return iter(self.sandboxes)

    def __len__(self) -> int:
        return len(self.sandboxes)

    def __getitem__(self, i: int) -> SB:
        return self.sandboxes[i]


class SandboxGroup(_Group[Sandbox]):
    """N blocking sandboxes sharing one client; a context manager deletes them all."""

    @classmethod
    def create(cls, n: int, *, concurrency: int = 8, retries: int = 2, client: Client | None = None,
               address: str | None = None, api_key: str | None = None, **create_kwargs: Any) -> SandboxGroup:
        """Create ``n`` sandboxes (``create_kwargs`` as for :meth:`Sandbox.create`). On a failure that
        survives its retries, the ones already made are deleted and the error is raised."""
        owns = client is None
        c = client or Client(address, api_key)

        def one(_: int) -> Any:
            try:
                return drive(create_with_retries(Sandbox, c, retries, create_kwargs))
            except BaseException as e:  # noqa: BLE001 - collected, so every made sandbox is cleaned up
                return e

        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            results = list(pool.map(one, range(n)))
        group = cls([r for r in results if isinstance(r, Sandbox)], c, owns)
        if (error := _first_error(results)) is not None:
            group.delete_all()
            raise error
        return group

    def delete_all(self) -> None:
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda s: s.delete(), self.sandboxes))
        self.sandboxes = []
        if self._owns:
            self.client.close()
            self._owns = False

    def __enter__(self) -> SandboxGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete_all()


class AsyncSandboxGroup(_Group[AsyncSandbox]):
    """N asyncio sandboxes sharing one client; ``async with`` deletes them all."""

    @classmethod
    async def create(cls, n: int, *, concurrency: int = 32, retries: int = 2, client: AsyncClient | None = None,
                     address: str | None = None, api_key: str | None = None,
                     **create_kwargs: Any) -> AsyncSandboxGroup:
        owns = client is None
        c = client or AsyncClient(address, api_key)
        gate = asyncio.Semaphore(max(1, concurrency))

        async def one() -> Any:
            async with gate:
                return await adrive(create_with_retries(AsyncSandbox, c, retries, create_kwargs))

        results = await asyncio.gather(*(one() for _ in range(n)), return_exceptions=True)
        group = cls([r for r in results if isinstance(r, AsyncSandbox)], c, owns)
        if (error := _first_error(results)) is not None:
            await group.delete_all()
            raise error
        return group

    async def delete_all(self, concurrency: int = 32) -> None:
        gate = asyncio.Semaphore(concurrency)

        async def one(s: AsyncSandbox) -> None:
            async with gate:
                await s.delete()

        await asyncio.gather(*(one(s) for s in self.sandboxes), return_exceptions=True)
        self.sandboxes = []
        if self._owns:
            await self.client.close()
            self._owns = False

    async def __aenter__(self) -> AsyncSandboxGroup:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.delete_all()
