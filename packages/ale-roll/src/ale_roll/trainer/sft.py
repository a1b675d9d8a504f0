"""Masked SFT on a trajectories JSONL (the `ale-roll sft` command).

Each line is a `Trajectory.to_dict()` (or a `{"seed", "actions"}` demo replayed through the
configured env). The loss is `algorithms.sft` (Eq. 1–2): turns flagged `error` or not `relevant`
get no loss and do not count in the normalizer. Writes `sft_metrics.jsonl` and the trained model
(safetensors, loadable as `model.path`) to `<output_dir>/sft_model`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ale_roll.config import RunConfig, SFTConfig
from ale_roll.metrics import MetricsLogger
from ale_roll.rollout.formatting import ChatFormat
from ale_roll.rollout.replay import load_trajectories
from ale_roll.trainer.setup import Policy, build_policy
from ale_roll.trainer.step import train_step
from ale_roll.types import Trajectory


def sft_steps(policy: Policy, trajs: Sequence[Trajectory], cfg: SFTConfig, *, seed: int, restore_lr: float,
              on_step: Callable[[int, dict[str, Any]], None] | None = None) -> dict[str, float]:
    """The SFT loop (both callers: `run_sft` and the controller's warm-up): `cfg.steps` masked-SFT
    steps at `cfg.lr` on batches sampled from `trajs`; returns the last step's metrics.

    After the loop the learning rate goes back to `restore_lr` and the optimizer's moments are
    dropped, so what follows (RL, the next stage) starts as a fresh optimizer at its own rate
    instead of with SFT's Adam moments, built at a larger rate on a different loss.
    """
    engine = policy.train
    engine.set_lr(cfg.lr)
    rng = random.Random(seed)
    pool = list(trajs)
    metrics: dict[str, float] = {}
    try:
        for step in range(1, cfg.steps + 1):
            batch = rng.sample(pool, min(cfg.batch_size, len(pool)))
            metrics = train_step(engine, batch, "sft", pad_id=policy.pad_id)
            if on_step is not None:
                on_step(step, metrics)
    finally:
        engine.set_lr(restore_lr)
        engine.reset_optimizer()
    return metrics


def run_sft(cfg: RunConfig, policy: Policy | None = None, env_factory: Callable[[], Any] | None = None,
            on_step: Callable[[int, dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """`sft.steps` masked-SFT steps on `sft.data`; returns the last metrics and the model directory."""
    if cfg.sft.data is None:
        raise ValueError("sft.data is not set")
    policy = policy or build_policy(cfg)
    fmt = ChatFormat(policy.tokenizer, cfg.rollout.system_prompt, cfg.rollout.observation_template,
                     cfg.rollout.observation_rewrite)
    if env_factory is None and _has_demos(cfg.resolve(cfg.sft.data)):
        from ale_roll.trainer.controller import make_env_factory

        env_factory = make_env_factory(cfg.env, cfg.rollout.env_timeout_s)
    trajs = load_trajectories(cfg.resolve(cfg.sft.data), env_factory, fmt)
    if not trajs:
        raise ValueError(f"{cfg.sft.data}: no trajectories")
    out = Path(cfg.output_dir)
    log = MetricsLogger(out, tensorboard=cfg.metrics.tensorboard, filename="sft_metrics.jsonl")

    def logged(step: int, metrics: dict[str, Any]) -> None:
        log.log(step, metrics)
        if on_step is not None:
            on_step(step, metrics)

    try:
        metrics = sft_steps(policy, trajs, cfg.sft, seed=cfg.seed, restore_lr=cfg.optimizer.lr, on_step=logged)
    finally:
        log.close()
    model_dir = out / "sft_model"
    policy.train.save_model(model_dir, policy.tokenizer)
    return {"steps": cfg.sft.steps, "trajectories": len(trajs), "last": metrics,
            "model_dir": str(model_dir), "metrics": str(log.path)}


def _has_demos(path: Path) -> bool:
    first = next((line for line in path.read_text().splitlines() if line.strip()), "")
    return '"actions"' in first
