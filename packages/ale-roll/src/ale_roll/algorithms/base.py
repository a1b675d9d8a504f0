"""The common loss signature and the masked reductions every loss uses.

All tensors are [B, T] and aligned: entry (i, t) describes token t of row i. `mask` is the
token mask (1 where the token may carry loss: completion tokens, never prompt / observation /
padding). Logprobs:

- `logprobs`            log π_θ     — the trainer's current policy (carries the gradient)
- `old_logprobs`        log π_θold  — the trainer's recomputation at the rollout weights
                                      (None: on-policy, taken as `logprobs.detach()`)
- `behaviour_logprobs`  log μ_old   — what the inference engine reported while sampling
                                      (None: no train–inference mismatch, taken as old)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

import torch

if TYPE_CHECKING:
    from ale_roll.types import TokenBatch

Aggregation = Literal["token_mean", "seq_mean"]


@dataclass
class LossInputs:
    """Everything a loss may need; unused fields are ignored by a given loss."""

    logprobs: torch.Tensor
    mask: torch.Tensor
    rewards: torch.Tensor
    """[B] per-row scalar reward R(τ) (raw; losses apply their advantage config)."""
    old_logprobs: torch.Tensor | None = None
    behaviour_logprobs: torch.Tensor | None = None
    chunk_ids: torch.Tensor | None = None
    """[B, T] 0-based interaction chunk per token, -1 outside any chunk."""
    num_chunks: torch.Tensor | None = None
    """[B] K per row; default: max chunk id + 1 of the row."""
    group_ids: torch.Tensor | None = None
    """[B] integer group of each row, for group normalization."""

    @classmethod
    def from_batch(cls, batch: TokenBatch, logprobs: torch.Tensor, old_logprobs: torch.Tensor | None = None,
                   *, sft: bool = False) -> LossInputs:
        """Inputs for a collated batch; `logprobs` must be aligned with `input_ids` (see `token_logprobs`).

        `sft=True` uses the masked-SFT mask (error × relevance per turn) instead of the RL loss mask.
        """
        return cls(
            logprobs=logprobs,
            mask=batch.sft_mask if sft else batch.loss_mask,
            rewards=batch.rewards,
            old_logprobs=old_logprobs,
            behaviour_logprobs=batch.behaviour_logprobs,
            chunk_ids=batch.chunk_ids,
            num_chunks=batch.num_chunks,
            group_ids=batch.group_ids,
        )

    def old(self) -> torch.Tensor:
        """log π_θold (detached)."""
        return (self.old_logprobs if self.old_logprobs is not None else self.logprobs).detach()

    def behaviour(self) -> torch.Tensor:
        """log μ_old (detached)."""
        return (self.behaviour_logprobs if self.behaviour_logprobs is not None else self.old()).detach()

    def float_mask(self) -> torch.Tensor:
        """The token mask as a float tensor."""
        return self.mask.to(self.logprobs.dtype)


@dataclass
class LossOutput:
    """A scalar loss to minimize and plain-float metrics for logging."""

    loss: torch.Tensor
    metrics: dict[str, float] = field(default_factory=dict)


class LossFn(Protocol):
    """The common signature of every registered loss."""

    def __call__(self, inputs: LossInputs, config: object) -> LossOutput: ...


def token_logprobs(logits: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """[B, T] log π(input_ids[t] | input_ids[:t]) from causal-LM logits [B, T, V], aligned with input_ids.

    Logits at position t−1 predict token t, so position 0 has no logprob (set to 0; it is always
    prompt and masked).
    """
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1).gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return torch.cat([torch.zeros_like(logp[:, :1]), logp], dim=1)


def masked_sum(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Σ values·mask (over `dim`, or everything)."""
    return (values * mask).sum() if dim is None else (values * mask).sum(dim=dim)


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Σ values·mask / max(Σ mask, 1): an all-masked reduction is 0, never NaN."""
    return masked_sum(values, mask, dim) / mask.sum(dim=dim).clamp(min=1.0)


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, how: Aggregation) -> torch.Tensor:
    """Reduce a per-token loss to a scalar.

    token_mean: Σ_i Σ_t l_it m_it / Σ m  (every token weighs the same; long answers count more)
    seq_mean:   mean_i ( Σ_t l_it m_it / Σ_t m_it )  over rows with at least one token
    """
    if how == "token_mean":
        return masked_mean(per_token, mask)
    per_row = masked_mean(per_token, mask, dim=-1)
    has_tokens = (mask.sum(dim=-1) > 0).to(per_row.dtype)
    return masked_mean(per_row, has_tokens)


def sequence_geometric_ratio(log_num: torch.Tensor, log_den: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B] (Π_t num_t/den_t)^(1/|τ|) over masked tokens, computed in log space; 1 for empty rows."""
    return torch.exp(masked_mean(log_num - log_den, mask, dim=-1))
