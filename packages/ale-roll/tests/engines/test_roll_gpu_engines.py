"""The CUDA paths: DeepSpeed with NCCL and bf16, vLLM on GPU. Run by scripts/gpu_checks.sh."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
SCRIPT = Path(__file__).with_name("roll_ds_check.py")


def test_deepspeed_zero2_nccl_bf16(tiny_model_dir, tmp_path):
    out = tmp_path / "gpu.json"
    n = min(2, torch.cuda.device_count())
    env = dict(os.environ, ALE_TEST_PRECISION="bf16")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(n),
                           str(SCRIPT), str(tiny_model_dir), str(out), "2"], env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ranks = json.loads(out.read_text())
    assert len({r["after"] for r in ranks}) == 1 and ranks[0]["after"] != ranks[0]["before"]


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vllm is not installed")
def test_vllm_gpu_bf16_matches_train_engine(tiny_model_dir, prompt_ids, completion_logprobs):
    from ale_roll.engines.base import SamplingParams
    from ale_roll.engines.torch_engine import TorchTrainEngine
    from ale_roll.engines.vllm_engine import VLLMConfig, VLLMInferenceEngine
    from ale_roll.engines.weight_sync import ProbeCheck, SharedMemoryTransport, WeightSync
    from ale_roll.models import load_model

    engine = VLLMInferenceEngine(tiny_model_dir, VLLMConfig(dtype="bfloat16", gpu_memory_utilization=0.3))
    try:
        train = TorchTrainEngine(load_model(tiny_model_dir, dtype="bfloat16")[0], device="cuda")
        gen = engine.generate([prompt_ids], SamplingParams(max_tokens=16, temperature=1.0, seed=0))[0]
        ref = completion_logprobs(train, prompt_ids, gen.token_ids)
        mismatch = float((ref - torch.tensor(gen.logprobs)).abs().max())
        print(f"vllm-gpu bf16 vs torch bf16 max |logprob diff| = {mismatch:.3g}")
        assert mismatch < 0.1
        ids = torch.tensor([prompt_ids + gen.token_ids])
        train.backward(ids, torch.ones_like(ids), loss_fn=lambda lp, m: (lp * m).sum())
        train.step()
        report = WeightSync([engine], SharedMemoryTransport(), ProbeCheck(train, tuple(prompt_ids), tolerance=0.1)).push(
            train.export_weights(), 1)
        assert engine.policy_version == 1 and report.probe_max_diff is not None
    finally:
        engine.shutdown()
