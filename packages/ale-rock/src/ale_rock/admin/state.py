"""The sandbox state machine: pending → running → stopped → deleted, plus failed and lost."""

from __future__ import annotations

from enum import Enum

from ale_rock.admin.errors import AdminError, Code


class State(str, Enum):
    """Lifecycle states (mirror ``ale.v1.SandboxState``)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"
    DELETED = "DELETED"
    FAILED = "FAILED"
    LOST = "LOST"


# Every state may go to DELETED (deletion reaps whatever is left); DELETED is final.
_ALLOWED: dict[State, set[State]] = {
    State.PENDING: {State.RUNNING, State.FAILED, State.LOST, State.STOPPED, State.DELETED},
    State.RUNNING: {State.STOPPED, State.FAILED, State.LOST, State.DELETED},
    State.STOPPED: {State.DELETED, State.LOST},
    State.FAILED: {State.DELETED},
    State.LOST: {State.DELETED},
    State.DELETED: set(),
}

ACTIVE = frozenset({State.PENDING, State.RUNNING})
"""States that hold resources on a worker and count against quotas."""


def can_transition(old: State, new: State) -> bool:
    """True when ``old → new`` is a legal transition."""
    return new in _ALLOWED[old]


def check_transition(sandbox_id: str, old: State, new: State) -> None:
    """Raise FAILED_PRECONDITION for an illegal transition."""
    if not can_transition(old, new):
        raise AdminError(
            Code.FAILED_PRECONDITION,
            f"sandbox {sandbox_id} is {old.value.lower()}; cannot become {new.value.lower()}",
            field="sandbox_id",
            state=old.value,
        )
