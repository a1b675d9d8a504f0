"""Reward shaping before a loss: failure reward and GRPO-style group normalization.

With binary rewards R ∈ {0, 1} and no baseline, a failed trajectory has R = 0 and therefore
contributes nothing: the *negative branch* of TOPR (Eq. 5) and IPA (Eq. 9) — the rows with
R ≤ 0, which are weighted by clip(ρ, 0, 1) — is inert. Two ways switch it on:

- `failure_reward` (e.g. -1): every row with R ≤ 0 gets that reward, so failures push
  probability down, with their truncated IS weight.
- `group_norm`: A_i = (R_i − mean_g R) / (std_g R + eps) within each group of rollouts on the
  same initial state. Rows below their group mean become negative (→ negative branch), rows
  above become positive (→ plain update), and a group whose rewards are all equal carries no
  signal (A = 0). Applied after the failure reward if both are set.

The sign of the shaped value decides the branch: positive ⇒ T+, non-positive ⇒ T−.
"""

from __future__ import annotations

import torch
from pydantic import BaseModel, ConfigDict


class AdvantageConfig(BaseModel):
    """How raw rewards become the per-row scalar that multiplies ∇log π."""

    model_config = ConfigDict(extra="forbid")

    failure_reward: float | None = None
    """If set, rewards ≤ 0 are replaced by this value (e.g. -1.0) before normalization."""
    group_norm: bool = False
    """Subtract the group mean (GRPO-style); needs group ids, else the whole batch is one group."""
    std_norm: bool = True
    """With group_norm, also divide by the group's standard deviation (+ eps)."""
    eps: float = 1e-6
    """Added to the standard deviation to avoid division by zero."""


def shape_rewards(rewards: torch.Tensor, group_ids: torch.Tensor | None, config: AdvantageConfig) -> torch.Tensor:
    """[B] advantages from [B] rewards (see the module docstring). Never carries a gradient."""
    adv = rewards.detach().to(torch.float32).clone()
    if config.failure_reward is not None:
        adv = torch.where(adv <= 0, torch.full_like(adv, config.failure_reward), adv)
    if config.group_norm:
        adv = group_normalize(adv, group_ids, std_norm=config.std_norm, eps=config.eps)
    return adv


def group_normalize(values: torch.Tensor, group_ids: torch.Tensor | None, *, std_norm: bool = True,
                    eps: float = 1e-6) -> torch.Tensor:
    """(v − mean_g) [/ (std_g + eps)] per group; population std (a group of one gives 0)."""
    if group_ids is None:
        group_ids = torch.zeros_like(values, dtype=torch.long)
    _, inverse = torch.unique(group_ids, return_inverse=True)
    num = int(inverse.max().item()) + 1
    count = torch.zeros(num, dtype=values.dtype).index_add_(0, inverse, torch.ones_like(values))
    mean = torch.zeros(num, dtype=values.dtype).index_add_(0, inverse, values) / count
    centered = values - mean[inverse]
    if not std_norm:
        return centered
    var = torch.zeros(num, dtype=values.dtype).index_add_(0, inverse, centered**2) / count
    return centered / (var.sqrt()[inverse] + eps)
