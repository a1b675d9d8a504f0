"""`ale up`'s agent-native job (``job.mode=agent_native``): the lock as a terminal task, end to end.

    job = AgentNativeJob(run_dir, cfg.job, endpoints, model_dir, progress)
    results = job.run()          # the "job" part of report.json, with its "agent_native" section

Every stage runs the way a user's agent would, through the real services:

- **tasks**: the lock family (``ale_rock.tasks.lock_family``) written in Harbor layout under
  ``<run_dir>/tasks/``: ``synthesis.episodes`` + the trainer's start states of training locks and
  ``eval.episodes`` distinct held-out locks (train and held-out codes never overlap);
- **synthesis**: the teacher (``ale.job.lock_engine.LockTeacherEngine``) is served as an
  InferenceService; ale-flow's agent loop plays each training lock with its shell tool in a fresh
  sandbox, its model calls going through the stack's ModelProxy; the hidden tests give the reward.
  The proxy's token records of the episodes the tests passed are the SFT demos, in the agent's own
  chat format (``data/demos.jsonl``, one ``Trajectory`` per line);
- **SFT → RL → held-out evaluation**: one TrainerService job per seed in ``rollout.mode=agent_native``
  (``ale/job/agent_roll.yaml``): the trainer serves its policy as an InferenceService, the stack's
  ModelProxy forwards the agents' calls to it, and every episode is ale-rock's one episode runner
  (fresh sandbox, agent, records, hidden tests, delete). An episode the infrastructure spoiled is an
  error, resampled on a fresh sandbox, never a reward of 0 (``agent_native`` counts them).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from ale.config import JobConfig
from ale.job.pipeline import Endpoints, Progress, roll_raw, summarize, watch_job
from ale.job.report import plot_job_curves, read_metrics

TRAIN_DIR, HELDOUT_DIR = "train", "heldout"


def write_tasks(root: Path, train_seeds: range, heldout: int, max_turns: int) -> tuple[Path, Path]:
    """The lock family's training and held-out instances in Harbor layout under ``root``."""
    from ale_rock.tasks.lock_family import heldout_size, write_lock_task
    from ale_rock.tasks.models import Split

    if heldout > heldout_size():
        raise ValueError(f"eval.episodes: {heldout} held-out locks asked, the family has {heldout_size()} distinct ones")
    train, held = root / TRAIN_DIR, root / HELDOUT_DIR
    for seed in train_seeds:
        write_lock_task(train / f"{seed:07d}", seed, Split.TRAIN, max_turns=max_turns)
    for seed in range(heldout):
        write_lock_task(held / f"{seed:07d}", seed, Split.HELD_OUT, max_turns=max_turns)
    return train, held


