"""The plain-torch reference TrainEngine: AdamW, grad clipping, one process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict

from ale_roll.engines.base import TokenLossFn
from ale_roll.engines.logprobs import token_logprobs, weighted_loss
from ale_roll.engines.rng import rng_state, set_rng_state


class OptimConfig(BaseModel):
    """Optimizer settings shared by the train engines."""

    model_config = ConfigDict(extra="forbid")

    lr: float = 3e-4
    """AdamW learning rate."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW betas."""
    eps: float = 1e-8
    """AdamW epsilon."""
    weight_decay: float = 0.0
    """Decoupled weight decay."""
    grad_clip: float = 1.0
    """Max global grad norm; 0 disables clipping (the norm is still reported)."""


class TorchTrainEngine:
    """Wraps a HF causal LM with torch AdamW. The reference the DeepSpeed engine is checked against."""

    def __init__(self, model: torch.nn.Module, optim: OptimConfig | None = None, device: str = "cpu") -> None:
        self.optim_config = optim or OptimConfig()
        self.device = torch.device(device)
        self.model = model.to(self.device)
        self.model.train()
        c = self.optim_config
        self.optimizer = torch.optim.AdamW(
            [p for p in self.model.parameters() if p.requires_grad],
            lr=c.lr, betas=c.betas, eps=c.eps, weight_decay=c.weight_decay,
        )
        self._version = 0

    @property
    def policy_version(self) -> int:
        return self._version

    def forward_logprobs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        with torch.no_grad():
            return token_logprobs(self.model, input_ids.to(self.device), _to(attention_mask, self.device))

    def backward(
        self,
        input_ids: torch.Tensor,
        label_mask: torch.Tensor,
        *,
        attention_mask: torch.Tensor | None = None,
        token_weights: torch.Tensor | None = None,
        loss_fn: TokenLossFn | None = None,
    ) -> float:
        lp = token_logprobs(self.model, input_ids.to(self.device), _to(attention_mask, self.device))
        loss = weighted_loss(lp, label_mask.to(self.device), _to(token_weights, self.device), loss_fn)
        loss.backward()
        return float(loss.detach())

    def step(self) -> float:
        params = [p for p in self.model.parameters() if p.requires_grad]
        clip = self.optim_config.grad_clip if self.optim_config.grad_clip > 0 else float("inf")
        norm = torch.nn.utils.clip_grad_norm_(params, clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self._version += 1
        return float(norm)

    def export_weights(self) -> dict[str, torch.Tensor]:
        # Live tensors, no copy: receivers copy on load; valid until the next step().
        return {k: v.detach() for k, v in self.model.state_dict().items()}

    def save_checkpoint(self, directory: str | Path) -> None:
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        torch.save(
            {
                "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "rng": rng_state(),
                "policy_version": self._version,
            },
            out / "torch_engine.pt",
        )

    def load_checkpoint(self, directory: str | Path) -> None:
        state: dict[str, Any] = torch.load(Path(directory) / "torch_engine.pt", weights_only=False)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        set_rng_state(state["rng"])
        self._version = int(state["policy_version"])

    def save_model(self, directory: str | Path, tokenizer: Any) -> None:
        from ale_roll.models import save_model

        save_model(self.model, tokenizer, directory)

    def get_lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def reset_optimizer(self) -> None:
        # AdamW builds a parameter's state lazily at its next step when the entry is missing.
        self.optimizer.state.clear()

    def close(self) -> None:
        """Nothing to release (one process, no process group)."""


def _to(t: torch.Tensor | None, device: torch.device) -> torch.Tensor | None:
    return None if t is None else t.to(device)
