"""The two engine interfaces and the plain values they exchange.

A TrainEngine owns the trainable model and its optimizer (plain torch, DeepSpeed). An
InferenceEngine generates token ids with their logprobs (HF transformers, vLLM). Backends implement
these Protocols without inheriting from anything; the rest of ale-roll speaks only these types.

Token-level conventions shared by every engine:
- ``logprobs[b, t]`` is ``log p(input_ids[b, t] | input_ids[b, :t])``; column 0 has no prefix and is 0.
- Logprobs come from the raw model distribution (temperature 1, no top-k/top-p), so train-side and
  inference-side logprobs of the same tokens are directly comparable.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Union, runtime_checkable

from ale_roll.types import StopReason

if TYPE_CHECKING:
    import torch

#: Named tensors, or a safetensors file holding them (the cross-process path).
WeightSource = Union["Mapping[str, torch.Tensor]", str, os.PathLike]

#: ``loss_fn(logprobs [B, T], label_mask [B, T]) -> scalar`` for engines' ``backward`` (token level; not
#: :class:`ale_roll.algorithms.LossFn`, a registered RL/SFT loss over a whole batch's inputs).
TokenLossFn = Callable[["torch.Tensor", "torch.Tensor"], "torch.Tensor"]


class WeightSyncError(RuntimeError):
    """Raised when weights that reached an inference engine differ from the ones sent."""


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one completion."""

    max_tokens: int = 32
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    """0 disables top-k."""
    stop_token_ids: tuple[int, ...] = ()
    """Extra ids that end a completion (the tokenizer's EOS always does unless ``ignore_eos``)."""
    ignore_eos: bool = False
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass
class Generation:
    """One completion: its token ids, the raw-model logprob of each, and why it stopped."""

    request_id: str
    token_ids: list[int]
    logprobs: list[float]
    stop_reason: StopReason
    """STOP, LENGTH or ABORTED."""
    policy_version: int
    prompt_token_ids: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.stop_reason = StopReason(self.stop_reason)  # a plain "stop" string is accepted


@dataclass(frozen=True)
class WeightUpdate:
    """What an inference engine reports after loading weights: used to verify the sync."""

    version: int
    fingerprint: str
    """:func:`ale_roll.engines.weight_sync.fingerprint` of the tensors as the engine received them."""
    num_tensors: int


