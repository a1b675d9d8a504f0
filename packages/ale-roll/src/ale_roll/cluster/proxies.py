"""Proxies that implement the engine Protocols (and gem's env API) over Ray actor handles.

The controller cannot tell them from in-process engines: `RemoteTrainEngine` is a TrainEngine,
`RemoteInferenceEngine` an InferenceEngine, `RemoteEnv` a GemEnv. Every call waits with a timeout
(`ActorCallTimeout`); a timed-out call is cancelled on the actor where Ray allows it.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import GetTimeoutError

from ale_roll.cluster.actors import closure_dicts
from ale_roll.engines.base import Generation, SamplingParams, TokenLossFn, WeightSource, WeightUpdate


class ActorCallTimeout(TimeoutError):
    """A call to a Ray actor did not finish within its timeout."""


def call(ref: Any, timeout_s: float, what: str) -> Any:
    """`ray.get` with a timeout; cancels the task and raises ActorCallTimeout when it expires."""
    try:
        return ray.get(ref, timeout=timeout_s)
    except GetTimeoutError:
        with contextlib.suppress(Exception):  # not every actor task can be cancelled
            ray.cancel(ref)
        raise ActorCallTimeout(f"{what} exceeded {timeout_s}s") from None


class RemoteTrainEngine:
    """TrainEngine over a `TrainActor`; the policy version is cached from `step`/`load_checkpoint`."""

    def __init__(self, actor: Any, version: int, timeout_s: float) -> None:
        self.actor = actor
        self.timeout_s = timeout_s
        self._version = version

    def _call(self, ref: Any, what: str) -> Any:
        return call(ref, self.timeout_s, f"train actor {what}")

    @property
    def policy_version(self) -> int:
        return self._version

    def forward_logprobs(self, input_ids: Any, attention_mask: Any = None) -> Any:
        return self._call(self.actor.forward_logprobs.remote(input_ids, attention_mask), "forward_logprobs")

    def backward(self, input_ids: Any, label_mask: Any, *, attention_mask: Any = None, token_weights: Any = None,
                 loss_fn: TokenLossFn | None = None) -> float:
        loss, dicts = self._call(self.actor.backward.remote(input_ids, label_mask, attention_mask, token_weights,
                                                            loss_fn), "backward")
        for mine, theirs in zip(closure_dicts(loss_fn), dicts, strict=False):
            mine.update(theirs)
        return float(loss)

    def step(self) -> float:
        grad_norm, self._version = self._call(self.actor.step.remote(), "step")
        return float(grad_norm)

    def export_weights(self) -> dict[str, Any]:
        weights: dict[str, Any] = self._call(self.actor.export_weights.remote(), "export_weights")
        return weights

    def save_checkpoint(self, directory: str | Path) -> None:
        self._call(self.actor.save_checkpoint.remote(str(directory)), "save_checkpoint")

    def load_checkpoint(self, directory: str | Path) -> None:
        self._version = int(self._call(self.actor.load_checkpoint.remote(str(directory)), "load_checkpoint"))

    def save_model(self, directory: str | Path, tokenizer: Any) -> None:
        """Written where the train actor runs (the directory must be shared with this process's readers)."""
        self._call(self.actor.save_model.remote(str(directory), tokenizer), "save_model")

    def get_lr(self) -> float:
        return float(self._call(self.actor.get_lr.remote(), "get_lr"))

    def set_lr(self, lr: float) -> None:
        self._call(self.actor.set_lr.remote(float(lr)), "set_lr")

    def reset_optimizer(self) -> None:
        self._call(self.actor.reset_optimizer.remote(), "reset_optimizer")

    def close(self) -> None:
        self._call(self.actor.close.remote(), "close")


class RemoteInferenceEngine:
    """InferenceEngine over an `InferenceActor`.

    Weights pushed as tensors go through Ray's object store once (`ray.put`); a path (safetensors
    file) is passed as is and must be readable where the actor runs.
    """

    def __init__(self, actor: Any, version: int, generate_timeout_s: float, timeout_s: float) -> None:
        self.actor = actor
        self.generate_timeout_s = generate_timeout_s
        self.timeout_s = timeout_s
        self._version = version  # only update_weights (through this proxy) changes it

    @property
    def policy_version(self) -> int:
        return self._version

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
                 request_ids: Sequence[str] | None = None) -> list[Generation]:
        ref = self.actor.generate.remote([list(p) for p in prompts], params, list(request_ids) if request_ids else None)
        gens: list[Generation] = call(ref, self.generate_timeout_s, "inference actor generate")
        return gens

    def abort(self, request_id: str) -> bool:
        return bool(call(self.actor.abort.remote(request_id), self.timeout_s, "inference actor abort"))

    def update_weights(self, weights: WeightSource, version: int) -> WeightUpdate:
        payload: Any = ray.put(dict(weights)) if isinstance(weights, Mapping) else weights
        update: WeightUpdate = call(self.actor.update_weights.remote(payload, version), self.timeout_s,
                                    "inference actor update_weights")
        self._version = update.version
        return update

    @property
    def max_model_len(self) -> int:
        """0: the actor's engine checks lengths itself."""
        return 0

    def close(self) -> None:
        """Nothing here: the cluster owns the inference actor and ends it with the cluster."""


class RemoteEnv:
    """One environment living in an `EnvWorkerActor` (gem's reset/step/close)."""

    def __init__(self, actor: Any, timeout_s: float) -> None:
        self.actor = actor
        self.timeout_s = timeout_s
        self.env_id: int = call(actor.create.remote(), timeout_s, "rollout worker create")

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        out: tuple[str, dict[str, Any]] = call(self.actor.reset.remote(self.env_id, seed), self.timeout_s,
                                               "rollout worker reset")
        return out

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        out: tuple[str, float, bool, bool, dict[str, Any]] = call(
            self.actor.step.remote(self.env_id, action), self.timeout_s, "rollout worker step")
        return out

    def close(self) -> None:
        call(self.actor.close.remote(self.env_id), self.timeout_s, "rollout worker close")


class RoundRobinEnvFactory:
    """`env_factory` for the controller: each new environment goes to the next rollout worker."""

    def __init__(self, actors: Sequence[Any], timeout_s: float) -> None:
        self.actors = list(actors)
        self.timeout_s = timeout_s
        self._next = itertools.count()

    def __call__(self) -> RemoteEnv:
        return RemoteEnv(self.actors[next(self._next) % len(self.actors)], self.timeout_s)
