"""The SampleBuffer between rollout and training (staleness bound, groups, checkpointing)."""

from ale_roll.buffer.sample_buffer import BufferConfig, FrontierEntry, SampleBuffer

__all__ = ["BufferConfig", "FrontierEntry", "SampleBuffer"]
