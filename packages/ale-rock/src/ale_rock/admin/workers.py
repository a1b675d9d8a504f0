"""How the Admin drives workers: a small Protocol, so the lifecycle logic is testable without gRPC."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ale_rock.admin.state import State


class WorkerCallError(Exception):
    """A worker call failed; ``unavailable`` when the worker could not be reached at all."""

    def __init__(self, message: str, unavailable: bool = False, code: str = "") -> None:
        super().__init__(message)
        self.unavailable = unavailable
        self.code = code


@dataclass
class CommitInfo:
    """The snapshot a worker made."""

    image: str
    size_bytes: int
    digest: str


class WorkerClient(Protocol):
    """The Admin's view of one worker (implemented over WorkerService by :mod:`.worker_client`)."""

    rocklet: Any
    """RockletService stub on the worker's proxy port (the servicer forwards through it)."""
    worker: Any
    """WorkerService stub (stats and network policy are forwarded as they are)."""
    metadata: tuple[tuple[str, str], ...]
    """Metadata every call on ``rocklet`` and ``worker`` must carry (the worker credential)."""

    async def start(self, sandbox_id: str, namespace: str, spec: dict[str, Any], timeout: float) -> tuple[State, str]:
        """Start a sandbox; returns (RUNNING or FAILED, message)."""
        ...

    async def stop(self, sandbox_id: str, grace_ms: int, timeout: float) -> None: ...

    async def remove(self, sandbox_id: str, timeout: float) -> None: ...

    async def commit(self, sandbox_id: str, name: str, fmt: int, timeout: float) -> CommitInfo: ...

    async def close(self) -> None: ...


class WorkerClientFactory(Protocol):
    """Makes a client for a worker address."""

    def __call__(self, address: str, secret: str = "") -> WorkerClient: ...
