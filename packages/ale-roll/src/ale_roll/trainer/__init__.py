"""Training: one step on a batch, masked SFT, engine setup, train–rollout multiplexing."""

from ale_roll.trainer.resources import ResourceManager
from ale_roll.trainer.step import train_step, trajectory_metrics

__all__ = ["ResourceManager", "train_step", "trajectory_metrics"]
