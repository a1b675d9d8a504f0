"""Benchmark: synchronous batched rollout vs ale-roll's fine-grained async rollout.

    python bench/rollout.py [--json] [--sections sim,threads,agent] [--batches 8] [--batch-size 32] [--turns 4]
                            [--agent-episodes 12] [--agent-concurrency 2] [--agent-task ID] [--no-baseline]
                            [--threads-completions 256] [--threads-rounds 6] [--threads-steps 6]

Sections: ``sim`` (below), ``threads`` (a real synchronous step on CPU with 1 vs 2 torch threads,
alternating; see `torch_threads`), ``agent`` (agent-native episodes, below).

The workload (no model; costs simulated with asyncio sleeps, identical in every mode):
- `batches × batch_size` episodes of `turns` turns each; episode k is initial state k;
- each turn: a fixed generation cost `gen_ms` (a batched engine serves concurrent requests in the
  same time), then an environment step whose latency is **lognormal**: median `env_median_ms`,
  shape σ = `env_sigma` (σ = 1: mean = 1.65 × median, p99 ≈ 10 × median — the long tail of real
  sandboxes/tools). The latency of (episode k, turn t) is drawn from a seeded RNG keyed by (k, t),
  so every mode sees the same episodes. Costs are tens of milliseconds so that the OS's timer
  and scheduling jitter on a busy 2-core machine (a 4 ms sleep can take 10 ms) stays small;
- each training step costs `train_ms`, the weight sync `sync_ms`.

Modes, with equal workers (`workers = batch_size` episode slots):
- sync: a batch runs in lock-step — every turn waits for the slowest env step of the batch —
  then trains while rollout idles;
- async (ratio 1 and 2): `RolloutScheduler` + `SampleBuffer` (the real classes) keep `workers`
  episodes in flight, each pipelined on its own, training overlapping rollout under the staleness
  bound.

`ideal_speedup` = sync_s / critical-path bound, where the bound is
max(total episode work / workers + train_ms + sync_ms, first batch + batches × (train + sync)):
no schedule on these workers can finish sooner. Goal: speedup ≥ 2.5× and ≥ 80% of ideal.

**Agent-native episodes** (``--agent-episodes N``, 0 skips; needs bubblewrap): the real stack — a
LocalCluster (admin + one worker, bubblewrap sandboxes), the ModelProxy, the InferenceService over
a scripted model that answers "Done." (one model call per episode, ``--model-ms`` each) — runs N
episodes of ``--agent-task`` through ale-rock's one episode runner (setup → open → agent → close +
records → verify → delete), ``--agent-concurrency`` at a time, with two agents:
- ``flow``: training's default, ale-flow's loop in this process with its tools in the sandbox;
- ``cli``: ``ale eval``'s, ale-flow's CLI started inside the sandbox from its zip, detached;
  ``cli_baseline`` is the same before this round's changes (a source-only zip compiled at every
  start, the agent's end seen at host-side polls a second apart), measured in the same run.
Each reports episodes/s and the **overhead** (an episode's wall time minus its model time) p50 with
the p50 of every phase. ``gem_episodes_per_s`` plays GEM-mode DigitLock through the EnvService on
the same scripted model and concurrency. ``cli_start`` times the CLI's start alone in one sandbox
(wall and CPU, now and before). Headline keys: ``agent_native_episodes_per_s``,
``agent_native_episode_overhead_p50_ms`` (flow; goal ≤ 150 ms), ``agent_native_cli_*``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(_ROOT / "packages" / "ale-roll" / "src"))
sys.path.insert(0, str(_ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sections split into sibling modules

from _stdout import json_stdout  # noqa: E402
from ale_roll.buffer.sample_buffer import BufferConfig, FrontierEntry, SampleBuffer  # noqa: E402
from ale_roll.rollout.scheduler import RolloutScheduler  # noqa: E402
from ale_roll.types import Trajectory, Turn  # noqa: E402
from rollout_threads import torch_threads  # noqa: E402


@dataclass(frozen=True)
class Workload:
    """The simulated episodes (see the module docstring)."""

    batches: int = 8
    batch_size: int = 32
    turns: int = 4
    gen_ms: float = 20.0
    env_median_ms: float = 50.0
    env_sigma: float = 1.0
    train_ms: float = 150.0
    sync_ms: float = 10.0
    seed: int = 0

    def env_s(self, state: int, turn: int) -> float:
        rng = random.Random(self.seed * 1_000_003 + state * 101 + turn)
        return self.env_median_ms / 1000 * math.exp(self.env_sigma * rng.gauss(0.0, 1.0))

    def episode_s(self, state: int) -> float:
        return sum(self.gen_ms / 1000 + self.env_s(state, t) for t in range(self.turns))

    @property
    def episodes(self) -> int:
        return self.batches * self.batch_size


def _traj(state: int, version: int) -> Trajectory:
    return Trajectory([Turn([0], [1], [0.0], policy_version=version)], reward=1.0,
                      initial_state_id=f"state-{state}", seed=state, policy_version=version)


async def run_sync(w: Workload) -> float:
    """Lock-step batches: each turn waits for the slowest env step, training does not overlap."""
    t0 = time.perf_counter()
    for b in range(w.batches):
        states = range(b * w.batch_size, (b + 1) * w.batch_size)
        for t in range(w.turns):
            await asyncio.sleep(w.gen_ms / 1000)  # one batched generation call
            await asyncio.gather(*(asyncio.sleep(w.env_s(s, t)) for s in states))
        await asyncio.sleep(w.train_ms / 1000)
        await asyncio.sleep(w.sync_ms / 1000)
    return time.perf_counter() - t0


async def run_async(w: Workload, async_ratio: int) -> dict[str, Any]:
    """The real scheduler and buffer; training/sync are sleeps in the controller's loop order."""
    buffer = SampleBuffer(BufferConfig(async_ratio=async_ratio))

    async def episode(entry: FrontierEntry) -> Trajectory:
        version = buffer.version
        for t in range(w.turns):
            await asyncio.sleep(w.gen_ms / 1000)
            await asyncio.sleep(w.env_s(int(entry.seed or 0), t))
        return _traj(int(entry.seed or 0), version)

    sched = RolloutScheduler(buffer, episode, batch_size=w.batch_size, episodes_in_flight=w.batch_size,
                             async_ratio=async_ratio)
    t0 = time.perf_counter()
    task = asyncio.create_task(sched.run())
    staleness: list[int] = []
    for _ in range(w.batches):
        batch = await buffer.aget_batch(w.batch_size, timeout=120, poll_s=0.002)
        staleness += [buffer.version - t.version for t in batch]
        await asyncio.sleep(w.train_ms / 1000)
        await asyncio.sleep(w.sync_ms / 1000)
        buffer.set_version(buffer.version + 1)
        sched.wake()
    elapsed = time.perf_counter() - t0
    sched.stop()
    await task
    return {"seconds": elapsed, "max_staleness": max(staleness), "dropped": sum(buffer.dropped.values())}


