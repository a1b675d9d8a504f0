"""Placement: choose the live worker with the most room left after placing the sandbox."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ale_rock.admin.errors import AdminError, Code
from ale_rock.admin.store import Usage, WorkerRecord


@dataclass
class Demand:
    """What a new sandbox needs."""

    cpu_millis: int
    memory_bytes: int
    backend: str = ""
    """Backend name ("local", "docker") or "" for any."""
    gpus: int = 0
    image: bool = False
    """Whether the sandbox starts from an image (the local backend starts none)."""


def _headroom(capacity: int, used: int, asked: int) -> float | None:
    """Fraction of ``capacity`` left after placing ``asked``; None when it does not fit.

    A capacity of 0 means the worker did not report a limit: treat it as roomy but not infinite,
    so reported capacity is preferred when ranking.
    """
    if capacity <= 0:
        return 0.5
    left = capacity - used - asked
    return None if left < 0 else left / capacity


def pick_worker(workers: list[WorkerRecord], allocated: Mapping[str, Usage], demand: Demand) -> WorkerRecord:
    """The best live worker for ``demand``.

    UNAVAILABLE with none alive (workers come and go: retry later). FAILED_PRECONDITION naming
    ``spec.backend`` (or ``spec.resources.gpus``) when no live worker offers the backend (or that
    many GPUs) at all: retrying will not help until such a worker joins. INVALID_ARGUMENT on
    ``spec.image`` for an image when every live worker is local (the local backend starts none).
    RESOURCE_EXHAUSTED (``quota=cluster_capacity``) when some could run it but none has room now.
    """
    live = [w for w in workers if w.alive]
    if not live:
        raise AdminError(Code.UNAVAILABLE, "no worker is registered and alive")
    able = [w for w in live if not demand.backend or not w.backends or demand.backend in w.backends]
    if not able:
        offered = sorted({b for w in live for b in w.backends})
        raise AdminError(
            Code.FAILED_PRECONDITION,
            f"no live worker offers backend {demand.backend!r} (offered: {', '.join(offered)})",
            field="spec.backend", backend=demand.backend,
        )
    if demand.image:
        able = [w for w in able if not w.backends or w.backends != ["local"]]
        if not able:
            # Every image is unknown to this cluster as it stands: the error the docs promise for one.
            raise AdminError(
                Code.INVALID_ARGUMENT,
                "unknown image: the live workers offer only the local backend, which runs the host's "
                "runtime and starts no image (leave spec.image empty, or add a docker worker)",
                field="spec.image",
            )
    if demand.gpus and not any(w.gpus >= demand.gpus for w in able):
        raise AdminError(
            Code.FAILED_PRECONDITION,
            f"no live worker{f' with backend {demand.backend!r}' if demand.backend else ''} has "
            f"{demand.gpus} GPU(s) (most: {max(w.gpus for w in able)})",
            field="spec.resources.gpus",
        )
    best: tuple[float, WorkerRecord] | None = None
    nothing = Usage()
    for w in able:
        if demand.gpus > w.gpus:
            continue
        used = allocated.get(w.id, nothing)
        if w.max_sandboxes and used.sandboxes + 1 > w.max_sandboxes:
            continue
        cpu = _headroom(w.cpu_millis, used.cpu_millis, demand.cpu_millis)
        mem = _headroom(w.memory_bytes, used.memory_bytes, demand.memory_bytes)
        if cpu is None or mem is None:
            continue
        score = min(cpu, mem)
        if best is None or score > best[0]:
            best = (score, w)
    if best is None:
        raise AdminError(
            Code.RESOURCE_EXHAUSTED,
            f"no live worker has room for {demand.cpu_millis}m CPU / {demand.memory_bytes} B memory"
            + (f" on backend {demand.backend}" if demand.backend else ""),
            quota="cluster_capacity",
        )
    return best[1]
