"""Fine-grained rollout: per-episode pipelines, micro-batched generation, the scheduler."""

from ale_roll.rollout.episode import EpisodeRunner, EpisodeTimes, GemEnv, RewardFn, env_reward, load_reward_fn
from ale_roll.rollout.formatting import ChatFormat
from ale_roll.rollout.generation import BatchingGenerator, GenerationTimeout, Generator
from ale_roll.rollout.scheduler import RolloutScheduler

__all__ = [
    "BatchingGenerator",
    "ChatFormat",
    "EpisodeRunner",
    "EpisodeTimes",
    "GemEnv",
    "GenerationTimeout",
    "Generator",
    "RewardFn",
    "RolloutScheduler",
    "env_reward",
    "load_reward_fn",
]
