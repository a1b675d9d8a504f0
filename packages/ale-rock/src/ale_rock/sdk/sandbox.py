"""The blocking SDK: ``Sandbox`` and its ``Session`` (the operations are in ``ops.py``, shared
with the asyncio SDK; ``steps.py`` says how).

>>> with Sandbox.create(image="", cpu=0.5, memory="256Mi") as sb:   # doctest: +SKIP
...     print(sb.exec("echo hi").stdout)
"""

from __future__ import annotations

from ale_rock.sdk import ops
from ale_rock.sdk import types as t
from ale_rock.sdk.client import Client
from ale_rock.sdk.steps import Blocking, blocking, constructor, drive, iterating


class Session(ops.SessionState):
    """A persistent shell in a sandbox: cwd, env and background jobs persist between commands."""

    sandbox: Sandbox
    run = blocking(ops.session_run)
    send = blocking(ops.session_send)
    read = blocking(ops.session_read)
    interrupt = blocking(ops.session_interrupt)
    close = blocking(ops.session_close)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Sandbox(ops.SandboxState, Blocking):
    """A sandbox managed by an Admin. Use :meth:`create` or :meth:`connect`; a context manager
    deletes it on exit."""

    client: Client
    _client_class = Client
    _session_class = Session

    create = constructor(ops.create)
    connect = constructor(ops.connect)
    list = classmethod(blocking(ops.list_sandboxes))
    watch = staticmethod(iterating(ops.watch))
    _release = blocking(ops.release)

    refresh = blocking(ops.refresh)
    stop = blocking(ops.stop)
    delete = blocking(ops.delete)
    commit = blocking(ops.commit)
    stats = blocking(ops.stats)
    network_policy = blocking(ops.network_policy)
    set_network_policy = blocking(ops.set_network_policy)

    exec = blocking(ops.exec_command)
    exec_stream = iterating(ops.exec_stream)
    signal = blocking(ops.signal)
    session = blocking(ops.session)

    upload = blocking(ops.upload)
    download = blocking(ops.download)
    read = blocking(ops.read)
    write = blocking(ops.write)
    ls = blocking(ops.ls)

    @property
    def info(self) -> t.SandboxInfo:
        """The last known state (fetched if there is none yet)."""
        return self._info or drive(ops.refresh(self))

    @property
    def state(self) -> str:
        """The current state (always fetched)."""
        return drive(ops.refresh(self)).state

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()