def critical_path_s(w: Workload) -> float:
    work = sum(w.episode_s(k) for k in range(w.episodes))
    step = (w.train_ms + w.sync_ms) / 1000
    first_batch = sorted(w.episode_s(k) for k in range(w.episodes))[w.batch_size - 1]
    return max(work / w.batch_size + step, first_batch + w.batches * step)


# --- Agent-native episodes through the real stack ------------------------------------------------

# ChatML with tools (the scripted model never calls one: one model call per episode).
_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\nTools: {{ tools | tojson }}<|im_end|>\n{% endif %}"
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content or '' }}<|im_end|>\n{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass
class ScriptedEngine:
    """An InferenceEngine whose every reply is ``reply`` after ``model_ms`` (the same model for GEM and
    agent-native episodes); a random-init model would never end an agent's turn on purpose."""

    tokenizer: Any
    reply: str
    model_ms: float = 0.0
    version: int = 0
    max_model_len = 0  # the InferenceEngine Protocol's: no length check of its own

    def close(self) -> None:
        """Nothing to release."""

    @property
    def policy_version(self) -> int:
        return self.version

    def generate(self, prompts: Any, params: Any, request_ids: Any = None) -> list[Any]:
        from ale_roll.engines.base import Generation

        if self.model_ms:
            time.sleep(self.model_ms / 1000)
        ids = [*self.tokenizer.encode(self.reply, add_special_tokens=False), self.tokenizer.eos_token_id]
        return [Generation(request_ids[i] if request_ids else f"r{i}", ids, [-0.1] * len(ids), "stop", self.version,
                           list(p)) for i, p in enumerate(prompts)]  # fmt: skip

    def abort(self, request_id: str) -> bool:
        return False

    def update_weights(self, weights: Any, version: int) -> Any:
        raise NotImplementedError


@dataclass
class _FlowAgent:
    """ale-roll's FlowAgent (training's default: ale-flow's loop in this process, its tools in the
    sandbox) as an ale-rock episode agent."""

    params: Any

    def run(self, ctx: Any, cancel: Any) -> Any:
        from ale_rock.episode import AgentRun
        from ale_roll.rollout.agents import AgentContext, FlowAgent

        run = FlowAgent().run(AgentContext(ctx.provider, ctx.sandbox_id, ctx.prompt, ctx.base_url, ctx.api_key,
                                           ctx.model, ctx.budget_s, self.params), cancel)  # fmt: skip
        return AgentRun(run.exit_code, run.output, run.timed_out, run.stop_reason, run.model_failed)


def _cli_agent(zip_bytes: bytes, budget_s: float) -> Any:
    """ale eval's agent: ale-flow's CLI inside the sandbox, from the zip."""
    from ale.eval import agent
    from ale.eval.run import _FlowCommand

    cmd = agent.agent_command("Say done.", max_turns=4, max_tokens=64, temperature=0.0, native_tools=True,
                              time_limit_s=budget_s / 2)  # fmt: skip
    return _FlowCommand(cmd, {agent.AGENT_ZIP: zip_bytes})


def _source_only_zip() -> bytes:
    """The agent zip as it was before bytecode travelled with it (the baseline)."""
    import io
    import zipfile

    from ale.eval import agent

    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(agent.agent_zip())) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for item in zin.infolist():
            if not item.filename.endswith(".pyc"):
                z.writestr(item, zin.read(item))
    return out.getvalue()


