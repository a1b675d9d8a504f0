"""IPA — Interaction-Perceptive Agentic policy optimization: chunk-level credit (paper Eq. 7–9).

A trajectory is split into interaction chunks c_1..c_K at turn boundaries (one assistant turn
that ends in an environment interaction plus the observation it gets back; the last chunk ends
with completion — see `ale_roll.types.Trajectory.chunk_of_turn`). Observation tokens belong to
their chunk but carry no loss (token mask 0), so they never enter the sums below.

    G_k = γ^(K−k) · R                                   (Eq. 7, every token of chunk k shares G_k)
    ρ_c = ( Π_{t∈c} π_θ(t) / π_θold(t) )^(1/|c|)        (Eq. 8, chunk IS ratio, geometric mean)
    m_c = 1[ low ≤ ( Π_{t∈c} π_θold(t) / μ_old(t) )^(1/|c|) ≤ H_c ]   (chunk mismatch mask)
    ∇J  = Σ_{c∈T+} G_c m_c Σ_{t∈c} ∇log π_θ(t)
        + Σ_{c∈T−} clip(ρ_c, 0, 1) G_c m_c Σ_{t∈c} ∇log π_θ(t)          (Eq. 9)

T+ are chunks with G_c > 0 and T− those with G_c ≤ 0; R is the shaped reward (`advantage`:
failure reward / group normalization, applied before discounting — with R ∈ {0, 1} and neither,
the T− branch is inert). Chunk ids here are 0-based, so G for id k is γ^(K−1−k)·R.

As a loss: L = − Σ_t w_c(t) G_c(t) m_c(t) m_t log π_θ(t) / Σ m (token_mean), w_c = 1 on T+ and
sg(clip(ρ_c, 0, 1)) on T−. The chunk mismatch bounds default to [0.5, 2.0], looser than the
token bounds [0.8, 1.2] because a chunk's geometric mean already averages token noise (our
choice; the paper gives no value).

Which policy is π_θold (`ratio_against`, docs/roll.md "IPA's ratio"). The paper's π_θold is the
policy that *generated* the chunk. `behaviour` (default) takes it as μ, the logprobs the inference
engine recorded while sampling: free (no extra forward, no old weights kept), and it makes ρ_c act
under async staleness with one update per batch. The trainer's proximal logprobs π_prox (the
weights at the start of the batch's updates, `LossInputs.old_logprobs`) then serve the chunk
mismatch mask m_c = 1[low ≤ geo(π_prox/μ) ≤ H_c], which drops chunks whose μ is too far from what
the trainer computes (too stale, or a numerical gap) — a decoupled objective: μ for the ratio,
π_prox for the mask. `proximal` takes π_θold = π_prox (ρ_c acts only between the mini-batch
updates of one batch, AReaL's proximal clip), staleness then reaching the loss only through m_c.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from ale_roll.algorithms.advantage import AdvantageConfig, shape_rewards
from ale_roll.algorithms.base import Aggregation, LossInputs, LossOutput, aggregate, masked_mean
from ale_roll.algorithms.mismatch import TokenMismatchConfig, mismatch_metrics, token_mismatch_mask


class ChunkMismatchConfig(BaseModel):
    """Chunk-level mismatch mask m_c of Eq. 9."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Apply the mask; metrics are reported either way."""
    low: float = 0.5
    """Chunks whose geometric-mean π_old/μ is below this are dropped (0 = one-sided)."""
    high: float = 2.0
    """H_c: chunks whose geometric-mean π_old/μ is above this are dropped."""


class IPAConfig(BaseModel):
    """Chunk-level policy gradient (Eq. 7–9)."""

    model_config = ConfigDict(extra="forbid")

    gamma: float = Field(default=0.95, gt=0.0, le=1.0)
    """Chunk-level discount γ ∈ (0, 1] of Eq. 7 (ROLL's default 0.95)."""
    advantage: AdvantageConfig = Field(default_factory=AdvantageConfig)
    """Failure reward and group normalization applied to R before discounting."""
    aggregation: Aggregation = "token_mean"
    """token_mean: every loss token weighs the same; seq_mean: every row weighs the same."""
    chunk_mismatch: ChunkMismatchConfig = Field(default_factory=ChunkMismatchConfig)
    """Chunk mismatch mask m_c."""
    token_mismatch: TokenMismatchConfig = Field(default_factory=lambda: TokenMismatchConfig(enabled=False))
    """Optional Eq. 6 token mask on top of m_c (off: Eq. 9 uses the chunk mask only)."""
    clip_max: float = 1.0
    """Upper truncation of ρ_c on the T− branch."""
    ratio_against: Literal["behaviour", "proximal"] = "behaviour"
    """π_θold of ρ_c: μ recorded at generation (acts under staleness) or the weights at the start of
    the batch's updates (acts only across mini-batches); see the module docstring."""


