"""Train–rollout multiplexing over worker slots.

All slots roll out after a weight sync. When the buffer holds a batch, a fixed subset
(`train_slots`) is shrunk to training: no new episode starts on them, the ones running there finish
(stragglers consolidate onto the remaining slots), and the training step runs; afterwards the
slots expand back to rollout. On CPU the slots are episode-concurrency slots; on GPUs they would be
devices. `ale_roll.trainer.multiplex_sim` compares the bubble with a static split.
"""

from __future__ import annotations

from collections.abc import Callable


class ResourceManager:
    """Tracks how many slots rollout may use and tells the scheduler (via `on_change`)."""

    def __init__(self, total_slots: int, train_slots: int, on_change: Callable[[int], None]) -> None:
        if not 0 <= train_slots < total_slots:
            raise ValueError(f"train_slots ({train_slots}) must be in [0, total_slots={total_slots})")
        self.total = total_slots
        self.train_slots = train_slots
        self.on_change = on_change
        self.training = False
        self.shrinks = 0

    @property
    def rollout_slots(self) -> int:
        """Slots rollout may use now."""
        return self.total - self.train_slots if self.training else self.total

    def shrink(self) -> None:
        """Give `train_slots` to training (a batch is ready)."""
        if self.train_slots and not self.training:
            self.training = True
            self.shrinks += 1
            self.on_change(self.rollout_slots)

    def expand(self) -> None:
        """Return the training slots to rollout (the step and the sync are done)."""
        if self.training:
            self.training = False
            self.on_change(self.rollout_slots)
