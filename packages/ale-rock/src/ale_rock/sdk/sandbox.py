"""The blocking SDK: ``Sandbox`` and its ``Session``. Their methods are the operations of
``ops.py``, shared with the asyncio SDK; being :class:`Blocking` makes them block.

>>> with Sandbox.create(image="", cpu=0.5, memory="256Mi") as sb:   # doctest: +SKIP
...     print(sb.exec("echo hi").stdout)
"""

from __future__ import annotations

from ale_rock.sdk import ops
from ale_rock.sdk import types as t
from ale_rock.sdk.client import Client
from ale_rock.sdk.steps import Blocking, drive


class Session(ops.SessionMethods, Blocking):
    """A persistent shell in a sandbox: cwd, env and background jobs persist between commands."""

    sandbox: Sandbox

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Sandbox(ops.SandboxMethods, Blocking):
    """A sandbox managed by an Admin. Use :meth:`create` or :meth:`connect`; a context manager
    deletes it on exit."""

    client: Client
    _client_class = Client
    _session_class = Session

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
