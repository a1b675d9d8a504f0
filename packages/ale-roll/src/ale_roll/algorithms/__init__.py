"""Loss functions and trajectory-level algorithms (pure torch; the paper's equations, see README.md here).

Every loss has the signature `fn(LossInputs, config) -> LossOutput`; look them up by name with
`get_loss("reinforce" | "tis" | "topr" | "ipa" | "sft")`.
"""

from ale_roll.algorithms.advantage import AdvantageConfig, group_normalize, shape_rewards
from ale_roll.algorithms.base import LossFn, LossInputs, LossOutput, token_logprobs
from ale_roll.algorithms.filtering import (
    EnvironmentNoiseFilter,
    FilterStats,
    RepeatedIllegalToolCallFilter,
    TrajectoryFilter,
    TruncatedFilter,
    arollout_with_resampling,
    default_filters,
    first_rejection,
    rollout_with_resampling,
)
from ale_roll.algorithms.ipa import ChunkMismatchConfig, IPAConfig, chunk_returns, ipa_loss
from ale_roll.algorithms.mismatch import TokenMismatchConfig, token_mismatch_mask
from ale_roll.algorithms.registry import LOSSES, LossSpec, get_loss
from ale_roll.algorithms.reinforce import ReinforceConfig, reinforce_loss
from ale_roll.algorithms.resampling import (
    ForkSearchConfig,
    ForkSearchResult,
    imitation_loss,
    parallel_initialization,
    resampling_objective,
    sequential_rollback,
)
from ale_roll.algorithms.sft import SFTConfig, sft_loss
from ale_roll.algorithms.tis import TISConfig, tis_loss
from ale_roll.algorithms.topr import TOPRConfig, topr_loss

__all__ = [
    "LOSSES",
    "AdvantageConfig",
    "ChunkMismatchConfig",
    "EnvironmentNoiseFilter",
    "FilterStats",
    "ForkSearchConfig",
    "ForkSearchResult",
    "IPAConfig",
    "LossFn",
    "LossInputs",
    "LossOutput",
    "LossSpec",
    "ReinforceConfig",
    "RepeatedIllegalToolCallFilter",
    "SFTConfig",
    "TISConfig",
    "TOPRConfig",
    "TokenMismatchConfig",
    "TrajectoryFilter",
    "TruncatedFilter",
    "arollout_with_resampling",
    "chunk_returns",
    "default_filters",
    "first_rejection",
    "get_loss",
    "group_normalize",
    "imitation_loss",
    "ipa_loss",
    "parallel_initialization",
    "reinforce_loss",
    "resampling_objective",
    "rollout_with_resampling",
    "sequential_rollback",
    "sft_loss",
    "shape_rewards",
    "tis_loss",
    "token_logprobs",
    "token_mismatch_mask",
    "topr_loss",
]
