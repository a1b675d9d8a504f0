"""Benchmark: what 15 minutes of `ale up` buy in agent-native episodes of the lock task family.

    .venv/bin/python bench/agent_budget.py --json                  # ~1-2 min on a quiet machine

The real stack of agent-native training (a LocalCluster: Admin + Worker + bubblewrap sandboxes; the
ModelProxy; the InferenceService; ale-flow's agent loop in this process, its shell tool in the
sandbox; ale-rock's one episode runner: setup → open → agent → close + records → verify → delete) on
two workloads, measured in the same run:

- **baseline**: bench/rollout.py's agent-native headline workload (built-in task
  ``csv-sales-rollup``, a scripted model that answers once with no tool call), so a loaded run can be
  compared with that figure measured on a quiet machine;
- **sandbox_only**: create → ``true`` → delete, nothing else: the ceiling of agent-native
  episodes/s with a fresh sandbox per episode (each sandbox boots its own Python Rocklet);
- **lock**: one instance of ``ale_rock.tasks.lock_family`` (Harbor layout: the Dockerfile's steps
  applied at setup, ``tests/test.sh`` writing ``reward.txt``), a scripted model that makes
  ``--guesses`` tool calls ``python3 lock.py d d d`` and then answers: the shape of one DigitLock
  episode of `ale up`'s agent-native job (5 model calls, 4 shell commands in the sandbox).

The scripted model costs ~nothing, so the figures are the infrastructure's: episodes/s at each
concurrency, wall and phases p50, and **the stack's CPU per episode**, which a loaded machine barely
changes: this process (the agent loop, the ModelProxy, the InferenceService), the Admin and Worker
processes (``/proc``) and every sandbox (the worker's cgroup parent, v1 ``cpuacct``; ``None``
without it). ``lock_episodes_per_s_cpu_ceiling`` = cores / CPU per episode: what the machine could
do with every core on episodes and no trainer. ``machine_cpu_ms_per_episode`` (``/proc/stat``,
everything on the machine) is meaningful on a quiet machine only.

``budget`` turns the best lock rate into the 15-minute job's arithmetic: the RL episodes the GEM
pipeline needed on DigitLock for RL's 95% interval to clear SFT's over 300 held-out locks (one seed,
12 steps x 256: measured with ``ale-roll train -c src/ale/job/default_roll.yaml iterations=12
eval.episodes=300``, see docs/results.md), plus 3 x 300 held-out evaluation episodes (untrained, SFT,
RL) and the teacher's synthesis and re-check, against the time left after the fixed costs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rollout as _r  # noqa: E402  (bench/rollout.py: the scripted engine, the ChatML template, the episode loop)

from ale.job.lock_engine import CALL as _CALL  # noqa: E402  (the lock policy's tool call)


class GuessingEngine(_r.ScriptedEngine):
    """On a lock task, replies with a guess as a tool call until ``guesses`` tool results are in the
    prompt, then ``Done.``; on any other task ``Done.`` at once (the baseline: bench/rollout.py's model)."""

    guesses: int = 4

    def generate(self, prompts: Any, params: Any, request_ids: Any = None) -> list[Any]:
        from ale_roll.engines.base import Generation
        from ale_roll.types import StopReason

        out = []
        for i, p in enumerate(prompts):
            text = self.tokenizer.decode(list(p))
            n = text.count("<tool_response>")
            lock = "lock.py" in text
            reply = _CALL.replace("GUESS", " ".join([str(n % 10)] * 3)) if lock and n < self.guesses else "Done."
            ids = [*self.tokenizer.encode(reply, add_special_tokens=False), self.tokenizer.eos_token_id]
            out.append(Generation(request_ids[i] if request_ids else f"r{i}", ids, [-0.1] * len(ids), StopReason.STOP,
                                  self.version, list(p)))  # fmt: skip
        return out


def _machine_busy_s() -> float:
    """Busy CPU seconds of the whole machine since boot (all cores)."""
    fields = [float(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
    return (sum(fields) - idle) / 100.0  # USER_HZ


class StackCpu:
    """CPU seconds the stack used, whatever else runs on the machine: this process (agent loop,
    ModelProxy, InferenceService), the Admin and Worker processes, and every sandbox (the worker's
    cgroup parent: cpuacct counts a removed sandbox group's usage in its parent)."""

    def __init__(self, pids: list[int], sandbox_group: Path | None) -> None:
        self.pids, self.group = pids, sandbox_group

    @staticmethod
    def _proc_s(pid: int) -> float:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / 100.0  # utime + stime, USER_HZ

    def sandbox_s(self) -> float | None:
        if self.group is None or not (self.group / "cpuacct.usage").is_file():
            return None
        return int((self.group / "cpuacct.usage").read_text()) / 1e9

    def host_s(self) -> float:
        return time.process_time() + sum(self._proc_s(p) for p in self.pids)


def _sandbox_group(cluster: Any) -> Path | None:
    """The worker's sandbox cgroup parent in the v1 cpuacct hierarchy (None without cgroups v1)."""
    import hashlib

    wid = next(iter(cluster.worker_pids()))
    state = cluster.worker_state_dir(wid).resolve()
    group = Path("/sys/fs/cgroup/cpuacct") / ("ale-" + hashlib.sha256(str(state).encode()).hexdigest()[:10])
    return group if group.is_dir() else None


_CPU: StackCpu | None = None


def _measure(label: str, n: int, concurrency: int, one: Any) -> dict[str, Any]:
    cpu0, busy0 = time.process_time(), _machine_busy_s()
    host0 = _CPU.host_s() if _CPU else 0.0
    box0 = _CPU.sandbox_s() if _CPU else None
    res: dict[str, Any] = _r._episodes(label, n, concurrency, one)
    ok = max(1, n - int(res["errors"]))
    res["process_cpu_ms_per_episode"] = round((time.process_time() - cpu0) * 1000 / ok, 1)
    res["machine_cpu_ms_per_episode"] = round((_machine_busy_s() - busy0) * 1000 / ok, 1)
    if _CPU is not None:
        host = (_CPU.host_s() - host0) * 1000 / ok
        box1 = _CPU.sandbox_s()
        sandbox = (box1 - box0) * 1000 / ok if box0 is not None and box1 is not None else None
        res["stack_cpu_ms_per_episode"] = {
            "host": round(host, 1), "sandboxes": None if sandbox is None else round(sandbox, 1),
            "total": None if sandbox is None else round(host + sandbox, 1)}  # fmt: skip
    res["load"] = [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    return res


def budget(eps_per_s: float, rl_episodes: int, eval_episodes: int, synthesis_episodes: int, fixed_s: float,
           job_s: float = 900.0) -> dict[str, Any]:
    """The 15-minute job's arithmetic at ``eps_per_s`` agent-native episodes/s."""
    total = rl_episodes + eval_episodes + synthesis_episodes
    need = total / max(1e-9, job_s - fixed_s)
    projected = fixed_s + total / max(1e-9, eps_per_s)
    return {"episodes": total, "rl_episodes": rl_episodes, "eval_episodes": eval_episodes,
            "synthesis_episodes": synthesis_episodes, "fixed_s": fixed_s,
            "needed_episodes_per_s": round(need, 2), "measured_episodes_per_s": eps_per_s,
            "projected_job_s": round(projected, 1), "fits": projected <= job_s}  # fmt: skip


def run(n: int, concurrencies: list[int], guesses: int, baseline_n: int) -> dict[str, Any]:
    from ale_rock.envs.sandbox import SdkProvider
    from ale_rock.envs.terminal import find_task
    from ale_rock.episode import run_episode
    from ale_rock.local_cluster import LocalCluster, real_worker_argv
    from ale_rock.proxy import ModelProxyConfig, serve_model_proxy
    from ale_rock.sdk.model_proxy import ModelProxyClient
    from ale_rock.tasks import load_task
    from ale_rock.tasks.lock_family import write_lock_task
    from ale_rock.tasks.models import Split
    from ale_roll.engines.base import SamplingParams
    from ale_roll.engines.inference_server import InferenceServicer, serve
    from ale_roll.models.tiny import train_tokenizer

    tok = train_tokenizer(512)
    tok.chat_template = _r._TEMPLATE
    engine = GuessingEngine(tok, "Done.")
    engine.guesses = guesses
    tmp_tasks = tempfile.mkdtemp(prefix="ale-budget-")
    lock = load_task(write_lock_task(Path(tmp_tasks) / "lock", 5, Split.HELD_OUT))
    csv = find_task("csv-sales-rollup")
    server, port = serve(InferenceServicer(engine, tok, backend="scripted", default_max_tokens=256))
    proxy = serve_model_proxy(ModelProxyConfig())
    out: dict[str, Any] = {"guesses": guesses, "lock": {}}
    try:
        with tempfile.TemporaryDirectory(prefix="ale-budget-") as tmp, LocalCluster(
            workers=1, workdir=Path(tmp), worker_argv=real_worker_argv({})) as cluster:  # fmt: skip
            client = ModelProxyClient(proxy.grpc_address)
            flow = _r._FlowAgent(SamplingParams(max_tokens=256))

            # The lock family's task.toml sizes its sandboxes (cpus 0.25, 256M): the episode applies it.
            provider = SdkProvider(cluster.address, cluster.api_key())
            global _CPU
            admin = [cluster.admin.popen.pid] if cluster.admin is not None else []
            _CPU = StackCpu([*admin, *cluster.worker_pids().values()], _sandbox_group(cluster))

            def episode(task: Any, tag: str) -> Any:
                def one(k: int) -> Any:
                    return run_episode(task, flow, provider=provider, proxy=client, upstream="inference",
                                       target=f"127.0.0.1:{port}", model="policy", max_calls=guesses + 4,
                                       budget_s=60, episode_id=f"budget-{tag}-{k}-{time.monotonic_ns()}",
                                       require_token_ids=True)  # fmt: skip
                return one

            episode(lock, "warm")(0)  # imports, the first sandbox: not measured
            out["baseline"] = _measure("base", baseline_n, 1, episode(csv, "base"))

            def bare(k: int) -> float:  # the ceiling: a fresh sandbox per episode and nothing else
                t0 = time.perf_counter()
                sid = provider.create({"ale.bench": "bare"})
                try:
                    provider.exec(sid, "true", 10)
                finally:
                    provider.delete(sid)
                return time.perf_counter() - t0

            out["sandbox_only"] = {}
            for c in concurrencies:
                from concurrent.futures import ThreadPoolExecutor

                t0, host0, box0 = time.perf_counter(), _CPU.host_s(), _CPU.sandbox_s()
                with ThreadPoolExecutor(c) as pool:
                    walls = sorted(pool.map(bare, range(n)))
                elapsed = time.perf_counter() - t0
                box1 = _CPU.sandbox_s()
                out["sandbox_only"][f"c{c}"] = {
                    "sandboxes_per_s": round(n / elapsed, 2), "create_exec_delete_p50_ms": round(walls[n // 2] * 1000, 1),
                    "host_cpu_ms_per_sandbox": round((_CPU.host_s() - host0) * 1000 / n, 1),
                    "sandbox_cpu_ms_per_sandbox": None if box0 is None or box1 is None else round((box1 - box0) * 1000 / n, 1),
                    "load": [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]}  # fmt: skip
            for c in concurrencies:
                out["lock"][f"c{c}"] = _measure("lock", n, c, episode(lock, f"c{c}"))
            client.close()
    finally:
        proxy.stop(0)
        server.stop(grace=None)
        shutil.rmtree(tmp_tasks, ignore_errors=True)
    totals = [v["stack_cpu_ms_per_episode"]["total"] for v in out["lock"].values()
              if (v.get("stack_cpu_ms_per_episode") or {}).get("total")]
    if totals:
        # Load-independent: CPU-seconds per episode; 2 cores busy with nothing else is the ceiling.
        cores = len(os.sched_getaffinity(0))
        out["lock_cpu_ms_per_episode"] = min(totals)
        out["lock_episodes_per_s_cpu_ceiling"] = round(cores * 1000 / min(totals), 2)
        out["cores"] = cores
    best = max(v["episodes_per_s"] for v in out["lock"].values())
    out["lock_episodes_per_s_best"] = best
    out["baseline_quiet_reference"] = {"episodes_per_s": 4.52, "overhead_p50_ms": 162.7,
                                       "source": "docs/roll.md (bench/rollout.py, load 0.85, 2026-12-01)"}
    # Scaled to a quiet machine by the baseline's ratio in this run (1.0 when this run is quiet).
    scale = max(1.0, 4.52 / max(1e-9, out["baseline"]["episodes_per_s"]))
    out["lock_episodes_per_s_quiet_estimate"] = round(best * scale, 2)
    plan = {"rl_episodes": 3900, "eval_episodes": 900, "synthesis_episodes": 300, "fixed_s": 90.0}
    out["budget"] = budget(best, **plan)  # type: ignore[arg-type]
    out["budget_quiet_estimate"] = budget(out["lock_episodes_per_s_quiet_estimate"], **plan)  # type: ignore[arg-type]
    if "lock_episodes_per_s_cpu_ceiling" in out:
        # The most the machine could do with every core on episodes and no trainer: an upper bound.
        out["budget_cpu_ceiling"] = budget(out["lock_episodes_per_s_cpu_ceiling"], **plan)  # type: ignore[arg-type]
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", action="store_true", help="print only the JSON result")
    p.add_argument("--episodes", type=int, default=24, help="lock episodes per concurrency")
    p.add_argument("--concurrency", default="1,2", help="comma-separated concurrencies of the lock episodes")
    p.add_argument("--guesses", type=int, default=4, help="tool calls per lock episode")
    p.add_argument("--baseline-episodes", type=int, default=16)
    args = p.parse_args()
    if shutil.which("bwrap") is None:
        print(json.dumps({"skipped": "bubblewrap is not installed: no sandboxes"}))
        return
    from _stdout import json_stdout  # a sibling module: run as a script, bench/ is on sys.path

    with json_stdout() as emit:  # stdout carries the JSON alone (libraries print on their own)
        res = run(args.episodes, [int(c) for c in args.concurrency.split(",")], args.guesses, args.baseline_episodes)
        if args.json:
            emit(json.dumps(res))
            return
    for c, v in res["lock"].items():
        print(f"lock {c}: {v['episodes_per_s']} episodes/s, wall p50 {v['wall_p50_ms']} ms, phases {v['phase_p50_ms']}")
    print(f"baseline: {res['baseline']['episodes_per_s']} episodes/s (quiet reference 4.52)")
    print(f"budget: {res['budget']}")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
