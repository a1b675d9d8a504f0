"""DeepSpeed TrainEngine on CPU (gloo): ZeRO-2 across 2 ranks and ZeRO-3 in one process.

Each case runs in its own process(es) because DeepSpeed initialises torch.distributed globally.
The first run JIT-builds DeepSpeed's shm comm op (cached in TORCH_EXTENSIONS_DIR afterwards).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("deepspeed", reason="the deepspeed extra is not installed")

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).with_name("roll_ds_check.py")


def _run(args: list[str], out: Path, timeout: float = 900, **extra_env: str) -> list[dict]:
    env = dict(os.environ, OMP_NUM_THREADS="1", **extra_env)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())


def test_zero2_two_ranks_keep_parameters_equal(tiny_model_dir, tmp_path):
    out = tmp_path / "zero2.json"
    ranks = _run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                  str(SCRIPT), str(tiny_model_dir), str(out), "2"], out)
    assert [r["rank"] for r in ranks] == [0, 1]
    assert ranks[0]["after"] == ranks[1]["after"]  # same full weights on every rank
    assert ranks[0]["after"] != ranks[0]["before"]  # and they did change
    assert ranks[0]["losses"] != ranks[1]["losses"]  # ranks saw different data
    assert all(r["version"] == 4 for r in ranks)
    assert all(n > 0 for r in ranks for n in r["norms"])
    assert all(r["running_stage"] == r["deepspeed_stage"] == 2 for r in ranks)  # two ranks: ZeRO-2


@pytest.mark.parametrize("partition", [False, True], ids=["stage-0", "zero2-forced"])
def test_zero2_on_one_rank_runs_stage_0_unless_forced_and_matches_torch(tiny_model_dir, tmp_path, partition):
    """ZeRO-2 on one rank partitions nothing: by default it runs as stage 0 (no fp32 master copy,
    no per-step copies); ``partition_single_rank`` keeps stage 2. Both train like the torch engine
    and resume from their own checkpoints."""
    out = tmp_path / "one.json"
    (r,) = _run([sys.executable, str(SCRIPT), str(tiny_model_dir), str(out), "2"], out,
                ALE_TEST_PARTITION="1" if partition else "0")
    assert r["running_stage"] == r["deepspeed_stage"] == (2 if partition else 0)
    assert r["initial_lp_diff"] < 1e-5 and r["param_diff_vs_torch"] < 1e-3
    assert r["resumed_version"] == 4 and r["resumed_same"]
    assert r["lr_after_set"] == 3e-3 and r["reset_diff_vs_torch"] < 1e-3
    assert r["saved_same"]


def test_zero3_single_process_matches_torch_engine(tiny_model_dir, tmp_path):
    out = tmp_path / "zero3.json"
    (r,) = _run([sys.executable, str(SCRIPT), str(tiny_model_dir), str(out), "3"], out)
    print(f"zero3 vs torch: initial logprob diff {r['initial_lp_diff']:.3g}, "
          f"param diff after 4 steps {r['param_diff_vs_torch']:.3g}")
    assert r["initial_lp_diff"] < 1e-5
    assert r["param_diff_vs_torch"] < 1e-3
    assert r["losses"][-1] < r["losses"][0]
    assert r["resumed_version"] == 4 and r["resumed_same"]
    assert r["lr_after_set"] == 3e-3 and r["reset_diff_vs_torch"] < 1e-3  # set_lr + reset_optimizer
    assert r["saved_same"]  # save_model writes the weights the engine holds
