"""HF transformers InferenceEngine against the torch train engine, on the same tiny model."""

from __future__ import annotations

import threading
import time

import pytest
import torch
from ale_roll.engines.base import InferenceEngine, SamplingParams, WeightSyncError
from ale_roll.engines.hf_engine import HFInferenceEngine
from ale_roll.engines.torch_engine import OptimConfig, TorchTrainEngine
from ale_roll.engines.weight_sync import DiskTransport, InProcessTransport, ProbeCheck, WeightSync
from ale_roll.models import load_model


@pytest.fixture
def engines(tiny_model_dir) -> tuple[TorchTrainEngine, HFInferenceEngine]:
    train = TorchTrainEngine(load_model(tiny_model_dir)[0], OptimConfig(lr=1e-2))
    return train, HFInferenceEngine(load_model(tiny_model_dir)[0])


def test_is_an_inference_engine(engines):
    assert isinstance(engines[1], InferenceEngine)


def test_logprobs_match_the_train_engine(engines, prompt_ids, completion_logprobs):
    train, infer = engines
    prompts = [prompt_ids, prompt_ids[:5], prompt_ids[3:]]  # ragged: exercises left padding
    gens = infer.generate(prompts, SamplingParams(max_tokens=12, temperature=1.0, seed=0))
    mismatch = 0.0
    for prompt, gen in zip(prompts, gens):
        assert gen.prompt_token_ids == prompt
        assert len(gen.token_ids) == len(gen.logprobs) > 0
        assert gen.stop_reason in ("stop", "length")
        ref = completion_logprobs(train, prompt, gen.token_ids)
        mismatch = max(mismatch, float((ref - torch.tensor(gen.logprobs)).abs().max()))
    print(f"hf vs torch max |logprob diff| = {mismatch:.3g}")
    assert mismatch < 1e-3


def test_stop_tokens_end_the_completion(engines, prompt_ids):
    _, infer = engines
    free = infer.generate([prompt_ids], SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True))[0]
    assert free.stop_reason == "length" and len(free.token_ids) == 8
    stop_at = free.token_ids[2]
    first = free.token_ids.index(stop_at)
    gen = infer.generate([prompt_ids], SamplingParams(max_tokens=8, temperature=0.0, stop_token_ids=(stop_at,)))[0]
    assert gen.stop_reason == "stop"
    assert gen.token_ids == free.token_ids[: first + 1]


def test_abort_from_another_thread(engines, prompt_ids):
    _, infer = engines
    out: dict = {}
    params = SamplingParams(max_tokens=400, ignore_eos=True)
    worker = threading.Thread(target=lambda: out.update(g=infer.generate([prompt_ids], params, ["r1"])[0]))
    worker.start()
    deadline = time.monotonic() + 60
    while not infer.abort("r1"):
        assert time.monotonic() < deadline and worker.is_alive()
        time.sleep(0.01)
    worker.join(60)
    assert out["g"].stop_reason == "aborted"
    assert len(out["g"].token_ids) < 400
    assert not infer.abort("r1")  # no longer running


def _train_a_bit(train: TorchTrainEngine, prompt: list[int]) -> None:
    ids = torch.tensor([prompt])
    for _ in range(3):
        train.backward(ids, torch.ones_like(ids), loss_fn=lambda lp, m: (lp * m).sum())  # push logprobs down
        train.step()


@pytest.mark.parametrize("transport", ["inprocess", "disk"])
def test_sync_changes_generations_and_is_verified(engines, prompt_ids, tmp_path, transport):
    train, infer = engines
    greedy = SamplingParams(max_tokens=10, temperature=0.0, ignore_eos=True)
    before = infer.generate([prompt_ids], greedy)[0]
    _train_a_bit(train, prompt_ids + before.token_ids)
    t = InProcessTransport() if transport == "inprocess" else DiskTransport(tmp_path)
    sync = WeightSync([infer], t, probe=ProbeCheck(train, tuple(prompt_ids), tolerance=1e-3))
    report = sync.push(train.export_weights(), train.policy_version)
    after = infer.generate([prompt_ids], greedy)[0]
    assert infer.policy_version == 3 and after.policy_version == 3
    assert report.probe_max_diff is not None and report.probe_max_diff < 1e-3
    assert after.logprobs != before.logprobs
    assert after.token_ids != before.token_ids or max(
        abs(a - b) for a, b in zip(after.logprobs, before.logprobs)) > 1e-2
    assert list(tmp_path.iterdir()) == []  # the disk transport cleans up


class _CorruptingTransport(DiskTransport):
    """Flips one byte of the file after writing it, like a bad disk or a torn copy."""

    def send(self, tensors, version):
        path = super().send(tensors, version)
        with open(path, "r+b") as f:
            f.seek(-8, 2)
            b = f.read(1)
            f.seek(-8, 2)
            f.write(bytes([b[0] ^ 0xFF]))
        return path


def test_corrupted_sync_is_detected(engines, tmp_path):
    train, infer = engines
    sync = WeightSync([infer], _CorruptingTransport(tmp_path))
    with pytest.raises(WeightSyncError, match="fingerprint"):
        sync.push(train.export_weights(), 1)


class _IgnoresUpdates(HFInferenceEngine):
    """Reports the right fingerprint but keeps its old weights: the silent failure the probe catches."""

    def update_weights(self, weights, version):
        saved = {k: v.clone() for k, v in self.model.state_dict().items()}
        report = super().update_weights(weights, version)
        self.model.load_state_dict(saved)
        return report


def test_probe_catches_weights_not_applied(engines, tiny_model_dir, prompt_ids):
    train, _ = engines
    stale = _IgnoresUpdates(load_model(tiny_model_dir)[0])
    _train_a_bit(train, prompt_ids)
    sync = WeightSync([stale], probe=ProbeCheck(train, tuple(prompt_ids), tolerance=1e-3))
    with pytest.raises(WeightSyncError, match="probe"):
        sync.push(train.export_weights(), train.policy_version)