class AgentNativeJob:
    """The stages of the agent-native job, in order (see the module docstring)."""

    def __init__(self, run_dir: Path, cfg: JobConfig, endpoints: Endpoints, model_dir: Path,
                 progress: Progress) -> None:
        self.run_dir, self.cfg, self.ep, self.model_dir, self.progress = run_dir, cfg, endpoints, model_dir, progress
        self.raw = roll_raw(cfg)
        self.data_dir = run_dir / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)

    # -- stages --------------------------------------------------------------------------------
    def tasks(self) -> tuple[Path, Path]:
        s = self.cfg.synthesis
        heldout = int(self.raw.get("eval", {}).get("episodes", 0))
        # Synthesis plays seeds first_seed.. (training locks the trainer's start states rarely
        # share); the trainer's start state k plays training task k mod len.
        train_seeds = range(s.first_seed, s.first_seed + max(s.episodes, self.cfg.train_tasks))
        return write_tasks(self.run_dir / "tasks", train_seeds, heldout, s.max_turns)

    def synthesize(self, train_dir: Path) -> tuple[Path, dict[str, int], dict[str, Any]]:
        """The teacher's episodes through the ModelProxy in sandboxes; the passing ones' token
        records become ``data/demos.jsonl``."""
        from ale_rock.envs.sandbox import SdkProvider
        from ale_rock.sdk.model_proxy import ModelProxyClient
        from ale_rock.tasks.loader import load_suite
        from ale_roll.engines.base import SamplingParams
        from ale_roll.engines.inference_server import InferenceServicer, serve
        from ale_roll.models import load_tokenizer
        from ale_roll.rollout.agent_native import AgentEpisodeError, AgentNativeRunner
        from ale_roll.rollout.agents import FlowAgent

        from ale.job.lock_engine import LockTeacherEngine

        s = self.cfg.synthesis
        agent_cfg = self.raw.get("agent", {})
        tokenizer = load_tokenizer(self.model_dir)
        engine = LockTeacherEngine(tokenizer, max_turns=s.max_turns)
        server, port = serve(InferenceServicer(engine, tokenizer, backend="teacher", default_max_tokens=16),
                             "127.0.0.1:0")
        tasks = load_suite(train_dir)[: s.episodes]
        proxy = ModelProxyClient(self.ep.proxy_address, timeout_s=30)
        runner = AgentNativeRunner(
            tasks=tasks, agent=FlowAgent(settings=dict(agent_cfg.get("flow_settings", {}))),
            provider=SdkProvider(self.ep.admin_address, self.ep.api_key), proxy=proxy,
            inference_target=f"127.0.0.1:{port}", params=SamplingParams(max_tokens=16, temperature=0.0),
            max_calls=int(agent_cfg.get("max_calls", 0)), agent_budget_s=agent_cfg.get("budget_s"),
            setup_timeout_s=float(agent_cfg.get("setup_timeout_s", 120)),
            verify_timeout_s=float(agent_cfg.get("verify_timeout_s", 120)))
        self.progress.stage("synthesis (the teacher as an agent in sandboxes, through the ModelProxy)", len(tasks))
        t0 = time.monotonic()
        done = [0]

        async def one(k: int, sem: asyncio.Semaphore) -> Any:
            async with sem:
                try:
                    return await runner.run(seed=k, initial_state_id=f"synth-{k}")
                except AgentEpisodeError as e:
                    return e
                finally:
                    done[0] += 1
                    self.progress.update(done[0])

        async def all_episodes() -> list[Any]:
            sem = asyncio.Semaphore(s.concurrency)
            return list(await asyncio.gather(*(one(k, sem) for k in range(len(tasks)))))

        try:
            results = asyncio.run(all_episodes())
        finally:
            proxy.close()
            server.stop(grace=None)
        trajs = [r for r in results if not isinstance(r, AgentEpisodeError)]
        kept = [t for t in trajs if t.metadata.get("success")]
        counts = {"episodes": len(results), "errors": len(results) - len(trajs), "failed": len(trajs) - len(kept),
                  "kept": len(kept)}
        demos = self.data_dir / "demos.jsonl"
        with demos.open("w") as f:
            for t in kept:
                f.write(json.dumps(t.to_dict()) + "\n")
        if not kept:
            raise RuntimeError(f"no teacher episode passed its tests: {counts}")
        return demos, counts, {"synthesis_s": round(time.monotonic() - t0, 1)}

    def overrides(self, seed: int, out: Path, demos: Path, train_dir: Path, heldout_dir: Path) -> list[str]:
        """The trainer job's settings that only the running stack knows."""
        o = [f"seed={seed}", f"output_dir={out}", f"model.path={self.model_dir}", "model.tiny=null",
             "model.word_vocab=null", f"sft.data={demos}", f"name=ale-up-agent-seed{seed}",
             f"agent.tasks=[{json.dumps(str(train_dir))}]", f"agent.eval_tasks=[{json.dumps(str(heldout_dir))}]",
             f"agent.sandbox_address={self.ep.admin_address}", f"agent.proxy_address={self.ep.proxy_address}"]
        if self.ep.api_key:
            o.append(f"agent.sandbox_api_key={self.ep.api_key}")
        resampling = self.raw.get("algorithm", {}).get("resampling", {})
        if resampling.get("enabled") and not resampling.get("expert_data"):
            # Chunk-level resampling replays the teacher's episodes: the demos are its experts.
            o.append(f"algorithm.resampling.expert_data={demos}")
        return o

    def train_seed(self, seed: int, demos: Path, train_dir: Path, heldout_dir: Path) -> dict[str, Any]:
        """One TrainerService job: untrained eval → SFT → eval → RL → eval, all agent-native."""
        import yaml

        out = self.run_dir / "train" / f"seed-{seed}"
        iterations = int(self.raw.get("iterations", 0))
        self.progress.stage(f"seed {seed}: eval → SFT → eval → RL (IPA, async, agent-native) → eval", iterations)
        t0 = time.monotonic()
        final = watch_job(self.ep.trainer_address, yaml.safe_dump(self.raw),
                          self.overrides(seed, out, demos, train_dir, heldout_dir), self.progress,
                          timeout_s=self.cfg.job_timeout_s)
        if final["state"] != "succeeded":
            raise RuntimeError(f"training job for seed {seed} {final['state']}: {final['message'][:500]}")
        return {"seed": seed, "rows": read_metrics(out / "metrics.jsonl"), "wall_s": time.monotonic() - t0,
                "dir": str(out)}

    def tool_overhead(self) -> dict[str, Any]:
        """The shell tool's cost in a sandbox beyond the command's (``ale.job.tool_overhead``)."""
        from ale_rock import Client

        from ale.job.tool_overhead import tool_call_overhead

        with Client(self.ep.admin_address, self.ep.api_key, timeout=60) as client:
            return tool_call_overhead(client)

    # -- the whole job -------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        t_start = time.monotonic()
        train_dir, heldout_dir = self.tasks()
        demos, counts, timing = self.synthesize(train_dir)
        self.progress.log(f"synthesis: {counts}")
        seeds = [self.train_seed(seed, demos, train_dir, heldout_dir) for seed in self.cfg.seeds]
        result = summarize(seeds, int(self.raw.get("eval", {}).get("episodes", 0)))
        result["eval_temperature"] = float(self.raw.get("eval", {}).get("temperature", 0.0))
        rl_rows = [r for s in seeds for r in s["rows"] if r.get("step", 0) > 0 and "time/step_s" in r]
        result["stages"]["rl"]["time_s"] = round(sum(float(r["time/step_s"]) for r in rl_rows), 1)
        result["mode"] = "agent_native"
        result["filter"] = counts
        result["timing"] = {**timing, "train_s": round(sum(s["wall_s"] for s in seeds), 1),
                            "job_s": round(time.monotonic() - t_start, 1)}
        result["agent_native"] = agent_native_section(rl_rows)
        result["agent_native"].update(self.tool_overhead())
        png = plot_job_curves({f"seed {s['seed']}": [r for r in s["rows"] if r.get("step", 0) > 0] for s in seeds},
                              self.run_dir / "curves.png", result["stages"], result["eval_temperature"])
        result["curves_png"] = str(png) if png else None
        return result


def agent_native_section(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``report.json``'s ``agent_native``: the RL steps' episodes, rate, errors, resamples and tool calls."""
    episodes = sum(float(r.get("rollout/episodes", 0)) for r in rows)
    seconds = sum(float(r.get("time/step_s", 0)) for r in rows)
    return {"episodes": int(episodes), "episodes_per_s": round(episodes / seconds, 2) if seconds else 0.0,
            "errors": int(sum(float(r.get("agent_native/errors", 0)) for r in rows)),
            "resampled": int(sum(float(r.get("agent_native/resampled", 0)) for r in rows)),
            "tool_calls": int(sum(float(r.get("agent_native/tool_calls", 0)) for r in rows))}