def _p50(xs: list[float]) -> float:
    return round(statistics.median(xs) * 1000, 1) if xs else float("nan")


def _episodes(label: str, n: int, concurrency: int, run_one: Any) -> dict[str, Any]:
    """``n`` episodes, ``concurrency`` at a time: episodes/s and the overhead (wall - model) by phase."""
    from concurrent.futures import ThreadPoolExecutor

    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency, thread_name_prefix=f"bench-{label}") as pool:
        outs = list(pool.map(run_one, range(n)))
    elapsed = time.perf_counter() - t0
    ok = [o for o in outs if not o.is_error]
    phases = sorted({p for o in ok for p in o.phase_s})
    return {
        "episodes": n, "errors": n - len(ok), "concurrency": concurrency,
        "first_error": next((f"{o.error_kind}: {o.error[:300]}" for o in outs if o.is_error), ""),
        "episodes_per_s": round(len(ok) / elapsed, 2),
        "overhead_p50_ms": _p50([o.wall_s - o.model_s for o in ok]),
        "wall_p50_ms": _p50([o.wall_s for o in ok]),
        "model_p50_ms": _p50([o.model_s for o in ok]),
        "calls_per_episode": round(sum(len(o.records) for o in ok) / max(1, len(ok)), 2),
        "phase_p50_ms": {p: _p50([o.phase_s.get(p, 0.0) for o in ok]) for p in phases},
        # The agent phase minus its model calls: the agent's start, its loop and its tool calls.
        "agent_minus_model_p50_ms": _p50([o.phase_s.get("agent", 0.0) - o.model_s for o in ok]),
    }


