"""Per-token logprobs of a causal LM, shared by every torch-based engine."""

from __future__ import annotations

import torch


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions that skip padding, so left- and right-padded rows see the same positions."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def token_logprobs(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """``out[b, t] = log p(input_ids[b, t] | input_ids[b, :t])``; 0 where there is no prefix or padding.

    Uses gather - logsumexp rather than a full log_softmax so the [B, T, V] tensor is not copied.
    """
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    logits = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids_from_mask(attention_mask),
        use_cache=False,
    ).logits[:, :-1].float()
    targets = input_ids[:, 1:].unsqueeze(-1)
    lp = torch.gather(logits, -1, targets).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    # A token has a logprob only if it and its predecessor are real (the first real token of a
    # left-padded row has no prefix, like column 0).
    m = attention_mask.to(lp.dtype)
    lp = lp * m[:, 1:] * m[:, :-1]
    return torch.cat([torch.zeros_like(lp[:, :1]), lp], dim=1)


def weighted_loss(
    logprobs: torch.Tensor,
    label_mask: torch.Tensor,
    token_weights: torch.Tensor | None,
    loss_fn,
) -> torch.Tensor:
    """The loss rule of ``TrainEngine.backward``: exactly one of weights / loss_fn."""
    if (token_weights is None) == (loss_fn is None):
        raise ValueError("pass exactly one of token_weights or loss_fn")
    mask = label_mask.to(logprobs.dtype)
    if loss_fn is not None:
        return loss_fn(logprobs, mask)
    assert token_weights is not None
    return -(token_weights.to(logprobs.dtype) * logprobs * mask).sum()