def _chunk_ids_or_fail(inputs: LossInputs) -> torch.Tensor:
    if inputs.chunk_ids is None:
        raise ValueError("IPA needs chunk_ids (see ale_roll.types.flatten_trajectory)")
    return inputs.chunk_ids


def per_chunk_mean(values: torch.Tensor, mask: torch.Tensor, chunk_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """([B, Kmax] masked mean of `values` per chunk, [B, Kmax] token counts). Empty chunks give 0."""
    rows, _ = values.shape
    kmax = int(chunk_ids.max().item()) + 1 if chunk_ids.numel() else 0
    kmax = max(kmax, 1)
    valid = (chunk_ids >= 0).to(values.dtype) * mask
    flat = (torch.arange(rows).unsqueeze(-1) * kmax + chunk_ids.clamp(min=0)).reshape(-1)
    sums = torch.zeros(rows * kmax, dtype=values.dtype).index_add_(0, flat, (values * valid).reshape(-1))
    counts = torch.zeros(rows * kmax, dtype=values.dtype).index_add_(0, flat, valid.reshape(-1))
    means = sums / counts.clamp(min=1.0)
    return means.view(rows, kmax), counts.view(rows, kmax)


def gather_chunks(per_chunk: torch.Tensor, chunk_ids: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
    """[B, T] value of each token's chunk; `fill` outside chunks."""
    gathered = per_chunk.gather(1, chunk_ids.clamp(min=0))
    return torch.where(chunk_ids >= 0, gathered, torch.full_like(gathered, fill))


def resolve_num_chunks(chunk_ids: torch.Tensor, num_chunks: torch.Tensor | None) -> torch.Tensor:
    """[B] K per row: given, or max chunk id + 1 (0 for rows without chunks)."""
    if num_chunks is not None:
        return num_chunks.to(torch.long)
    return chunk_ids.max(dim=-1).values.clamp(min=-1) + 1


def chunk_returns(rewards: torch.Tensor, chunk_ids: torch.Tensor, gamma: float,
                  num_chunks: torch.Tensor | None = None) -> torch.Tensor:
    """Eq. 7 per token: G = γ^(K−1−k) · R for 0-based chunk k; 0 outside chunks."""
    k_total = resolve_num_chunks(chunk_ids, num_chunks).unsqueeze(-1)
    exponent = (k_total - 1 - chunk_ids).clamp(min=0).to(torch.float32)
    returns = rewards.to(torch.float32).unsqueeze(-1) * gamma**exponent
    return torch.where(chunk_ids >= 0, returns, torch.zeros_like(returns))


def chunk_geometric_ratio(log_num: torch.Tensor, log_den: torch.Tensor, mask: torch.Tensor,
                          chunk_ids: torch.Tensor) -> torch.Tensor:
    """Eq. 8 per token: (Π_{t∈c} num/den)^(1/|c|) of the token's chunk, over masked tokens; 1 outside."""
    means, _ = per_chunk_mean((log_num - log_den).detach(), mask, chunk_ids)
    return gather_chunks(torch.exp(means), chunk_ids, fill=1.0)


def chunk_mismatch_mask(old_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor, mask: torch.Tensor,
                        chunk_ids: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """[B, T] m_c of the token's chunk (1 outside chunks)."""
    ratio = chunk_geometric_ratio(old_logprobs, behaviour_logprobs, mask, chunk_ids)
    return ((ratio >= low) & (ratio <= high)).to(old_logprobs.dtype)


def chunk_stats(rho: torch.Tensor, returns: torch.Tensor, kept: torch.Tensor, loss_mask: torch.Tensor,
                chunk_ids: torch.Tensor, clip_max: float) -> dict[str, float]:
    """Chunk-level (not token-weighted) metrics: how often the T− clip binds, ρ_c's spread, m_c's drops.

    A chunk counts when it has loss tokens (`loss_mask`, before m_c). "Clipped" is ρ_c above
    clip_max by more than `_CLIP_TOL` relative: an on-policy chunk's ρ_c is 1 up to the
    train–inference numerical gap (~1e-6 in float32), which is not the clip acting.
    """
    rho_c, counts = per_chunk_mean(rho, loss_mask, chunk_ids)
    ret_c, _ = per_chunk_mean(returns, loss_mask, chunk_ids)
    kept_c, _ = per_chunk_mean(kept, loss_mask, chunk_ids)
    present = counts > 0
    n = max(int(present.sum()), 1)
    negative = present & (ret_c <= 0)
    clipped = negative & (rho_c > clip_max * (1 + _CLIP_TOL))
    values = rho_c[present & (kept_c > 0.5)]
    return {
        "ipa/chunks": float(present.sum()),
        "ipa/negative_chunks": float(negative.sum()),
        "ipa/clipped_fraction": float(clipped.sum()) / n,
        "ipa/clipped_fraction_of_negative": float(clipped.sum()) / max(int(negative.sum()), 1),
        "ipa/downweighted_fraction": float((negative & (rho_c < 1 - _CLIP_TOL)).sum()) / n,
        "ipa/mismatch_masked_fraction": float((present & (kept_c < 0.5)).sum()) / n,
        "ipa/ratio_std": float(values.std(unbiased=False)) if values.numel() else 0.0,
        "ipa/ratio_min": float(values.min()) if values.numel() else 1.0,
        "ipa/ratio_max": float(values.max()) if values.numel() else 1.0,
    }


_CLIP_TOL = 1e-3


def ipa_loss(inputs: LossInputs, config: IPAConfig) -> LossOutput:
    """Eq. 9 as a scalar loss."""
    chunk_ids = _chunk_ids_or_fail(inputs)
    mask = inputs.float_mask() * (chunk_ids >= 0).to(inputs.logprobs.dtype)
    old, behaviour = inputs.old(), inputs.behaviour()
    adv = shape_rewards(inputs.rewards, inputs.group_ids, config.advantage)
    returns = chunk_returns(adv, chunk_ids, config.gamma, inputs.num_chunks)

    metrics = mismatch_metrics(old, behaviour, mask)
    if config.token_mismatch.enabled:
        kept = token_mismatch_mask(old, behaviour, config.token_mismatch.low, config.token_mismatch.high)
        metrics["mismatch/masked_fraction"] = float(masked_mean(1 - kept, mask))
        mask = mask * kept
    # m_c compares the trainer's proximal logprobs with μ; ρ_c is against π_θold (see ratio_against).
    chunk_kept = chunk_mismatch_mask(old, behaviour, mask, chunk_ids, config.chunk_mismatch.low,
                                     config.chunk_mismatch.high)
    reference = behaviour if config.ratio_against == "behaviour" else old
    rho = chunk_geometric_ratio(inputs.logprobs, reference, mask, chunk_ids)
    metrics["mismatch/chunk_masked_fraction"] = float(masked_mean(1 - chunk_kept, mask))
    metrics.update(chunk_stats(rho, returns, chunk_kept, mask, chunk_ids, config.clip_max))
    if config.chunk_mismatch.enabled:
        mask = mask * chunk_kept

    weight = torch.where(returns > 0, torch.ones_like(rho), rho.clamp(0.0, config.clip_max))
    per_token = -(weight * returns).detach() * inputs.logprobs
    loss = aggregate(per_token, mask, config.aggregation)
    metrics.update({
        "loss": float(loss.detach()),
        "advantage/mean": float(adv.mean()),
        "advantage/positive_fraction": float((adv > 0).float().mean()),
        "tokens": float(mask.sum()),
        "is/ratio_mean": float(masked_mean(rho, mask)),
        "is/ratio_max": float(rho[mask > 0].max()) if mask.sum() > 0 else 1.0,
        "is/truncated_fraction": float(masked_mean(((returns <= 0) & (rho > config.clip_max)).float(), mask)),
        "ipa/chunks_mean": float(resolve_num_chunks(chunk_ids, inputs.num_chunks).float().mean()),
    })
    return LossOutput(loss, metrics)