@runtime_checkable
class TrainEngine(Protocol):
    """Forward/backward/step over a causal LM, plus weight export, checkpoints and the optimizer
    knobs the trainer turns (learning rate, reset). Callers use nothing else of an engine."""

    @property
    def policy_version(self) -> int:
        """Number of optimizer steps taken (restored by :meth:`load_checkpoint`)."""
        ...

    def forward_logprobs(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Per-token logprobs ``[B, T]`` without building a graph."""
        ...

    def backward(
        self,
        input_ids: torch.Tensor,
        label_mask: torch.Tensor,
        *,
        attention_mask: torch.Tensor | None = None,
        token_weights: torch.Tensor | None = None,
        loss_fn: TokenLossFn | None = None,
    ) -> float:
        """Accumulate gradients and return the loss value.

        With ``token_weights`` the loss is ``-(token_weights * logprobs * label_mask).sum()`` — the
        caller's weights carry any normalisation (advantages / token count). With ``loss_fn`` the
        loss is ``loss_fn(logprobs, label_mask)``. Exactly one of the two is given.
        """
        ...

    def step(self) -> float:
        """Apply the optimizer (after grad clipping), zero the grads, bump the version; returns the grad norm."""
        ...

    def export_weights(self) -> dict[str, torch.Tensor]:
        """Full (un-sharded) named weights on CPU in HF naming, ready for an inference engine."""
        ...

    def save_checkpoint(self, directory: str | Path) -> None:
        """Model, optimizer, RNG states and policy version."""
        ...

    def load_checkpoint(self, directory: str | Path) -> None:
        """Restore what :meth:`save_checkpoint` wrote."""
        ...

    def save_model(self, directory: str | Path, tokenizer: Any) -> None:
        """The current weights as a model directory loadable as ``model.path`` (safetensors, config
        and ``tokenizer``'s files). A collective on multi-rank engines (rank 0 writes)."""
        ...

    def get_lr(self) -> float:
        """The optimizer's learning rate (of its first param group)."""
        ...

    def set_lr(self, lr: float) -> None:
        """Set the learning rate of every param group (SFT warm-up, then RL, use different rates)."""
        ...

    def reset_optimizer(self) -> None:
        """Drop the optimizer's moments (Adam's m and v): the next step starts as a fresh optimizer
        would, at the current weights and learning rate."""
        ...

    def close(self) -> None:
        """Release what the engine holds beyond memory (a process group); a no-op where there is none."""
        ...


@runtime_checkable
class InferenceEngine(Protocol):
    """Token ids in, token ids + logprobs out; weights replaceable while the engine runs."""

    @property
    def policy_version(self) -> int:
        """Version of the weights currently loaded."""
        ...

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        params: SamplingParams,
        request_ids: Sequence[str] | None = None,
    ) -> list[Generation]:
        """Complete each prompt; blocks until all are finished or aborted."""
        ...

    def abort(self, request_id: str) -> bool:
        """Stop a running request (from another thread); its Generation ends with ``StopReason.ABORTED``."""
        ...

    def update_weights(self, weights: WeightSource, version: int) -> WeightUpdate:
        """Load new weights (named tensors or a safetensors file) and report what was received."""
        ...

    @property
    def max_model_len(self) -> int:
        """Longest prompt + completion the engine serves; 0 where it does not check lengths itself
        (a remote service checks them on its side)."""
        ...

    def close(self) -> None:
        """Release what the engine holds beyond memory (vLLM's engine-core process, a client's channel);
        a no-op where there is none."""
        ...


TokenCallback = Callable[[int, int, float], None]
"""``(row, token_id, logprob)``: one generated token of the ``row``-th prompt, as it is sampled."""


def request_ids_for(prompts: Sequence[Sequence[int]], request_ids: Sequence[str] | None) -> list[str]:
    """The caller's request ids (one per prompt, else ValueError), or a fresh one per prompt."""
    if request_ids is None:
        return [uuid.uuid4().hex for _ in prompts]
    ids = list(request_ids)
    if len(ids) != len(prompts):
        raise ValueError("request_ids and prompts differ in length")
    return ids


class ReportingGenerate:
    """``generate`` and ``generate_streaming`` of an engine with one ``_generate(prompts, params,
    request_ids, on_token)`` that reports tokens when ``on_token`` is given."""

    def _generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
                  request_ids: Sequence[str] | None, on_token: TokenCallback | None) -> list[Generation]:
        raise NotImplementedError

    def generate(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams, request_ids: Sequence[str] | None = None
    ) -> list[Generation]:
        return self._generate(prompts, params, request_ids, None)

    def generate_streaming(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams, request_ids: Sequence[str] | None,
        on_token: TokenCallback,
    ) -> list[Generation]:
        """:meth:`generate`, calling ``on_token`` for each token as it is sampled
        (:class:`TokenStreamingEngine`)."""
        return self._generate(prompts, params, request_ids, on_token)


@runtime_checkable
class TokenStreamingEngine(InferenceEngine, Protocol):
    """An engine that can report each token as it is sampled (the InferenceService streams them)."""

    def generate_streaming(
        self,
        prompts: Sequence[Sequence[int]],
        params: SamplingParams,
        request_ids: Sequence[str] | None,
        on_token: TokenCallback,
    ) -> list[Generation]:
        """:meth:`generate`, calling ``on_token`` on the generating thread for every token that ends
        up in a returned Generation, in order, before it returns (so the tokens reported for a row
        are a prefix of, or all of, that row's ``token_ids``, and its logprobs the same values)."""
        ...
