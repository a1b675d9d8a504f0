"""Placing the roles: in the controller's process (the default) or as Ray actors.

    with build_ray_cluster(cfg) as cluster:
        Controller(cfg, policy=cluster.policy, env_factory=cluster.env_factory).run()

Only `ray_cluster.py` and `proxies.py` import Ray, and only when a Ray cluster is built, so the
default local mode needs neither Ray nor this package's actors.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ale_roll.cluster.ray_cluster import RayCluster
    from ale_roll.config import RunConfig

__all__ = ["build_ray_cluster", "ray_available", "train_on_ray"]


def ray_available() -> bool:
    """Whether `import ray` can succeed, without importing it (it takes seconds)."""
    try:
        return importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):  # ValueError: sys.modules["ray"] is None (import blocked)
        return False


def build_ray_cluster(cfg: RunConfig) -> RayCluster:
    """Start (or join) Ray and the train, inference and rollout-worker actors of `cfg`."""
    from ale_roll.cluster.ray_cluster import RayCluster

    return RayCluster(cfg)


def train_on_ray(cfg: RunConfig, **controller_kwargs: Any) -> dict[str, Any]:
    """`Controller(cfg, ...).run()` with the roles as Ray actors; the cluster is torn down after."""
    from ale_roll.trainer.controller import Controller

    with build_ray_cluster(cfg) as cluster:
        ctl = Controller(cfg, policy=cluster.policy, env_factory=cluster.env_factory, **controller_kwargs)
        return ctl.run()
