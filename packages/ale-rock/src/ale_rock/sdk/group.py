"""Create many sandboxes at once with bounded concurrency and retries."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ale_rock.sdk.async_sandbox import AsyncSandbox
from ale_rock.sdk.client import AsyncClient, Client
from ale_rock.sdk.errors import DeadlineExceeded, SandboxStartFailed, Unavailable
from ale_rock.sdk.sandbox import Sandbox

RETRYABLE = (Unavailable, DeadlineExceeded, SandboxStartFailed)
"""Errors worth another try (a lost worker, a timeout, a start that failed). Quota and argument
errors are not retried: they would fail the same way."""


def _backoff(attempt: int) -> float:
    return min(0.2 * 2**attempt, 5.0)


class SandboxGroup:
    """N blocking sandboxes sharing one client; a context manager deletes them all."""

    def __init__(self, sandboxes: list[Sandbox], client: Client, owns_client: bool) -> None:
        self.sandboxes = sandboxes
        self.client = client
        self._owns = owns_client

    @classmethod
    def create(cls, n: int, *, concurrency: int = 8, retries: int = 2, client: Client | None = None,
               address: str | None = None, api_key: str | None = None, **create_kwargs: Any) -> SandboxGroup:
        """Create ``n`` sandboxes (``create_kwargs`` as for :meth:`Sandbox.create`). On a failure that
        survives its retries, the ones already made are deleted and the error is raised."""
        owns = client is None
        c = client or Client(address, api_key)

        def one(_: int) -> Sandbox:
            for attempt in range(retries + 1):
                try:
                    return Sandbox.create(client=c, **create_kwargs)
                except RETRYABLE:
                    if attempt == retries:
                        raise
                    time.sleep(_backoff(attempt))
            raise AssertionError("unreachable")

        made: list[Sandbox] = []
        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            futures = [pool.submit(one, i) for i in range(n)]
            error: BaseException | None = None
            for f in futures:
                try:
                    made.append(f.result())
                except BaseException as e:  # keep collecting so every made sandbox is cleaned up
                    error = error or e
        group = cls(made, c, owns)
        if error is not None:
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

    def __iter__(self) -> Iterator[Sandbox]:
        return iter(self.sandboxes)

    def __len__(self) -> int:
        return len(self.sandboxes)

    def __getitem__(self, i: int) -> Sandbox:
        return self.sandboxes[i]

    def __enter__(self) -> SandboxGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete_all()


class AsyncSandboxGroup:
    """N asyncio sandboxes sharing one client; ``async with`` deletes them all."""

    def __init__(self, sandboxes: list[AsyncSandbox], client: AsyncClient, owns_client: bool) -> None:
        self.sandboxes = sandboxes
        self.client = client
        self._owns = owns_client

    @classmethod
    async def create(cls, n: int, *, concurrency: int = 32, retries: int = 2, client: AsyncClient | None = None,
                     address: str | None = None, api_key: str | None = None,
                     **create_kwargs: Any) -> AsyncSandboxGroup:
        owns = client is None
        c = client or AsyncClient(address, api_key)
        gate = asyncio.Semaphore(max(1, concurrency))

        async def one() -> AsyncSandbox:
            for attempt in range(retries + 1):
                try:
                    async with gate:
                        return await AsyncSandbox.create(client=c, **create_kwargs)
                except RETRYABLE:
                    if attempt == retries:
                        raise
                    await asyncio.sleep(_backoff(attempt))
            raise AssertionError("unreachable")

        results = await asyncio.gather(*(one() for _ in range(n)), return_exceptions=True)
        made = [r for r in results if isinstance(r, AsyncSandbox)]
        group = cls(made, c, owns)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await group.delete_all()
            raise errors[0]
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

    def __iter__(self) -> Iterator[AsyncSandbox]:
        return iter(self.sandboxes)

    def __len__(self) -> int:
        return len(self.sandboxes)

    def __getitem__(self, i: int) -> AsyncSandbox:
        return self.sandboxes[i]

    async def __aenter__(self) -> AsyncSandboxGroup:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.delete_all()
