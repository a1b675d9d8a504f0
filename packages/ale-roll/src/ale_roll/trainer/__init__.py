"""Training: the controller's loop (:mod:`ale_roll.trainer.controller`, imported on its own: it pulls
in rollout), one step on a batch, masked SFT, engine setup, train–rollout multiplexing."""

from ale_roll.trainer.resources import ResourceManager
from ale_roll.trainer.step import train_step, trajectory_metrics

__all__ = ["ResourceManager", "train_step", "trajectory_metrics"]
