"""Run ROME's recipe from one config: data → CPT → SFT stage 1 → SFT stage 2 → IPA RL → evaluation.

Every stage works in `<output_dir>/<stage>/`: it starts from the previous stage's `model/`, keeps
checkpoints in `checkpoints/` while it runs, saves its own `model/` and then writes `stage.json`
(atomically, after the model). A rerun skips every stage whose `stage.json` is there and resumes
the interrupted one from its latest checkpoint (the RL stage through the Controller's own resume).
The per-stage table is printed and written to `<output_dir>/recipe.json`.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ale_roll.checkpoint import latest_checkpoint, save_checkpoint
from ale_roll.config import ModelConfig, RunConfig, SFTConfig
from ale_roll.metrics.logger import MetricsLogger, read_jsonl
from ale_roll.recipe import data as recipe_data
from ale_roll.recipe.config import RecipeConfig, StageConfig
from ale_roll.types import Trajectory

STAGES = ("data", "cpt", "sft1", "sft2", "rl", "eval")
MARKER = "stage.json"

StageHook = Callable[[str, int], None]
"""Called after every step of a supervised stage as (stage, step): tests inject failures here."""


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


def _save_model_atomic(policy: Any, directory: Path) -> None:
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    policy.train.save_model(tmp, policy.tokenizer)
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)


def _loss_span(metrics_path: Path) -> tuple[float | None, float | None]:
    losses = [r["train/loss"] for r in read_jsonl(metrics_path) if "train/loss" in r]
    return (losses[0], losses[-1]) if losses else (None, None)


class Recipe:
    """The stages of one recipe config (see the module docstring)."""

    def __init__(self, cfg: RecipeConfig, *, on_step: StageHook | None = None,
                 log: Callable[[str], None] | None = None) -> None:
        self.cfg = cfg
        self.out = Path(cfg.output_dir)
        self.on_step = on_step
        self.log = log or (lambda _msg: None)

    # -- configs ---------------------------------------------------------------------------
    def stage_dir(self, stage: str) -> Path:
        return self.out / stage

    def model_of(self, stage: str) -> Path | None:
        """The model a stage starts from: the latest earlier stage's `model/` (None = the config's)."""
        before = STAGES[1:STAGES.index(stage)]
        for prev in reversed(before):
            m = self.stage_dir(prev) / "model"
            if (self.stage_dir(prev) / MARKER).exists() and m.is_dir():
                return m
        return None

    def stage_cfg(self, stage: str) -> RunConfig:
        """The run config of a stage: its own output_dir, the previous stage's model, no SFT warm-up."""
        update: dict[str, Any] = {"output_dir": str(self.stage_dir(stage)), "sft": SFTConfig()}
        src = self.model_of(stage)
        if src is not None:
            update["model"] = ModelConfig(path=str(src.resolve()), dtype=self.cfg.model.dtype)
        elif self.cfg.model.tiny is not None:  # the random-init model is built once, under output_dir
            update["model"] = self.cfg.model.model_copy()
            update["output_dir"] = str(self.out)
        return self.cfg.model_copy(update=update)

    # -- stages ----------------------------------------------------------------------------
    def marker(self, stage: str) -> dict[str, Any] | None:
        p = self.stage_dir(stage) / MARKER
        return json.loads(p.read_text()) if p.exists() else None

    def _finish(self, stage: str, row: dict[str, Any]) -> dict[str, Any]:
        d = self.stage_dir(stage)
        d.mkdir(parents=True, exist_ok=True)
        _write_atomic(d / MARKER, json.dumps(row))
        shutil.rmtree(d / "checkpoints", ignore_errors=True)  # the model is saved; resume needs them no more
        return row

    def _controller(self, stage: str) -> Any:
        from ale_roll.trainer.controller import Controller

        return Controller(self.stage_cfg(stage))

    def _heldout(self, ctl: Any, episodes: int | None = None) -> float | None:
        """Greedy held-out success of the controller's train weights (pushed to its inference engine)."""
        ctl.sync.push(ctl.policy.train.export_weights(), ctl.version)
        if episodes is not None:
            result = asyncio.run(_evaluate(ctl, episodes))
        else:
            result = asyncio.run(ctl.evaluate_only())
        value = result.get("eval/success")
        return None if value is None else float(value)

    def run_data(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        d = self.cfg.recipe.data
        ctl = self._controller("cpt")
        if d.generate is not None:
            trajs = recipe_data.generate_trajectories(ctl.env_factory, ctl.fmt, d.generate, self.cfg.seed)
            recipe_data.write_jsonl(self.stage_dir("data") / "broad.jsonl", trajs)
            broad = "data/broad.jsonl"  # relative to output_dir: the run directory may move
        else:
            broad = str(self.cfg.resolve(str(d.broad)).resolve())
            from ale_roll.rollout.replay import load_trajectories

            trajs = load_trajectories(broad, ctl.env_factory, ctl.fmt)
        hq = recipe_data.high_quality_view(trajs)
        base = self._heldout(ctl)  # the starting model's held-out success: the table's baseline
        return self._finish("data", {"stage": "data", "steps": len(trajs), "wall_s": time.perf_counter() - t0,
                                     "broad": broad, "high_quality_count": len(hq), "heldout_success": base,
                                     "success_rate": sum(bool(t.metadata.get("success")) for t in trajs) / max(len(trajs), 1)})

    def _stage_data(self, stage: str, ctl: Any) -> list[Trajectory]:
        from ale_roll.rollout.replay import load_trajectories

        d = self.cfg.recipe.data
        info = self.marker("data") or {}
        broad = load_trajectories(self.out / info["broad"], ctl.env_factory, ctl.fmt)  # absolute stays absolute
        if stage == "cpt":
            if d.cpt is not None:
                return recipe_data.load_cpt_file(self.cfg.resolve(d.cpt), ctl.policy.tokenizer, ctl.env_factory, ctl.fmt)
            return recipe_data.cpt_view(broad)
        if stage == "sft1":
            return recipe_data.broad_view(broad)
        if d.high_quality is not None:
            return load_trajectories(self.cfg.resolve(d.high_quality), ctl.env_factory, ctl.fmt)
        return recipe_data.high_quality_view(broad)

    def run_supervised(self, stage: str, sc: StageConfig) -> dict[str, Any]:
        """CPT or an SFT stage: masked SFT steps, checkpointed every `checkpoint_every`, resumable."""
        from ale_roll.trainer.sft import sft_steps

        t0 = time.perf_counter()
        d = self.stage_dir(stage)
        ctl = self._controller(stage)
        trajs = self._stage_data(stage, ctl)
        if not trajs:
            raise ValueError(f"recipe stage {stage}: no training data")
        engine = ctl.policy.train
        ck = latest_checkpoint(d / "checkpoints")
        done = 0
        if ck is not None:
            engine.load_checkpoint(ck.engine_dir)
            done = ck.step
            self.log(f"{stage}: resuming at step {done} of {sc.steps}")
        metrics_log = MetricsLogger(d, tensorboard=False, resume_step=done if ck is not None else None)
        offset = done

        def on_step(k: int, metrics: dict[str, Any]) -> None:
            step = offset + k
            metrics_log.log(step, metrics)
            if step % sc.checkpoint_every == 0 and step < sc.steps:
                save_checkpoint(d / "checkpoints", step, engine, {}, {"stage": stage}, keep=2)
            if self.on_step is not None:
                self.on_step(stage, step)

        try:
            if sc.steps > done:
                # Batches drawn with a seed of the resumed step: a resumed stage does not replay its first batches.
                sft_steps(ctl.policy, trajs, SFTConfig(steps=sc.steps - done, lr=sc.lr, batch_size=sc.batch_size),
                          seed=self.cfg.seed + done, restore_lr=self.cfg.optimizer.lr, on_step=on_step)
        finally:
            metrics_log.close()
        _save_model_atomic(ctl.policy, d / "model")
        success = self._heldout(ctl)
        start, end = _loss_span(metrics_log.path)
        return self._finish(stage, {"stage": stage, "steps": sc.steps, "resumed_from": done or None,
                                    "sequences": len(trajs), "wall_s": time.perf_counter() - t0,
                                    "loss_start": start, "loss_end": end, "heldout_success": success})

    def run_rl(self) -> dict[str, Any]:
        """IPA RL (the config's `algorithm`): the Controller, which resumes from its own checkpoints."""
        from ale_roll.trainer.controller import placed_controller

        t0 = time.perf_counter()
        cfg = self.stage_cfg("rl")
        d = self.stage_dir("rl")
        with placed_controller(cfg) as ctl:
            summary = ctl.run()
            _save_model_atomic(ctl.policy, d / "model")
        start, end = _loss_span(d / "metrics.jsonl")
        final = summary.get("final", {})
        return self._finish("rl", {"stage": "rl", "steps": summary.get("step"), "resumed_from": summary.get("resumed_from"),
                                   "wall_s": time.perf_counter() - t0, "loss_start": start, "loss_end": end,
                                   "heldout_success": final.get("eval/success")})

    def run_eval(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        ctl = self._controller("eval")
        n = self.cfg.recipe.eval_episodes or self.cfg.eval.episodes
        success = self._heldout(ctl, n)
        return self._finish("eval", {"stage": "eval", "steps": n, "wall_s": time.perf_counter() - t0,
                                     "model": str(self.model_of("eval")), "heldout_success": success})

    def run(self) -> dict[str, Any]:
        """Every stage not finished yet, in order; returns (and writes) the recipe summary."""
        self.out.mkdir(parents=True, exist_ok=True)
        rows = []
        r = self.cfg.recipe
        for stage in STAGES:
            row = self.marker(stage)
            if row is not None:
                rows.append({**row, "skipped": True})
                continue
            self.log(f"stage {stage} ...")
            if stage == "data":
                row = self.run_data()
            elif stage in ("cpt", "sft1", "sft2"):
                row = self.run_supervised(stage, getattr(r, stage))
            elif stage == "rl":
                row = self.run_rl()
            else:
                row = self.run_eval()
            rows.append({**row, "skipped": False})
        summary = {"name": self.cfg.name, "output_dir": str(self.out), "stages": rows}
        _write_atomic(self.out / "recipe.json", json.dumps(summary, indent=1, default=str))
        return summary


async def _evaluate(ctl: Any, episodes: int) -> dict[str, float]:
    try:
        async with ctl.rollout_services():
            result: dict[str, float] = await ctl.evaluate(episodes)
            return result
    finally:
        await ctl.generator.close()


def _fmt(v: Any, spec: str = ".3f") -> str:
    return "-" if v is None else format(v, spec)


def format_table(summary: dict[str, Any]) -> str:
    """The per-stage table: stage, steps, resumed from (a checkpoint step, or `done` when skipped), wall s
    (of the attempt that finished the stage), loss start→end (its metrics.jsonl), held-out success."""
    head = ("stage", "steps", "resumed", "wall s", "loss start→end", "held-out success")
    lines = [head]
    for row in summary["stages"]:
        loss = "-" if row.get("loss_start") is None else f"{row['loss_start']:.3f}→{row['loss_end']:.3f}"
        resumed = "done" if row.get("skipped") else (str(row["resumed_from"]) if row.get("resumed_from") else "-")
        lines.append((row["stage"], str(row.get("steps", "-")), resumed, _fmt(row.get("wall_s"), ".1f"), loss,
                      _fmt(row.get("heldout_success"))))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    text = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    text.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(text)


def run_recipe(cfg: RecipeConfig, *, on_step: StageHook | None = None,
               log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run (or resume) the recipe of `cfg`; returns the summary written to recipe.json."""
    return Recipe(cfg, on_step=on_step, log=log).run()
