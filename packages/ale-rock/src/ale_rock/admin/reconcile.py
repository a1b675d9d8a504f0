"""What the workers report, applied to the sandboxes placed on them: a (re)joining worker's list,
heartbeat statuses, and the end of a lost worker's grace.

The worker is the authority on processes, the Admin on intent: a report only moves a RUNNING
sandbox the Admin is not already changing, and a sandbox the Admin does not want is removed.
"""

from __future__ import annotations

import logging

from ale_rock.admin.errors import AdminError
from ale_rock.admin.lifecycle import ALIVE_ON_WORKER, SandboxLifecycle
from ale_rock.admin.records import Records
from ale_rock.admin.state import State
from ale_rock.admin.store import SandboxRecord
from ale_rock.admin.tasks import Tasks
from ale_rock.admin.worker_registry import WorkerRegistry
from ale_rock.admin.workers import WorkerCallError

log = logging.getLogger("ale_rock.admin")


class Reconciler:
    """Turns worker reports into sandbox transitions (through the lifecycle) and removals."""

    def __init__(self, sandboxes: SandboxLifecycle, records: Records, workers: WorkerRegistry, tasks: Tasks) -> None:
        self.sandboxes = sandboxes
        self.records = records
        self.workers = workers
        self._tasks = tasks
        self._removing: set[str] = set()
        """Sandboxes being removed from a worker that holds them unwanted."""

    def keep_on_register(self, worker_id: str, running: list[str]) -> list[str]:
        """A worker (re)joined reporting ``running``: returns the sandbox ids it should keep; the
        live ones it no longer has become LOST."""
        reported = set(running)
        keep = []
        for rec in self.sandboxes.on_worker(worker_id):
            # stopped sandboxes have no processes to report; their files are the worker's to keep
            if rec.id in reported or self.sandboxes.is_starting(rec.id) or rec.state == State.STOPPED:
                keep.append(rec.id)
            else:
                self.sandboxes.transition(rec.id, State.LOST, f"worker {worker_id} restarted without it")
        return keep

    def apply_statuses(self, worker_id: str, statuses: list[tuple[str, State, str]]) -> None:
        """A heartbeat's sandbox statuses: FAILED fails a running sandbox, STOPPED records a stop the
        Admin did not (unless a stop is in flight: it records its own); sandboxes this Admin does
        not want there are removed from the worker."""
        for sid, state, message in statuses:
            rec = self.records.peek(sid)
            if not self._live_on(worker_id, sid, rec):
                self._remove(worker_id, sid)
                continue
            if rec is None or rec.state != State.RUNNING or self.sandboxes.is_stopping(sid):
                continue  # the Admin drives every other transition
            if state == State.FAILED:
                self.sandboxes.transition(sid, State.FAILED, message or "its processes died")
            elif state == State.STOPPED:
                # Only an Admin's StopSandbox stops a sandbox on its worker: this stop's result was
                # never recorded (the Admin was killed while the worker stopped it).
                self.sandboxes.transition(sid, State.STOPPED, "stopped on its worker while the admin was away")

    def lose_sandboxes(self, worker_id: str, reason: str) -> None:
        """A lost worker's grace is over: its sandboxes become LOST."""
        for rec in self.sandboxes.on_worker(worker_id):
            self.sandboxes.transition(rec.id, State.LOST, reason)

    def _live_on(self, worker_id: str, sandbox_id: str, rec: SandboxRecord | None) -> bool:
        """Whether this Admin wants ``sandbox_id`` to exist on ``worker_id``."""
        if self.sandboxes.is_starting(sandbox_id):
            return True
        return rec is not None and rec.worker_id == worker_id and rec.state in ALIVE_ON_WORKER

    def _remove(self, worker_id: str, sandbox_id: str) -> None:
        """A worker holds a sandbox this Admin does not consider live (it failed, was deleted or
        forgotten while the Admin was down — a kill -9 mid-create): remove it from the worker."""
        if sandbox_id in self._removing or self.sandboxes.is_cleaning(sandbox_id):
            return
        self._removing.add(sandbox_id)

        async def remove() -> None:
            try:
                await self.workers.client(worker_id).remove(sandbox_id, timeout=60)
                log.info("removed a sandbox the admin does not hold", extra={"sandbox_id": sandbox_id,
                                                                              "worker_id": worker_id})
            except (WorkerCallError, AdminError) as e:
                log.warning("reconcile failed", extra={"sandbox_id": sandbox_id, "detail": str(e)})
            finally:
                self._removing.discard(sandbox_id)

        self._tasks.spawn(remove())
