"""Chunk-level initialized resampling (Eq. 10) on a task the policy cannot do: with vs without.

    python bench/resampling.py --json [--iterations 30] [--sft-steps 0]

DigitLock (3 digits, 5 guesses) with a tiny random-init Llama (word-level vocabulary), IPA with
group-normalized rewards, async ratio 0, 16 states x 4 rollouts per step. The two runs share the
seed, the model init, the states and the held-out evaluation (greedy, `--eval` distinct held-out
locks); the second sets `algorithm.resampling.enabled=true` with the game's own expert (the
per-digit binary search) as `expert_data` for every training seed. Each run is its own process.
Prints held-out success before/after and wall time per run, the resampling counters summed over
steps, and the load average (the machine may be shared).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIG = """
name: lock-resampling-bench
seed: {seed}
iterations: {iterations}
model:
  tiny: {{arch: llama, vocab_size: 300, hidden_size: 128, num_layers: 2, num_heads: 4, num_kv_heads: 4,
         head_dim: 32, intermediate_size: 256, max_position_embeddings: 128, seed: 0}}
  word_vocab: ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "start", "higher", "lower", "correct",
               "invalid", ":"]
engine: {{train: torch, inference: hf, torch_threads: 1}}
rollout:
  batch_size: 64
  group_size: 4
  episodes_in_flight: 64
  async_ratio: 0
  max_turns: 5
  max_new_tokens: 3
  observation_template: "{{observation}} :"
  observation_rewrite: [['^A lock with.*$', 'start'], ['^invalid.*$', 'invalid']]
  env_threads: false
  filters: [env_noise]
  max_batch: 256
  batch_window_ms: 5
algorithm:
  loss: ipa
  config: {{gamma: 0.95, advantage: {{group_norm: true}}}}
  resampling: {{enabled: false, expert_data: experts.jsonl, rollouts_per_anchor: 4}}
env: {{id: "game:DigitLock-v0", seed: 0, eval_seed: 1000000}}
optimizer: {{lr: 3.0e-4, grad_clip: 1.0}}
sft: {{data: experts_sft.jsonl, steps: {sft_steps}, lr: 3.0e-3, batch_size: 8}}
checkpoint: {{every: 0, resume: false}}
eval: {{episodes: {eval}}}
metrics: {{tensorboard: false, plot: false, progress: false}}
"""


def write_demos(path: Path, seeds: range) -> None:
    """DigitLock's expert (per-digit binary search) on each seed, as {"seed", "actions"} lines."""
    from ale_rock.envs.games.digit_lock import expert_actions

    with path.open("w") as f:
        for seed in seeds:
            f.write(json.dumps({"seed": seed, "actions": expert_actions(seed)}) + "\n")


def child(config: Path, out: Path, resampling: bool) -> dict:
    from ale_roll.config import load_config
    from ale_roll.metrics import read_jsonl
    from ale_roll.trainer.controller import Controller

    cfg = load_config(config, [f"output_dir={out}", f"algorithm.resampling.enabled={str(resampling).lower()}"])
    t0 = time.perf_counter()
    summary = Controller(cfg).run()
    wall = time.perf_counter() - t0
    rows = list(read_jsonl(out / "metrics.jsonl"))
    steps = [r for r in rows if "time/step_s" in r]
    counters = {k: sum(r.get(k, 0.0) for r in steps) for k in
                ("resampling/fired", "resampling/searches", "resampling/rollbacks", "resampling/episodes",
                 "resampling/imitation", "resampling/no_fork")}
    return {"success_start": summary["start"].get("eval/success"), "success_final": summary["final"]["eval/success"],
            "train_success_last5": sum(r.get("success/rate", 0.0) for r in steps[-5:])
            / max(len(steps[-5:]), 1),
            "wall_s": wall, "step_s_mean": sum(r["time/step_s"] for r in steps) / max(len(steps), 1),
            **({"counters": counters} if resampling else {})}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true")
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--sft-steps", type=int, default=0, help="masked-SFT warm-up steps on 64 expert demos (0 = none)")
    p.add_argument("--seed", type=int, default=0, help="run seed (sampling, SFT batches); the model init is fixed")
    p.add_argument("--eval", type=int, default=200, help="held-out evaluation episodes")
    p.add_argument("--work", default=None)
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(Path(args.child[0]), Path(args.child[1]), args.child[2] == "1")))
        return
    work = Path(args.work or tempfile.mkdtemp(prefix="ale-bench-resampling-"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "lock.yaml").write_text(CONFIG.format(iterations=args.iterations, sft_steps=args.sft_steps, eval=args.eval,
                                                   seed=args.seed))
    write_demos(work / "experts.jsonl", range(0, 64 // 4 * args.iterations + 64))
    write_demos(work / "experts_sft.jsonl", range(500_000, 500_064))  # SFT warm-up demos: other seeds
    result: dict = {"task": "DigitLock-v0 (3 digits, 5 guesses), tiny random-init llama", "iterations": args.iterations,
                    "sft_steps": args.sft_steps, "seed": args.seed, "eval_episodes": args.eval, "load_avg_start": os.getloadavg()[0]}
    for name, flag in (("without", "0"), ("with", "1")):
        proc = subprocess.run([sys.executable, __file__, "--child", str(work / "lock.yaml"), str(work / name), flag],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            result[f"{name}_error"] = proc.stderr[-1500:]
            continue
        result[name] = json.loads(proc.stdout.strip().splitlines()[-1])
    result["load_avg_end"] = os.getloadavg()[0]
    print(json.dumps(result, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
