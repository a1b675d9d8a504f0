"""The asyncio SDK: ``AsyncSandbox`` and its ``AsyncSession``. Their methods are the operations of
``ops.py``, shared with the blocking SDK; being :class:`Asyncio` makes them coroutines.

>>> async with await AsyncSandbox.create(cpu=0.5) as sb:   # doctest: +SKIP
...     print((await sb.exec("echo hi")).stdout)
"""

from __future__ import annotations

from ale_rock.sdk import ops
from ale_rock.sdk import types as t
from ale_rock.sdk.client import AsyncClient
from ale_rock.sdk.steps import Asyncio


class AsyncSession(ops.SessionMethods, Asyncio):
    """A persistent shell in a sandbox: cwd, env and background jobs persist between commands."""

    sandbox: AsyncSandbox

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncSandbox(ops.SandboxMethods, Asyncio):
    """A sandbox managed by an Admin. Use :meth:`create` or :meth:`connect`; a context manager
    deletes it on exit."""

    client: AsyncClient
    _client_class = AsyncClient
    _session_class = AsyncSession

    @property
    def info(self) -> t.SandboxInfo | None:
        """The last known state (call :meth:`refresh` to update)."""
        return self._info

    async def __aenter__(self) -> AsyncSandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.delete()