async def _gem_episodes(engine: Any, tokenizer: Any, env_address: str, n: int, concurrency: int) -> float:
    from ale_roll.config import EnvConfig
    from ale_roll.engines.base import SamplingParams
    from ale_roll.rollout import BatchingGenerator, ChatFormat, EpisodeRunner
    from ale_roll.trainer.controller import make_env_factory

    generator = BatchingGenerator(engine, timeout_s=60)
    runner = EpisodeRunner(make_env_factory(EnvConfig(id=GEM_GAME, address=env_address), 30), generator,
                           ChatFormat(tokenizer), SamplingParams(max_tokens=16), max_turns=4, env_threads=True)  # fmt: skip
    sem = asyncio.Semaphore(concurrency)

    async def one(k: int) -> None:
        async with sem:
            await runner.run(seed=k, initial_state_id=f"s{k}")

    t0 = time.perf_counter()
    try:
        await asyncio.gather(*(one(k) for k in range(n)))
    finally:
        await generator.close()
    return n / (time.perf_counter() - t0)


GEM_GAME = "game:DigitLock-v0"


def cli_start(provider: Any, rounds: int) -> dict[str, Any]:
    """ale-flow's CLI started in one sandbox against a closed port (it fails its one model call and
    exits): wall and CPU (user + sys: robust to a busy machine) p50 of the zip as built now (with
    bytecode, no pydantic plugin scan) and of the source-only zip before it, interleaved."""
    import sys as _sys

    from ale.eval import agent

    sid = provider.create({"ale.bench": "cli-start"})
    try:
        provider.upload(sid, {"now/ale_flow.zip": agent.agent_zip(), "before/ale_flow.zip": _source_only_zip()})
        args = "-m ale_flow.cli -p hi --yolo --max-steps 1 --base-url http://127.0.0.1:9/v1 --model m -c model.max_retries=0"
        env = {"now": "PYDANTIC_DISABLE_PLUGINS=__all__ PYTHONPATH=now/ale_flow.zip",
               "before": "PYTHONPATH=before/ale_flow.zip"}  # fmt: skip
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in env}
        for _ in range(rounds):
            for k, e in env.items():
                cmd = (f"TIMEFORMAT='%3R %3U %3S'; {{ time env PYTHONDONTWRITEBYTECODE=1 {e} {_sys.executable} {args} "
                       ">/dev/null 2>&1; } 2>&1")  # fmt: skip
                wall, user, sys_ = (float(x) for x in provider.exec(sid, cmd, 60).output.split()[-3:])
                times[k].append((wall, user + sys_))
    finally:
        provider.delete(sid)
    return {f"{k}_{m}_p50_ms": round(statistics.median(t[i] for t in v) * 1000, 1)
            for k, v in times.items() for i, m in enumerate(("wall", "cpu"))}  # fmt: skip


