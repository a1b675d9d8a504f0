"""`cluster.mode: ray` — the roles as Ray actors, the controller unchanged.

What runs where:
- the driver (this process): the Controller — scheduler, SampleBuffer, BatchingGenerator,
  EpisodeRunner coroutines, loss assembly, metrics, checkpoints' buffer/frontier;
- `TrainActor`: the TrainEngine (forward/backward/step, export, checkpoint files);
- `InferenceActor`: the InferenceEngine (generate, abort, verified weight loads);
- `EnvWorkerActor` x `cluster.num_rollout_workers`: the environments, round-robin per episode.

Across nodes, each role goes where its `cluster.<role>.resources` (Ray custom resources) can be
reserved: start each node with `ray start --resources='{"gpu_node": 1}'` and set e.g.
`cluster.train.resources: {gpu_node: 1}`; `nodes` records where every actor landed.

Weight sync stays the controller's `WeightSync`: the train actor's tensors come to the driver,
which fingerprints them and puts them once into Ray's object store; the inference actor loads them
and returns the fingerprint of what it received, which must match (else WeightSyncError).

`model_dir` and checkpoint paths are file paths: on several nodes they must be on a shared
filesystem. `close()` (or leaving the `with` block) kills every actor and, if this process started
or joined Ray for the run, calls `ray.shutdown()`, which stops a locally started instance.
"""

from __future__ import annotations

import atexit
import contextlib
from collections.abc import Callable
from types import TracebackType
from typing import Any

from ale_roll.cluster.actors import EnvWorkerActor, InferenceActor, TrainActor
from ale_roll.config import ConfigError, RoleResources, RunConfig
from ale_roll.engines.base import TrainEngine
from ale_roll.rollout.episode import GemEnv
from ale_roll.trainer.setup import Policy, prepare_model_dir

#: Concurrent calls the inference actor serves: a generate plus abort / version / weight calls.
_INFERENCE_CONCURRENCY = 4


def import_ray() -> Any:
    """`import ray`, or a ConfigError naming the key that asked for it."""
    try:
        import ray
    except ImportError as e:
        raise ConfigError(f"cluster.mode=ray needs Ray: pip install 'ale-roll[ray]' ({e})") from None
    return ray


def _options(res: RoleResources, **extra: Any) -> dict[str, Any]:
    custom = {"resources": dict(res.resources)} if res.resources else {}
    return {"num_cpus": res.num_cpus, "num_gpus": res.num_gpus, **custom, **extra}


def _node_id(actor: object) -> str:
    """Run inside an actor (`__ray_call__`): the id of the Ray node it was placed on."""
    import ray

    return str(ray.get_runtime_context().get_node_id())


class RayCluster:
    """Starts (or joins) Ray, creates the actors, and exposes `policy` and `env_factory` for the Controller."""

    def __init__(self, cfg: RunConfig) -> None:
        c = cfg.cluster
        if c.mode != "ray":
            raise ConfigError(f"cluster.mode is {c.mode!r}; a Ray cluster needs cluster.mode=ray")
        if cfg.engine.inference_address:
            raise ConfigError("engine.inference_address: a remote InferenceService and cluster.mode=ray exclude "
                              "each other (the inference actor is the inference engine)")
        self.ray = import_ray()
        self.cfg = cfg
        self.actors: list[Any] = []
        self.pids: dict[str, int] = {}
        self.nodes: dict[str, str] = {}
        """Role -> id of the Ray node its actor runs on (as `pids`), so placement can be checked."""
        self._owns_ray = False
        self._closed = False
        atexit.register(self.close)
        try:
            self._start_ray()
            self._start_actors()
        except BaseException:
            self.close()
            raise

    # -- start ------------------------------------------------------------------------------
    def _start_ray(self) -> None:
        ray, c = self.ray, self.cfg.cluster
        if ray.is_initialized():  # the caller's instance: used, never shut down here
            return
        if c.address == "local":
            ray.init(num_cpus=c.num_cpus, include_dashboard=False, _temp_dir=c.temp_dir)
        else:
            ray.init(address=c.address)
        self._owns_ray = True

    def _start_actors(self) -> None:
        ray, cfg, c = self.ray, self.cfg, self.cfg.cluster
        model_dir = prepare_model_dir(cfg)  # built here once; actors load it by path
        from ale_roll.models import load_tokenizer

        train = ray.remote(TrainActor).options(**_options(c.train)).remote(cfg, str(model_dir))
        self.actors.append(train)
        inference = ray.remote(InferenceActor).options(
            **_options(c.inference, max_concurrency=_INFERENCE_CONCURRENCY)).remote(cfg, str(model_dir))
        self.actors.append(inference)
        workers = [ray.remote(EnvWorkerActor).options(**_options(c.rollout_worker, max_concurrency=c.env_concurrency))
                   .remote(cfg.env, cfg.rollout.env_timeout_s) for _ in range(c.num_rollout_workers)]
        self.actors.extend(workers)
        from ale_roll.cluster.proxies import (
            RemoteInferenceEngine,
            RemoteTrainEngine,
            RoundRobinEnvFactory,
            call,
        )

        (train_pid, train_version), (inf_pid, inf_version), *worker_pids = call(
            [train.ready.remote(), inference.ready.remote(), *(w.ready.remote() for w in workers)],
            c.start_timeout_s, "actor start-up")
        self.pids = {"train": train_pid, "inference": inf_pid,
                     **{f"rollout_worker_{i}": pid for i, pid in enumerate(worker_pids)}}
        node_ids = call([a.__ray_call__.remote(_node_id) for a in (train, inference, *workers)],
                        c.call_timeout_s, "actor placement")
        self.nodes = dict(zip(self.pids, node_ids, strict=True))
        self.train_actor, self.inference_actor, self.rollout_workers = train, inference, workers
        train_engine: TrainEngine = RemoteTrainEngine(train, train_version, c.call_timeout_s)
        self.policy = Policy(model_dir, load_tokenizer(model_dir), train_engine,
                             RemoteInferenceEngine(inference, inf_version, cfg.rollout.generate_timeout_s,
                                                   c.call_timeout_s))
        self.env_factory: Callable[[], GemEnv] = RoundRobinEnvFactory(workers, cfg.rollout.env_timeout_s)

    # -- inspection -------------------------------------------------------------------------
    def inference_version(self) -> int:
        """The policy version the inference actor reports (asked, not cached)."""
        from ale_roll.cluster.proxies import call

        return int(call(self.inference_actor.policy_version.remote(), self.cfg.cluster.call_timeout_s, "policy_version"))

    def last_weight_update(self) -> Any:
        """The inference actor's last verified WeightUpdate (None before the first sync)."""
        from ale_roll.cluster.proxies import call

        return call(self.inference_actor.get_last_update.remote(), self.cfg.cluster.call_timeout_s, "last update")

    def rollout_stats(self) -> list[dict[str, int]]:
        """Per rollout worker: environments created and still open."""
        from ale_roll.cluster.proxies import call

        return list(call([w.stats.remote() for w in self.rollout_workers], self.cfg.cluster.call_timeout_s, "stats"))

    # -- stop -------------------------------------------------------------------------------
    def close(self) -> None:
        """Kill every actor; shut Ray down if this cluster started or joined it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        for actor in self.actors:
            with contextlib.suppress(Exception):  # already dead is fine
                self.ray.kill(actor, no_restart=True)
        self.actors.clear()
        if self._owns_ray:
            self.ray.shutdown()

    def __enter__(self) -> RayCluster:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
