"""The asyncio SDK: ``AsyncSandbox`` and its ``AsyncSession`` (the operations are in ``ops.py``,
shared with the blocking SDK; ``steps.py`` says how).

>>> async with await AsyncSandbox.create(cpu=0.5) as sb:   # doctest: +SKIP
...     print((await sb.exec("echo hi")).stdout)
"""

from __future__ import annotations

from ale_rock.sdk import ops
from ale_rock.sdk import types as t
from ale_rock.sdk.client import AsyncClient
from ale_rock.sdk.steps import Asyncio, aiterating, awaitable, constructor


class AsyncSession(ops.SessionState):
    """A persistent shell in a sandbox: cwd, env and background jobs persist between commands."""

    sandbox: AsyncSandbox
    run = awaitable(ops.session_run)
    send = awaitable(ops.session_send)
    read = awaitable(ops.session_read)
    interrupt = awaitable(ops.session_interrupt)
    close = awaitable(ops.session_close)

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncSandbox(ops.SandboxState, Asyncio):
    """A sandbox managed by an Admin. Use :meth:`create` or :meth:`connect`; a context manager
    deletes it on exit."""

    client: AsyncClient
    _client_class = AsyncClient
    _session_class = AsyncSession

    create = constructor(ops.create)
    connect = constructor(ops.connect)
    list = classmethod(awaitable(ops.list_sandboxes))
    watch = staticmethod(aiterating(ops.watch))
    _release = awaitable(ops.release)

    refresh = awaitable(ops.refresh)
    stop = awaitable(ops.stop)
    delete = awaitable(ops.delete)
    commit = awaitable(ops.commit)
    stats = awaitable(ops.stats)
    network_policy = awaitable(ops.network_policy)
    set_network_policy = awaitable(ops.set_network_policy)

    exec = awaitable(ops.exec_command)
    exec_stream = aiterating(ops.exec_stream)
    signal = awaitable(ops.signal)
    session = awaitable(ops.session)

    upload = awaitable(ops.upload)
    download = awaitable(ops.download)
    read = awaitable(ops.read)
    write = awaitable(ops.write)
    ls = awaitable(ops.ls)

    @property
    def info(self) -> t.SandboxInfo | None:
        """The last known state (call :meth:`refresh` to update)."""
        return self._info

    async def __aenter__(self) -> AsyncSandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.delete()
