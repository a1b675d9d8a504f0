"""bench/rollout.py's ``threads`` section: a real synchronous step on CPU with 1 vs 2 torch threads.

    python bench/rollout.py --sections threads [--threads-rounds 10] --json

See :func:`torch_threads` (the workload is the issue's: a tiny model, a single-turn dataset task,
256 completions per step, async ratio 0).
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

_THREADS_TASK = """
def reward(prompts, completions, answer, **kwargs):
    return [float(c.strip() == a) for c, a in zip(completions, answer)]
"""


MODELS: dict[str, dict[str, Any]] = {
    # ale-roll's tiny model as built by default (TinyModelConfig: 2 layers, hidden 128, MLP 256).
    "tiny": {"arch": "llama", "vocab_size": 300, "max_position_embeddings": 64, "seed": 0},
    # A smaller one (1 layer, hidden 64): a step of mostly Python and launch overhead.
    "micro": {"arch": "llama", "vocab_size": 300, "hidden_size": 64, "num_layers": 1, "num_heads": 2,
              "num_kv_heads": 2, "head_dim": 32, "intermediate_size": 64, "max_position_embeddings": 64, "seed": 0},
}
"""Models of the section (``--threads-model``)."""


def threads_config(out: Path, threads: int, completions: int, iterations: int, model: str = "tiny") -> Any:
    """The issue's workload: a tiny model, a single-turn dataset task (jsonl + reward function),
    `completions` per step in groups of 8, async ratio 0, everything in one step's batch."""
    from ale_roll.config import build_config

    words = ["yes", "no", "maybe", "say", ":"] + [f"w{i}" for i in range(40)]
    return build_config({
        "output_dir": str(out / f"run-{model}-{threads}"), "config_dir": str(out), "iterations": iterations, "seed": 0,
        "model": {"tiny": MODELS[model], "word_vocab": words},
        "engine": {"torch_threads": threads},
        "env": {"data": str(out / "train.jsonl"), "reward_fn": "bench_threads_task:reward"},
        "rollout": {"batch_size": completions, "group_size": 8, "episodes_in_flight": completions,
                    "max_batch": completions, "max_turns": 1, "max_new_tokens": 4, "async_ratio": 0,
                    "observation_template": "{observation} :", "env_threads": False, "filters": ["env_noise"]},
        "algorithm": {"loss": "ipa", "config": {"advantage": {"group_norm": True}}},
        "eval": {"episodes": 0}, "checkpoint": {"every": 0, "resume": False},
        "metrics": {"tensorboard": False, "plot": False, "progress": False},
    })


_PHASES = {"step": "time/step_s", "rollout": "time/wait_batch_s", "generate": "time/generate_s",
           "train": "time/train_s", "sync": "time/sync_s"}


def _loop_cpu(out: Path, policy: Any, completions: int, iterations: int, rounds: int, model: str) -> dict[str, float]:
    """CPU time of the event-loop thread per step (median; 1 torch thread), batched episodes vs one asyncio
    task per episode (`batch_fn` off: the path before), alternating. CPU time, unlike wall time,
    hardly moves with other processes' load: it is the per-episode overhead that threads cannot touch."""
    from ale_roll.trainer.controller import Controller

    cpu: dict[str, list[float]] = {"batched": [], "per_episode": []}
    for _ in range(rounds):
        for mode in cpu:
            marks: list[float] = []
            ctl = Controller(threads_config(out, 1, completions, iterations, model), policy=policy,
                             on_step=lambda _s, _m, rec=marks: rec.append(time.thread_time()))  # type: ignore[misc]
            if mode == "per_episode":
                ctl.scheduler.batch_fn = None
            ctl.run()
            cpu[mode] += [b - a for a, b in zip(marks, marks[1:], strict=False)]
    med = {k: statistics.median(v) * 1000 for k, v in cpu.items()}
    return {**{k: round(v, 2) for k, v in med.items()}, "batched_vs_per_episode": round(med["batched"] / med["per_episode"], 3)}


