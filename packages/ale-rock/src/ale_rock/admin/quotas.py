"""Admission control: per-namespace quotas and the global concurrency cap."""

from __future__ import annotations

from ale_rock.admin.config import QuotaConfig
from ale_rock.admin.errors import AdminError, Code
from ale_rock.admin.store import Usage


def _exhausted(quota: str, field: str, limit: int, used: int, asked: int, scope: str) -> AdminError:
    return AdminError(
        Code.RESOURCE_EXHAUSTED,
        f"{scope} quota '{quota}' exceeded: limit {limit}, in use {used}, requested {asked}",
        field=field, quota=quota, limit=str(limit), used=str(used), requested=str(asked),
    )


def admit(
    namespace: str, cpu_millis: int, memory_bytes: int, quota: QuotaConfig, usage: Usage,
    global_active: int, global_cap: int,
) -> None:
    """Raise RESOURCE_EXHAUSTED (naming the quota) unless one more sandbox of this size fits."""
    if global_active + 1 > global_cap:
        raise _exhausted("max_concurrent_sandboxes", "", global_cap, global_active, 1, "global")
    scope = f"namespace '{namespace}'"
    if usage.sandboxes + 1 > quota.max_sandboxes:
        raise _exhausted("max_sandboxes", "", quota.max_sandboxes, usage.sandboxes, 1, scope)
    if usage.cpu_millis + cpu_millis > quota.max_cpu_millis:
        raise _exhausted(
            "max_cpu_millis", "spec.resources.cpu_millis", quota.max_cpu_millis, usage.cpu_millis, cpu_millis, scope
        )
    if usage.memory_bytes + memory_bytes > quota.max_memory_bytes:
        raise _exhausted(
            "max_memory_bytes", "spec.resources.memory_bytes", quota.max_memory_bytes, usage.memory_bytes,
            memory_bytes, scope,
        )
