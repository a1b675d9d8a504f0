"""The single controller: rollout feeds the SampleBuffer while the trainer steps; weights sync between.

    ctl = Controller(load_config("examples/guess_number.yaml"))
    summary = ctl.run()

One training step, top to bottom (`_train_loop`):
1. take a batch from the buffer (rollout keeps running; the staleness gate bounds how far ahead),
2. shrink rollout by the training slots, compute the loss and step the TrainEngine on a thread,
   expand again,
3. pause generation only for the weight push (verified), bump the policy version,
4. log metrics, checkpoint every N steps (model, optimizer, RNG, buffer, frontier — atomically).
With async ratio 0 this is synchronous training; the code is the same.

Rollout modes (`rollout.mode`): `gem` plays `env` through `EpisodeRunner`; `agent_native` runs
agents on tasks in sandboxes through `AgentNativeRunner` (`rollout.agent_setup`). Its services (our
InferenceService over the rollout's generator, the ModelProxy) need the running event loop, so they
live inside `rollout_services()`, which `train_async` and `evaluate_only` enter.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from ale_roll.algorithms.filtering import (
    EnvironmentNoiseFilter,
    RepeatedIllegalToolCallFilter,
    TrajectoryFilter,
    TruncatedFilter,
)
from ale_roll.buffer.sample_buffer import BufferConfig, FrontierEntry, SampleBuffer
from ale_roll.checkpoint import latest_checkpoint, save_checkpoint
from ale_roll.config import RunConfig
from ale_roll.engines.base import SamplingParams
from ale_roll.engines.weight_sync import WeightSync
from ale_roll.metrics import MetricsLogger, plot_curves
from ale_roll.rollout import (
    BatchingGenerator,
    ChatFormat,
    EpisodeRunner,
    GemEnv,
    RolloutScheduler,
    load_reward_fn,
)
from ale_roll.rollout.episode import EpisodeSpec, EpisodeTimes, RewardFn
from ale_roll.rollout.replay import load_trajectories
from ale_roll.rollout.resampler import ChunkResampler, load_agent_experts
from ale_roll.trainer.resources import ResourceManager
from ale_roll.trainer.setup import Policy, build_policy, configure_compute
from ale_roll.trainer.sft import sft_steps
from ale_roll.trainer.step import train_step, trajectory_metrics
from ale_roll.types import Trajectory
from ale_roll.user_tasks import (
    make_env_factory as make_env_factory,  # re-exported (callers import it from here)
)

_FILTERS: dict[str, Callable[[], TrajectoryFilter]] = {
    "env_noise": EnvironmentNoiseFilter, "repeated_illegal": RepeatedIllegalToolCallFilter, "truncated": TruncatedFilter,
}


class Runner(Protocol):
    """What the scheduler and evaluation need of an episode runner (`EpisodeRunner`, `AgentNativeRunner`)."""

    @property
    def times(self) -> EpisodeTimes:
        """The runner's time counters (read-only here: a runner may keep a subclass)."""
        ...

    async def run(self, *, seed: int | None, initial_state_id: str, group_id: str = "",
                  episode_id: str | None = None, params: SamplingParams | None = None) -> Trajectory:
        """Play one episode."""
        ...


class _NotStarted:
    """The runner slot of agent-native mode outside `rollout_services()`: fails loudly, never plays GEM."""

    times = EpisodeTimes()

    async def run(self, **_: Any) -> Trajectory:
        raise RuntimeError("agent-native rollout runs inside Controller.rollout_services() "
                           "(entered by train_async and evaluate_only)")


