"""TOPR-style split: truncated IS only on non-positive trajectories (paper Eq. 5).

    positive τ (A > 0):      A(τ) ∇log π_θ(τ)                     (plain weighted update)
    non-positive τ (A ≤ 0):  clip(ρ(τ), 0, 1) · A(τ) ∇log π_θ(τ)  (ρ as in Eq. 4)

Successes are always reinforced at full strength; failures are pushed down only as far as the
current policy still agrees with the one that sampled them. With R ∈ {0, 1} the negative branch
is inert unless a failure reward or group normalization is set (see `advantage`).
"""

from __future__ import annotations

import torch
from pydantic import BaseModel, ConfigDict, Field

from ale_roll.algorithms.advantage import AdvantageConfig, shape_rewards
from ale_roll.algorithms.base import Aggregation, LossInputs, LossOutput
from ale_roll.algorithms.mismatch import TokenMismatchConfig
from ale_roll.algorithms.reinforce import _common_metrics, apply_token_mismatch, weighted_policy_gradient
from ale_roll.algorithms.tis import importance_ratio, ratio_metrics


class TOPRConfig(BaseModel):
    """The positive/negative split of Eq. 5."""

    model_config = ConfigDict(extra="forbid")

    advantage: AdvantageConfig = Field(default_factory=AdvantageConfig)
    """Failure reward and group normalization; the sign of the result picks the branch."""
    aggregation: Aggregation = "token_mean"
    """token_mean: every loss token weighs the same; seq_mean: every row weighs the same."""
    mismatch: TokenMismatchConfig = Field(default_factory=TokenMismatchConfig)
    """Eq. 6 token mask (two-sided [0.8, 1.2] by default)."""
    clip_max: float = 1.0
    """Upper truncation of ρ on the negative branch."""


def split_weight(adv: torch.Tensor, rho: torch.Tensor, clip_max: float) -> torch.Tensor:
    """[B] per-row IS coefficient: 1 on A > 0, clip(ρ, 0, clip_max) on A ≤ 0."""
    return torch.where(adv > 0, torch.ones_like(rho), rho.clamp(0.0, clip_max))


def topr_loss(inputs: LossInputs, config: TOPRConfig) -> LossOutput:
    """Eq. 5 as a scalar loss."""
    adv = shape_rewards(inputs.rewards, inputs.group_ids, config.advantage)
    mask, metrics = apply_token_mismatch(inputs, config.mismatch)
    rho = importance_ratio(inputs, mask, "old")
    weight = split_weight(adv, rho, config.clip_max)
    loss = weighted_policy_gradient(inputs, weight * adv, mask, config.aggregation)
    metrics.update(_common_metrics(loss, adv, mask))
    metrics.update(ratio_metrics(rho, (adv <= 0) & (rho > config.clip_max)))
    return LossOutput(loss, metrics)