def agent_native(episodes: int, concurrency: int, task_id: str, model_ms: float, baseline: bool,
                 gem_episodes: int = 0, warmup: bool = True, start_rounds: int = 7) -> dict[str, Any]:
    """A real LocalCluster (admin + worker, bubblewrap sandboxes), the ModelProxy, the InferenceService
    over a scripted model; GEM mode on the same model through the EnvService. See the module docstring."""
    import shutil
    import tempfile

    if shutil.which("bwrap") is None:
        return {"skipped": "bubblewrap is not installed (apt-get install bubblewrap): no sandboxes"}
    from ale_rock.envs.sandbox import SdkProvider
    from ale_rock.envs.server import EnvServerConfig, serve_env_service
    from ale_rock.envs.terminal import find_task
    from ale_rock.episode import run_episode
    from ale_rock.local_cluster import LocalCluster, real_worker_argv
    from ale_rock.proxy import ModelProxyConfig, serve_model_proxy
    from ale_rock.sdk.model_proxy import ModelProxyClient
    from ale_roll.engines.base import SamplingParams
    from ale_roll.engines.inference_server import InferenceServicer, serve
    from ale_roll.models.tiny import train_tokenizer

    from ale.eval import agent
    from ale.eval.detached import DetachedExecProvider

    tok = train_tokenizer(512)
    tok.chat_template = _TEMPLATE
    engine = ScriptedEngine(tok, "Done.", model_ms)
    task = find_task(task_id)
    budget = 600.0  # ale eval's default: the CLI agent runs detached, as there
    server, port = serve(InferenceServicer(engine, tok, backend="scripted", default_max_tokens=64))
    host_proxy = serve_model_proxy(ModelProxyConfig())
    sandbox_proxy = serve_model_proxy(ModelProxyConfig(public_base_url="http://model-proxy:80"))
    env_server = serve_env_service(EnvServerConfig(port=0))
    result: dict[str, Any] = {"task": task_id, "model": f"scripted reply 'Done.' after {model_ms:g} ms (one call)",
                              "gem_game": GEM_GAME}  # fmt: skip
    try:
        with tempfile.TemporaryDirectory(prefix="ale-bench-") as tmp, LocalCluster(
            workers=1, workdir=Path(tmp),
            worker_argv=real_worker_argv({"model_proxy_address": sandbox_proxy.http_url.removeprefix("http://")}),
        ) as cluster:  # fmt: skip
            params = SamplingParams(max_tokens=64)
            host_client = ModelProxyClient(host_proxy.grpc_address)
            sandbox_client = ModelProxyClient(sandbox_proxy.grpc_address)
            target = f"127.0.0.1:{port}"

            def runner(agent_: Any, provider: Any, proxy: Any, tag: str) -> Any:
                def one(k: int) -> Any:
                    return run_episode(task, agent_, provider=provider, proxy=proxy, upstream="inference",
                                       target=target, model="policy", max_calls=8, budget_s=budget,
                                       episode_id=f"bench-{tag}-{k}-{time.monotonic_ns()}",
                                       require_token_ids=True)  # fmt: skip
                return one

            flow_provider = SdkProvider(cluster.address, cluster.api_key())
            sdk = SdkProvider(cluster.address, cluster.api_key(), allow=("model-proxy",))
            cli_provider = DetachedExecProvider(sdk)
            if warmup:  # imports, the first sandbox, the zip: not measured
                runner(_FlowAgent(params), flow_provider, host_client, "warm")(0)
                runner(_cli_agent(agent.agent_zip(), budget), cli_provider, sandbox_client, "warm")(0)
            result["flow"] = _episodes("flow", episodes, concurrency,
                                       runner(_FlowAgent(params), flow_provider, host_client, "flow"))  # fmt: skip
            result["cli"] = _episodes("cli", episodes, concurrency, runner(
                _cli_agent(agent.agent_zip(), budget), cli_provider, sandbox_client, "cli"))  # fmt: skip
            result["cli_start"] = cli_start(sdk, start_rounds)
            if baseline:
                # Before this round: source-only zip (compiled at every start), host-side polls every second.
                old = DetachedExecProvider(sdk, poll_s=1.0, wait_s=1.0)
                result["cli_baseline"] = _episodes("cli0", episodes, concurrency, runner(
                    _cli_agent(_source_only_zip(), budget), old, sandbox_client, "cli0"))  # fmt: skip
            host_client.close()
            sandbox_client.close()
        result["gem_episodes_per_s"] = round(asyncio.run(_gem_episodes(
            engine, tok, env_server.address, gem_episodes or max(episodes * 8, 64), concurrency)), 2)  # fmt: skip
    finally:
        env_server.stop(0)
        host_proxy.stop(0)
        sandbox_proxy.stop(0)
        server.stop(grace=None)
    # The headline: training's agent (ale-flow's loop, tools in the sandbox); ale eval's CLI beside it.
    result["agent_native_episodes_per_s"] = result["flow"]["episodes_per_s"]
    result["agent_native_episode_overhead_p50_ms"] = result["flow"]["overhead_p50_ms"]
    result["agent_native_cli_episodes_per_s"] = result["cli"]["episodes_per_s"]
    result["agent_native_cli_episode_overhead_p50_ms"] = result["cli"]["overhead_p50_ms"]
    result["overhead_goal_ms"] = 150.0
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", action="store_true", help="print only the JSON result")
    for name, default in Workload().__dict__.items():
        p.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
    p.add_argument("--agent-episodes", type=int, default=12, help="agent-native episodes per agent (0: skip)")
    p.add_argument("--agent-concurrency", type=int, default=2)
    p.add_argument("--agent-task", default="csv-sales-rollup", help="built-in task id of the agent-native episodes")
    p.add_argument("--model-ms", type=float, default=0.0, help="the scripted model's time per call")
    p.add_argument("--no-baseline", action="store_true", help="skip the before-this-round CLI agent")
    p.add_argument("--threads-completions", type=int, default=256,
                   help="completions per step of the 1-vs-2 torch threads section (0: skip)")
    p.add_argument("--threads-rounds", type=int, default=6, help="runs per thread count, alternating 1, 2, 1, 2, ...")
    p.add_argument("--threads-steps", type=int, default=6, help="steps per run (the first is warm-up, left out)")
    p.add_argument("--threads-model", default="tiny", help="policy model of the threads section: tiny (ale-roll's "
                   "default tiny model) or micro (1 layer, hidden 64)")
    p.add_argument("--sections", default="sim,threads,agent",
                   help="comma-separated: sim (sync vs async scheduling), threads (1 vs 2 torch threads), "
                        "agent (agent-native episodes through the stack)")
    args = p.parse_args(argv)
    sections = set(args.sections.split(","))
    if unknown := sections - {"sim", "threads", "agent"}:
        p.error(f"unknown sections: {sorted(unknown)}")
    if args.json:
        with json_stdout() as emit:  # stdout carries the JSON alone (libraries print on their own)
            result = _sections(args, sections)
            emit(json.dumps(result))
        return result
    result = _sections(args, sections)
    print(json.dumps(result, indent=2))
    if "sync_s" in result:
        print(f"\nsync {result['sync_s']:.2f}s | async η=1 {result['async_ratio_1_s']:.2f}s | async η=2 "
              f"{result['async_ratio_2_s']:.2f}s | speedup {result['speedup']}x of ideal {result['ideal_speedup']}x "
              f"({result['fraction_of_ideal']:.0%})")
    return result