def torch_threads(completions: int = 256, iterations: int = 6, rounds: int = 6, model: str = "tiny") -> dict[str, Any]:
    """Step time with 1 and 2 torch threads on the issue's workload (a real synchronous step: tiny
    model, single-turn dataset task, `completions` per step, async ratio 0).

    Runs alternate 1, 2, 1, 2, … (`rounds` of each, one Controller per run, the first step of a run
    left out as warm-up) so drift and other processes' load hit both alike; medians per thread count,
    and the median of each round's own 2-vs-1 ratio (pairs measured back to back). Phases: `rollout`
    (waiting for the batch: env + generation + the loop's per-episode work), `generate` (the engine
    busy), `train`, `sync`; `rollout_minus_generate` is the Python time that threads cannot speed up."""
    import os
    import tempfile

    from ale_roll.trainer.controller import Controller
    from ale_roll.trainer.setup import build_policy

    load_before = os.getloadavg()
    out = Path(tempfile.mkdtemp(prefix="ale-threads-"))
    (out / "bench_threads_task.py").write_text(_THREADS_TASK)
    (out / "train.jsonl").write_text("".join(
        json.dumps({"prompt": f"say {w}", "answer": w}) + "\n" for w in ["yes", "no", "maybe"] * 11))
    policy = build_policy(threads_config(out, 1, completions, iterations, model))
    phases: dict[int, dict[str, list[float]]] = {t: {k: [] for k in _PHASES} for t in (1, 2)}
    pairs: list[float] = []
    t0 = time.perf_counter()
    for _ in range(rounds):
        round_median: dict[int, float] = {}
        for threads in (1, 2):
            records: list[dict[str, Any]] = []
            # The Controller sets `engine.torch_threads` on the process's one torch thread.
            Controller(threads_config(out, threads, completions, iterations, model), policy=policy,
                       on_step=lambda _s, m, rec=records: rec.append(m)).run()  # type: ignore[misc]
            for name, key in _PHASES.items():
                phases[threads][name] += [float(m[key]) for m in records[1:]]
            round_median[threads] = statistics.median(float(m["time/step_s"]) for m in records[1:])
        pairs.append(round_median[2] / round_median[1])
    loop_cpu = _loop_cpu(out, policy, completions, iterations, max(1, rounds // 2), model)
    med = {t: {k: statistics.median(v) for k, v in p.items()} for t, p in phases.items()}
    for t in med:
        med[t]["rollout_minus_generate"] = med[t]["rollout"] - med[t]["generate"]
    return {"model": model, "completions_per_step": completions, "rounds": rounds, "steps_per_run": iterations - 1,
            "step_s_1_thread": round(med[1]["step"], 4), "step_s_2_threads": round(med[2]["step"], 4),
            "two_vs_one_threads": round(med[2]["step"] / med[1]["step"], 3),
            "two_vs_one_paired_median": round(statistics.median(pairs), 3),
            "two_vs_one_per_round": [round(x, 3) for x in pairs],
            "generate_s_1_thread": round(med[1]["generate"], 4), "generate_s_2_threads": round(med[2]["generate"], 4),
            "phases_s": {f"{t}_thread{'s' if t > 1 else ''}": {k: round(v, 4) for k, v in m.items()}
                         for t, m in med.items()},
            "loop_cpu_ms_per_step": loop_cpu,
            "goal_two_vs_one": 0.8, "seconds": round(time.perf_counter() - t0, 1), "cpus": os.cpu_count(),
            "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the section alone (`make bench` runs every bench/*.py with --json)."""
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true", help="print only the JSON result")
    p.add_argument("--completions", type=int, default=256)
    p.add_argument("--rounds", type=int, default=6, help="runs per thread count, alternating 1, 2, 1, 2, ...")
    p.add_argument("--steps", type=int, default=6, help="steps per run (the first is warm-up, left out)")
    p.add_argument("--model", choices=sorted(MODELS), default="tiny", help="the policy model (see MODELS)")
    args = p.parse_args(argv)
    if not args.json:
        result = torch_threads(args.completions, args.steps, args.rounds, args.model)
        print(json.dumps(result, indent=2))
        return result
    from _stdout import json_stdout  # a sibling module: run as a script, bench/ is on sys.path

    with json_stdout() as emit:  # stdout carries the JSON alone (libraries print on their own)
        result = torch_threads(args.completions, args.steps, args.rounds, args.model)
        emit(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
