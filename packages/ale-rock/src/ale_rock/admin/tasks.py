"""Background tasks the Admin's parts start and must not lose (asyncio keeps only weak references)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger("ale_rock.admin")


class Tasks:
    """Holds the background tasks of the Admin's parts until they finish; cancels them on close."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``coro`` on the running loop, keeping a reference until it is done."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        # A task whose awaiter went away (a stop the client gave up on) still reports its failure.
        if not task.cancelled() and (e := task.exception()) is not None:
            log.warning("background task failed", extra={"task": task.get_name(), "detail": str(e)})

    def cancel_all(self) -> None:
        for t in list(self._tasks):
            t.cancel()