class Controller:
    """Owns the engines, the buffer, the scheduler and the loop (see the module docstring)."""

    def __init__(self, cfg: RunConfig, *, policy: Policy | None = None, env_factory: Callable[[], GemEnv] | None = None,
                 reward_fn: RewardFn | None = None, on_step: Callable[[int, dict[str, Any]], None] | None = None) -> None:
        self.cfg = cfg
        self.out = Path(cfg.output_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        random.seed(cfg.seed)
        import torch

        torch.manual_seed(cfg.seed)
        # All torch work of this process runs on one thread (ale_roll.engines.compute: one OpenMP
        # team, so `torch_threads` > 1 speeds a step up); `torch_threads` is set there.
        self.compute = configure_compute(cfg)
        self.policy = policy or build_policy(cfg)
        r = cfg.rollout
        self.fmt = ChatFormat(self.policy.tokenizer, r.system_prompt, r.observation_template, r.observation_rewrite)
        self.env_factory = env_factory or make_env_factory(cfg.env, r.env_timeout_s)
        self._surplus_steps = 0
        """Optimizer steps beyond one per batch (`algorithm.epochs` × `minibatches` > 1): not versions."""
        self.buffer = SampleBuffer(BufferConfig(async_ratio=r.async_ratio, group_size=r.group_size),
                                   version=self.version)
        self.generator = BatchingGenerator(self.policy.inference, max_batch=r.max_batch,
                                           window_s=r.batch_window_ms / 1000, timeout_s=r.generate_timeout_s,
                                           compute=None if cfg.engine.inference_address else self.compute)
        self.params = SamplingParams(max_tokens=r.max_new_tokens, temperature=r.temperature)
        self.reward_fn = reward_fn or load_reward_fn(r.reward_fn)
        self.runner: Runner = _NotStarted()
        if r.mode == "gem":
            self.runner = EpisodeRunner(self.env_factory, self.generator, self.fmt, self.params, r.max_turns,
                                        r.env_timeout_s, r.reward_timeout_s, self.reward_fn,
                                        env_threads=r.env_threads or cfg.env.address is not None)
        self.eval_runner: Runner = self.runner
        self.agent_stack: Any = None
        """The running `rollout.agent_setup.AgentNativeStack` inside `rollout_services()` (agent-native mode)."""
        self.scheduler = RolloutScheduler(
            self.buffer, self._episode, batch_size=r.batch_size, group_size=r.group_size,
            episodes_in_flight=r.episodes_in_flight, async_ratio=r.async_ratio, max_attempts=r.max_attempts,
            filters=[_FILTERS[name]() for name in r.filters], seed_of=lambda k: cfg.env.seed + k,
            retry_backoff_s=r.retry_backoff_s)
        self.resources = ResourceManager(r.episodes_in_flight, cfg.resources.train_slots, self.scheduler.set_capacity)
        self.sync = WeightSync([self.policy.inference])
        self.resampler: ChunkResampler | None = None
        """Chunk-level initialized resampling (`algorithm.resampling`; rollout/resampler.py)."""
        if cfg.algorithm.resampling.enabled:
            self.resampler = self._resampler()
        if isinstance(self.runner, EpisodeRunner) and self.runner.batchable and self.resampler is None:
            self.scheduler.batch_fn = self._episodes  # in-process envs: a wake-up's episodes play together
        self.on_step = on_step
        self.step = 0
        self.resumed = False
        self.stop_requested = False

    def _resampler(self) -> ChunkResampler:
        rs, cfg = self.cfg.algorithm.resampling, self.cfg
        path = cfg.resolve(str(rs.expert_data))
        if cfg.rollout.mode == "gem":
            return ChunkResampler(rs, load_trajectories(path, self.env_factory, self.fmt), seed=cfg.seed)
        # Agent-native: experts are agent episodes (their replies replayable), matched by task; the
        # task a seed plays is the running AgentNativeRunner's (built in rollout_services).
        experts = load_agent_experts(path)
        return ChunkResampler(rs, experts, seed=cfg.seed, expert_key=lambda t: t.metadata.get("task_id"),
                              key_of=lambda seed: self.runner.task_for(seed).id)  # type: ignore[attr-defined]

    @property
    def version(self) -> int:
        """The policy version rollout sees: bumped once per batch (and per SFT step), however many
        optimizer steps a batch took, so the async ratio counts weight syncs."""
        return self.policy.train.policy_version - self._surplus_steps

    async def _episode(self, entry: FrontierEntry) -> Any:
        if self.resampler is not None:
            return await self.resampler.play(self.runner.run, seed=entry.seed, initial_state_id=entry.initial_state_id,
                                             group_id=entry.group_id, episode_id=entry.episode_id)
        return await self.runner.run(seed=entry.seed, initial_state_id=entry.initial_state_id,
                                     group_id=entry.group_id, episode_id=entry.episode_id)

    async def _episodes(self, entries: Any) -> Any:
        assert isinstance(self.runner, EpisodeRunner)
        return await self.runner.run_batch([EpisodeSpec(e.seed, e.initial_state_id, e.group_id, e.episode_id)
                                            for e in entries])

    @contextlib.asynccontextmanager
    async def rollout_services(self) -> AsyncIterator[None]:
        """Agent-native mode: serve the generator, start or join the ModelProxy and build the runners
        for the block; stopped after. GEM mode needs nothing (a no-op)."""
        if self.cfg.rollout.mode != "agent_native" or self.agent_stack is not None:
            yield
            return
        from ale_roll.rollout.agent_setup import build_agent_stack

        stack = build_agent_stack(self.cfg, self.generator, self.policy.tokenizer, asyncio.get_running_loop(),
                                  self.params, self.reward_fn)
        self.agent_stack, self.runner, self.eval_runner = stack, stack.runner, stack.eval_runner
        try:
            yield
        finally:
            self.agent_stack, self.runner = None, _NotStarted()
            self.eval_runner = self.runner
            # On a thread: stopping the servers waits for their handlers, which need this loop.
            await asyncio.to_thread(stack.close)

    # -- weights ----------------------------------------------------------------------------
    def _push_weights(self) -> float:
        t0 = time.perf_counter()
        self.sync.push(self.policy.train.export_weights(), self.version)
        return time.perf_counter() - t0

    async def _sync_weights(self) -> float:
        async with self.generator.paused():  # rollout pauses only here
            seconds = await self.compute.arun(self._push_weights)
        self.buffer.set_version(self.version)
        self.scheduler.wake()
        return seconds

    # -- resume / warm-up / eval ------------------------------------------------------------
    def resume(self) -> bool:
        """Load the newest checkpoint of output_dir (model, optimizer, RNG, buffer, frontier)."""
        ck = latest_checkpoint(self.out / "checkpoints")
        if ck is None:
            return False
        self.compute.run(self.policy.train.load_checkpoint, ck.engine_dir)
        self.buffer.load_state_dict(ck.buffer_state())
        run_state = ck.run_state()
        self.step = int(run_state["step"])
        self._surplus_steps = self.policy.train.policy_version - int(run_state.get("version", self.policy.train.policy_version))
        self.compute.run(self._push_weights)
        self.resumed = True
        return True

    def warmup_sft(self) -> dict[str, float]:
        """Masked SFT on `sft.data` for `sft.steps` steps before RL (skipped on resume)."""
        s = self.cfg.sft
        if not s.steps or s.data is None or self.resumed:
            return {}
        trajs = load_trajectories(self.cfg.resolve(s.data), self.env_factory, self.fmt)
        # RL then starts at its own lr with fresh Adam moments (SFT's are at a 10x larger lr).
        metrics = sft_steps(self.policy, trajs, s, seed=self.cfg.seed, restore_lr=self.cfg.optimizer.lr)
        self._push_weights()
        self.buffer.set_version(self.version)
        return {f"sft/{k.split('/', 1)[-1]}": v for k, v in metrics.items()}

    async def evaluate(self, episodes: int | None = None) -> dict[str, float]:
        """Held-out episodes (greedy unless `eval.temperature`): success rate and mean reward over the
        scored episodes.

        An episode the infrastructure spoiled (the runner raised: a lost sandbox, a failed model
        call) is run again on the same held-out state, up to `rollout.max_attempts` times; one that
        never scores counts in `eval/errors` (by kind in `eval/errors/<kind>`), not as a failure."""
        n = self.cfg.eval.episodes if episodes is None else episodes
        if n <= 0:
            return {}
        if isinstance(self.eval_runner, _NotStarted):  # its episodes would all "fail" quietly below
            await self.eval_runner.run()
        params = SamplingParams(max_tokens=self.cfg.rollout.max_new_tokens, temperature=self.cfg.eval.temperature)
        results: list[Any]
        if isinstance(self.eval_runner, EpisodeRunner):  # in-process envs: lock-step batches (see run_batch)
            results = await self.eval_runner.run_batch(
                [EpisodeSpec(self.cfg.env.eval_seed + i, f"eval-{i}") for i in range(n)], params)
        else:
            # As many at once as rollout runs (an agent-native episode holds a sandbox throughout).
            lanes = asyncio.Semaphore(max(1, self.cfg.rollout.episodes_in_flight))
            attempts = max(1, self.cfg.rollout.max_attempts)

            async def one(i: int) -> Trajectory:
                async with lanes:
                    for _ in range(attempts - 1):
                        with contextlib.suppress(Exception):  # spoiled: the same state once more
                            return await self.eval_runner.run(seed=self.cfg.env.eval_seed + i,
                                                              initial_state_id=f"eval-{i}", params=params)
                    return await self.eval_runner.run(seed=self.cfg.env.eval_seed + i,
                                                      initial_state_id=f"eval-{i}", params=params)

            results = list(await asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True))
        trajs = [t for t in results if not isinstance(t, BaseException)]
        errors = Counter(str(getattr(e, "kind", type(e).__name__)) for e in results if isinstance(e, BaseException))
        scored = max(1, len(trajs))
        out = {"eval/success": sum(bool(t.metadata.get("success")) for t in trajs) / scored,
               "eval/reward": sum(t.reward for t in trajs) / scored, "eval/episodes": float(len(trajs)),
               "eval/errors": float(n - len(trajs))}
        out.update({f"eval/errors/{k}": float(v) for k, v in sorted(errors.items())})
        return out

    async def evaluate_only(self) -> dict[str, float]:
        """`evaluate()` with the rollout services up (agent-native mode); releases the generator after."""
        try:
            async with self.rollout_services():
                return await self.evaluate()
        finally:
            await self.generator.close()

    # -- the loop ---------------------------------------------------------------------------
    async def _checkpoint(self) -> None:
        # The buffer snapshot is taken on the loop thread (no episode mutates it meanwhile); the
        # files are written on a thread so rollout keeps going.
        buffer_state = self.buffer.state_dict()
        state = {"name": self.cfg.name, "time": time.time(), "version": self.version}
        await self.compute.arun(save_checkpoint, self.out / "checkpoints", self.step, self.policy.train,
                                buffer_state, state, self.cfg.checkpoint.keep)

    def _train_on(self, batch: list[Trajectory]) -> dict[str, Any]:
        """The step's updates on `batch` (on a thread); with resampling, the imitation term of groups
        that never succeeded from their fork is accumulated first, so the first update applies it."""
        a = self.cfg.algorithm
        il = None
        if self.resampler is not None:
            targets = self.resampler.imitation_targets(batch)
            il = self.resampler.imitation_backward(self.policy.train, targets, pad_id=self.policy.pad_id)
        metrics: dict[str, Any] = train_step(self.policy.train, batch, a.loss, a.config, pad_id=self.policy.pad_id,
                                             epochs=a.epochs, minibatches=a.minibatches, seed=self.cfg.seed + self.step)
        if il is not None:
            metrics["resampling/imitation_loss"] = il
        return metrics

    async def _train_loop(self, log: MetricsLogger) -> None:
        r = self.cfg.rollout
        batch_timeout = r.max_turns * (r.generate_timeout_s + r.env_timeout_s) * r.max_attempts + 60
        if self.step >= self.cfg.iterations:
            return  # nothing to train (iterations=0, or resumed at the end): start no rollout at all
        sched = asyncio.get_running_loop().create_task(self.scheduler.run(), name="rollout")
        last = time.perf_counter()
        busy = self.generator.busy_s
        try:
            while self.step < self.cfg.iterations and not self.stop_requested:
                t0 = time.perf_counter()
                batch = await self.buffer.aget_batch(r.batch_size, timeout=batch_timeout)
                t1 = time.perf_counter()
                version = self.version
                self.resources.shrink()
                metrics: dict[str, Any] = await self.compute.arun(self._train_on, batch)
                self.resources.expand()
                self._surplus_steps += int(metrics.get("train/updates", 1)) - 1
                t2 = time.perf_counter()
                sync_s = await self._sync_weights()
                self.step += 1
                now = time.perf_counter()
                times = _per_step_times(self.runner.times.take(), self.generator.busy_s - busy)
                busy = self.generator.busy_s
                metrics.update(trajectory_metrics(batch, version))
                metrics.update(self.buffer.metrics())
                metrics.update(self.scheduler.stats.as_metrics())
                metrics.update(times)
                if self.resampler is not None:
                    metrics.update(self.resampler.take_metrics())
                metrics.update({"time/wait_batch_s": t1 - t0, "time/train_s": t2 - t1, "time/sync_s": sync_s,
                                "time/step_s": now - last, "policy_version": float(self.version),
                                "train/optimizer_steps": float(self.policy.train.policy_version),
                                "throughput/tokens_per_s": times["rollout/tokens"] / max(now - last, 1e-9),
                                "batch/states": [t.initial_state_id for t in batch],
                                "batch/episodes": [t.episode_id for t in batch]})
                last = now
                if self.cfg.eval.every and self.step % self.cfg.eval.every == 0:
                    metrics.update(await self.evaluate())
                log.log(self.step, metrics)
                if self.on_step is not None:
                    self.on_step(self.step, metrics)
                if self.cfg.checkpoint.every and self.step % self.cfg.checkpoint.every == 0:
                    await self._checkpoint()
                if sched.done():
                    sched.result()  # surfaces a scheduler crash
        finally:
            self.scheduler.stop()
            await sched
            if self.resampler is not None:
                self.resampler.close()

    async def train_async(self) -> dict[str, Any]:
        """Resume or warm up, train `iterations` steps, evaluate, checkpoint, plot."""
        if self.cfg.checkpoint.resume:
            self.resume()
        log = MetricsLogger(self.out, tensorboard=self.cfg.metrics.tensorboard,
                            resume_step=self.step if self.resumed else None)
        summary: dict[str, Any] = {"resumed_from": self.step if self.resumed else None}
        try:
            async with self.rollout_services():
                if not self.resumed:
                    # The inference engine may be a shared service that last served another run: give
                    # it exactly this run's starting weights (verified) before anything is generated.
                    self.compute.run(self._push_weights)
                    # eval/* at step 0 is where RL starts (after the warm-up); *_untrained is before it.
                    untrained = await self.evaluate()
                    start = {f"{k}_untrained": v for k, v in untrained.items()}
                    start.update(self.compute.run(self.warmup_sft))
                    start.update(await self.evaluate() if self.cfg.sft.steps and self.cfg.sft.data else untrained)
                    log.log(0, start)
                    summary["start"] = start
                await self._train_loop(log)
                await self._checkpoint()
                final = await self.evaluate()
                log.log(self.step, final)
                summary["final"] = final
                self.compute.run(self.policy.train.close)  # the DeepSpeed engine leaves its process group (all ranks got here)
        finally:
            log.close()
            await self.generator.close()
        summary["step"] = self.step
        if self.cfg.metrics.plot:
            png = plot_curves(log.path, self.out / "curves.png")
            summary["plot"] = str(png) if png else None
        summary["metrics"] = str(log.path)
        return summary

    def run(self) -> dict[str, Any]:
        """`train_async` on a fresh event loop."""
        return asyncio.run(self.train_async())


