"""Train–inference mismatch: the token mask of Eq. 6 and the mismatch metrics.

The inference engine's logprobs μ_old differ from the trainer's π_θold even at equal weights
(kernels, precision, batching). Eq. 6 drops tokens whose ratio is too high:

    m_t = 1[ π_θold(τ_t|τ_<t) / μ_old(τ_t|τ_<t) ≤ H ]

We default to ROLL's two-sided bounds [low, high] = [0.8, 1.2]; `low = 0` is exactly Eq. 6.

Metrics, over the loss tokens before mismatch masking (r_t = π_θold / μ_old):
    mismatch/kl              mean(r − 1 − log r)   (k3 estimator of KL(μ‖π_old); ≥ 0, samples from μ)
    mismatch/ratio_mean/max  mean and max of r
    mismatch/masked_fraction share of loss tokens removed by the mask
"""

from __future__ import annotations

import torch
from pydantic import BaseModel, ConfigDict

from ale_roll.algorithms.base import masked_mean


class TokenMismatchConfig(BaseModel):
    """Token-level mismatch mask (Eq. 6)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Apply the mask; metrics are reported either way."""
    low: float = 0.8
    """Tokens with π_old/μ below this are dropped (0 = one-sided, exactly Eq. 6)."""
    high: float = 1.2
    """H of Eq. 6: tokens with π_old/μ above this are dropped."""


def token_mismatch_mask(old_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor, low: float,
                        high: float) -> torch.Tensor:
    """[B, T] float mask: 1 where low ≤ π_old/μ ≤ high."""
    ratio = torch.exp(old_logprobs.detach() - behaviour_logprobs.detach())
    return ((ratio <= high) & (ratio >= low)).to(old_logprobs.dtype)


def mismatch_metrics(old_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor, mask: torch.Tensor,
                     kept: torch.Tensor | None = None) -> dict[str, float]:
    """The mismatch metrics of the module docstring; `kept` is the mismatch mask (if applied)."""
    log_ratio = (old_logprobs - behaviour_logprobs).detach()
    ratio = torch.exp(log_ratio)
    has = mask.sum() > 0
    metrics = {
        "mismatch/kl": float(masked_mean(ratio - 1 - log_ratio, mask)),
        "mismatch/ratio_mean": float(masked_mean(ratio, mask)),
        "mismatch/ratio_max": float(ratio[mask > 0].max()) if has else 1.0,
        "mismatch/masked_fraction": 0.0,
    }
    if kept is not None:
        metrics["mismatch/masked_fraction"] = float(masked_mean(1 - kept, mask))
    return metrics
