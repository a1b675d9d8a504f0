"""Warm pools of sandbox pods keyed by (image, cpu, memory), claimed with a checked label patch.

A claim patches the pod's labels (``ale.state: claimed``, ``ale.sandbox_id``) with the
``resourceVersion`` the watch last saw: the API server refuses it (409 Conflict) if the pod changed
since, whether another claimer took it or the kubelet updated its status. On a conflict the claim
reads the pod again and retries while it is still warm, else moves to the next one. Refills create
the missing pods in batches of ``refill_batch`` from one background thread, woken by every claim.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from ale_rock.backends.kubernetes_config import PoolSpec
from ale_rock.backends.kubernetes_spec import LABEL_POOL, LABEL_SANDBOX, LABEL_STATE

log = logging.getLogger(__name__)
Pod = dict[str, Any]


def is_ready(pod: Pod) -> bool:
    """Running, Ready, not being deleted."""
    status = pod.get("status") or {}
    if pod["metadata"].get("deletionTimestamp") or status.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


class PodPools:
    """The warm pools of one backend."""

    def __init__(
        self,
        specs: list[tuple[str, PoolSpec]],
        batch: int,
        pods: Callable[[], list[Pod]],
        create: Callable[[PoolSpec, str], None],
        patch: Callable[[str, dict[str, Any]], Pod],
        get: Callable[[str], Pod | None],
        delete: Callable[[str], None],
    ) -> None:
        self.specs = dict(specs)
        self.batch = batch
        self._pods = pods
        self._create = create
        self._patch = patch
        self._get = get
        self._delete = delete
        self.conflicts = 0
        """Claims the API server refused with 409 Conflict (each retried or moved on)."""
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._refill_loop, name="k8s-pool", daemon=True)

    def start(self) -> None:
        if self.specs:
            self._thread.start()
            self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def members(self, key: str) -> list[Pod]:
        """Unclaimed pods of pool ``key`` (ready or starting)."""
        return [
            p for p in self._pods()
            if (p["metadata"].get("labels") or {}).get(LABEL_POOL) == key
            and (p["metadata"].get("labels") or {}).get(LABEL_STATE) == "warm"
            and not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") not in ("Failed", "Succeeded")
        ]  # fmt: skip

    def dead(self) -> list[str]:
        """Names of unclaimed pool pods that died before a claim (evicted, failed): to delete."""
        return [
            p["metadata"]["name"] for p in self._pods()
            if (p["metadata"].get("labels") or {}).get(LABEL_STATE) == "warm"
            and not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") in ("Failed", "Succeeded")
        ]  # fmt: skip

    def wake(self) -> None:
        """Check the pools now (a pool pod changed)."""
        self._wake.set()

    def claim(self, key: str, sandbox_id: str) -> Pod | None:
        """Take a ready warm pod of pool ``key`` for ``sandbox_id``; None when none could be had."""
        from kubernetes.client.exceptions import ApiException

        if key not in self.specs:
            return None
        try:
            for pod in [p for p in self.members(key) if is_ready(p)]:
                name = pod["metadata"]["name"]
                for _ in range(3):
                    labels = {LABEL_STATE: "claimed", LABEL_SANDBOX: sandbox_id}
                    body = {
                        "metadata": {"labels": labels, "resourceVersion": pod["metadata"]["resourceVersion"]}
                    }
                    try:
                        return self._patch(name, body)
                    except ApiException as e:
                        if e.status == 404:
                            break
                        if e.status != 409:
                            raise
                        self.conflicts += 1
                        fresh = self._get(name)  # stale cache or a rival claimer: look again
                        if (
                            fresh is None
                            or not is_ready(fresh)
                            or ((fresh["metadata"].get("labels") or {}).get(LABEL_STATE) != "warm")
                        ):
                            break
                        pod = fresh
            return None
        finally:
            self._wake.set()

    def _refill_loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            if self._stop.is_set():
                return
            for name in self.dead():
                try:
                    self._delete(name)
                except Exception:  # noqa: BLE001 - retried at the next wake-up
                    log.exception("deleting dead pool pod %s failed", name)
            for key, spec in self.specs.items():
                missing = min(spec.size - len(self.members(key)), self.batch)
                for _ in range(max(missing, 0)):
                    try:
                        self._create(spec, key)
                    except Exception:  # noqa: BLE001 - the next claim retries the refill
                        log.exception("refilling warm pool %s failed", key)
                        break
                if spec.size - len(self.members(key)) > 0 and missing > 0:
                    self._wake.set()  # more than one batch short: another round
