"""ale-roll: agentic RL trainer — fine-grained async rollout, SampleBuffer, REINFORCE/TIS/TOPR/IPA, masked SFT.

    from ale_roll import Controller, load_config
    Controller(load_config("examples/guess_number.yaml")).run()

Heavy modules (torch, engines) load on first use of the names that need them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "Turn": "ale_roll.types",
    "Trajectory": "ale_roll.types",
    "StopReason": "ale_roll.types",
    "SampleBuffer": "ale_roll.buffer.sample_buffer",
    "BufferConfig": "ale_roll.buffer.sample_buffer",
    "get_loss": "ale_roll.algorithms.registry",
    "LossInputs": "ale_roll.algorithms.base",
    "RunConfig": "ale_roll.config",
    "ConfigError": "ale_roll.config",
    "load_config": "ale_roll.config",
    "Controller": "ale_roll.trainer.controller",
    "RolloutScheduler": "ale_roll.rollout.scheduler",
    "EpisodeRunner": "ale_roll.rollout.episode",
}

if TYPE_CHECKING:
    from ale_roll.algorithms.base import LossInputs
    from ale_roll.algorithms.registry import get_loss
    from ale_roll.buffer.sample_buffer import BufferConfig, SampleBuffer
    from ale_roll.config import ConfigError, RunConfig, load_config
    from ale_roll.rollout.episode import EpisodeRunner
    from ale_roll.rollout.scheduler import RolloutScheduler
    from ale_roll.trainer.controller import Controller
    from ale_roll.types import StopReason, Trajectory, Turn


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ale_roll' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "BufferConfig",
    "ConfigError",
    "Controller",
    "EpisodeRunner",
    "LossInputs",
    "RolloutScheduler",
    "RunConfig",
    "SampleBuffer",
    "StopReason",
    "Trajectory",
    "Turn",
    "__version__",
    "get_loss",
    "load_config",
]
