"""Atomic checkpoints: complete or absent, pruned to `keep`, engine state restored."""

from __future__ import annotations

from pathlib import Path

import torch
from ale_roll.buffer.sample_buffer import BufferConfig, SampleBuffer
from ale_roll.checkpoint import latest_checkpoint, list_checkpoints, save_checkpoint
from ale_roll.engines.torch_engine import TorchTrainEngine
from ale_roll.types import Trajectory, Turn


def _engine() -> TorchTrainEngine:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=32, hidden_size=64, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, head_dim=32)
    return TorchTrainEngine(LlamaForCausalLM(cfg))


def test_checkpoint_round_trip_and_pruning(tmp_path: Path) -> None:
    engine = _engine()
    buffer = SampleBuffer(BufferConfig(async_ratio=1))
    entry = buffer.issue("state-0", seed=0)
    buffer.issue("state-1", seed=1)
    buffer.put(Trajectory([Turn([1], [2], [-0.5])], reward=1.0, initial_state_id="state-0",
                          episode_id=entry.episode_id))
    for step in (1, 2, 3):
        save_checkpoint(tmp_path, step, engine, buffer.state_dict(), {"name": "t"}, keep=2)
    assert [c.step for c in list_checkpoints(tmp_path)] == [2, 3]
    (tmp_path / "step-000009.tmp").mkdir()  # a write torn by kill -9 is never picked
    ck = latest_checkpoint(tmp_path)
    assert ck is not None and ck.step == 3 and ck.run_state()["step"] == 3

    restored = SampleBuffer()
    restored.load_state_dict(ck.buffer_state())
    assert len(restored) == 1 and [e.initial_state_id for e in restored.in_flight()] == ["state-1"]

    other = _engine()
    with torch.no_grad():
        for p in other.model.parameters():
            p.add_(1.0)
    other.load_checkpoint(ck.engine_dir)
    for (_, a), (_, b) in zip(engine.model.state_dict().items(), other.model.state_dict().items(), strict=True):
        assert torch.equal(a, b)