def _per_step_times(summed: dict[str, float], generate_wall_s: float) -> dict[str, float]:
    """The runner's time split is summed over concurrent episodes (256 episodes sharing one 0.1 s
    batched call add up to seconds): report the step's generation wall time (the engine busy in
    `engine.generate`) as `time/generate_s`, and each phase's mean per episode as `episode/<phase>_s`."""
    out = dict(summed)
    episodes = max(out.get("rollout/episodes", 0.0), 1.0)
    for phase in ("generate", "env", "reward"):
        if f"time/{phase}_s" in out:
            out[f"episode/{phase}_s"] = out.pop(f"time/{phase}_s") / episodes
    out["time/generate_s"] = generate_wall_s
    return out


@contextlib.contextmanager
def placed_controller(cfg: RunConfig, **kwargs: Any) -> Iterator[Controller]:
    """A Controller with its roles placed per `cluster.mode`: in this process, or as Ray actors
    (`cluster.build_ray_cluster`, torn down when the block ends). Ray is imported only for `ray`."""
    if cfg.cluster.mode != "ray":
        yield Controller(cfg, **kwargs)
        return
    from ale_roll.cluster import build_ray_cluster

    with build_ray_cluster(cfg) as cluster:
        yield Controller(cfg, policy=cluster.policy, env_factory=cluster.env_factory, **kwargs)