def _sections(args: argparse.Namespace, sections: set[str]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    if "sim" in sections:
        result.update(scheduling(Workload(**{k: getattr(args, k) for k in Workload().__dict__})))
    if "threads" in sections and args.threads_completions > 0:
        result["torch_threads"] = torch_threads(args.threads_completions, args.threads_steps, args.threads_rounds,
                                                 args.threads_model)
        result["two_vs_one_threads"] = result["torch_threads"]["two_vs_one_threads"]
    if "agent" in sections and args.agent_episodes > 0:
        an = agent_native(args.agent_episodes, args.agent_concurrency, args.agent_task, args.model_ms,
                          not args.no_baseline)  # fmt: skip
        for key in ("agent_native_episodes_per_s", "gem_episodes_per_s", "agent_native_episode_overhead_p50_ms",
                    "agent_native_cli_episodes_per_s", "agent_native_cli_episode_overhead_p50_ms"):
            if key in an:
                result[key] = an[key]
        result["agent_native"] = an
    return result


def scheduling(w: Workload) -> dict[str, Any]:
    """Sync vs the real scheduler at async ratio 1 and 2 on the simulated workload."""
    sync_s = asyncio.run(run_sync(w))
    a1 = asyncio.run(run_async(w, 1))
    a2 = asyncio.run(run_async(w, 2))
    bound = critical_path_s(w)
    best = min(a1["seconds"], a2["seconds"])
    result = {
        "workload": w.__dict__,
        "env_latency": f"lognormal(median={w.env_median_ms} ms, sigma={w.env_sigma})",
        "sync_s": round(sync_s, 3),
        "async_s": round(best, 3),
        "async_ratio_1_s": round(a1["seconds"], 3),
        "async_ratio_2_s": round(a2["seconds"], 3),
        "speedup": round(sync_s / best, 2),
        "speedup_ratio_1": round(sync_s / a1["seconds"], 2),
        "speedup_ratio_2": round(sync_s / a2["seconds"], 2),
        "ideal_speedup": round(sync_s / bound, 2),
        "fraction_of_ideal": round(bound / best, 3),
        "max_staleness": {"ratio_1": a1["max_staleness"], "ratio_2": a2["max_staleness"]},
        "dropped": {"ratio_1": a1["dropped"], "ratio_2": a2["dropped"]},
    }
    return result


if __name__ == "__main__":
    main()
