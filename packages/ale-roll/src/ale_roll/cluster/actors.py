"""The roles as plain classes; `ray_cluster` turns each into a Ray actor (`ray.remote(cls)`).

Each actor owns one engine (or a set of environments) and exposes it method by method, so the
proxies in `proxies.py` can implement the engine Protocols on top. Actors hold no Ray import: the
same classes run in-process in unit tests.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ale_roll.config import EnvConfig, RunConfig
from ale_roll.engines.base import Generation, SamplingParams, TokenLossFn, WeightSource, WeightUpdate


def _set_threads(num_cpus: float, configured: int) -> None:
    import torch

    torch.set_num_threads(configured or max(1, int(num_cpus)))


def closure_dicts(fn: Any) -> list[dict[str, Any]]:
    """The dicts a function closes over, in closure order.

    Loss functions report their metrics by filling a dict they close over (`trainer/step.py`); the
    train actor runs a pickled copy, so these dicts travel back and are merged into the caller's.
    """
    cells = getattr(fn, "__closure__", None) or ()
    out = []
    for cell in cells:
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


class TrainActor:
    """Holds the TrainEngine (torch or DeepSpeed) built from the run config."""

    def __init__(self, cfg: RunConfig, model_dir: str) -> None:
        from ale_roll.trainer.setup import _train_engine

        _set_threads(cfg.cluster.train.num_cpus, cfg.engine.torch_threads)
        self.engine = _train_engine(cfg, Path(model_dir))

    def ready(self) -> tuple[int, int]:
        """(pid, policy version) once the engine is built."""
        return os.getpid(), self.engine.policy_version

    def policy_version(self) -> int:
        return self.engine.policy_version

    def forward_logprobs(self, input_ids: Any, attention_mask: Any = None) -> Any:
        return self.engine.forward_logprobs(input_ids, attention_mask).cpu()

    def backward(self, input_ids: Any, label_mask: Any, attention_mask: Any = None, token_weights: Any = None,
                 loss_fn: TokenLossFn | None = None) -> tuple[float, list[dict[str, Any]]]:
        loss = self.engine.backward(input_ids, label_mask, attention_mask=attention_mask,
                                    token_weights=token_weights, loss_fn=loss_fn)
        return loss, closure_dicts(loss_fn)

    def step(self) -> tuple[float, int]:
        """Optimizer step; (grad norm, new policy version)."""
        return self.engine.step(), self.engine.policy_version

    def export_weights(self) -> dict[str, Any]:
        return self.engine.export_weights()

    def save_checkpoint(self, directory: str) -> None:
        self.engine.save_checkpoint(directory)

    def load_checkpoint(self, directory: str) -> int:
        self.engine.load_checkpoint(directory)
        return self.engine.policy_version

    def save_model(self, directory: str, tokenizer: Any) -> None:
        self.engine.save_model(directory, tokenizer)

    def get_lr(self) -> float:
        return self.engine.get_lr()

    def set_lr(self, lr: float) -> None:
        self.engine.set_lr(lr)

    def reset_optimizer(self) -> None:
        self.engine.reset_optimizer()

    def close(self) -> None:
        self.engine.close()


class InferenceActor:
    """Holds the InferenceEngine (HF or vLLM) and remembers the last verified weight update."""

    def __init__(self, cfg: RunConfig, model_dir: str) -> None:
        from ale_roll.trainer.setup import _inference_engine

        _set_threads(cfg.cluster.inference.num_cpus, cfg.engine.torch_threads)
        self.engine = _inference_engine(cfg, Path(model_dir))
        self.last_update: WeightUpdate | None = None

    def ready(self) -> tuple[int, int]:
        return os.getpid(), self.engine.policy_version

    def policy_version(self) -> int:
        return self.engine.policy_version

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
                 request_ids: Sequence[str] | None = None) -> list[Generation]:
        return self.engine.generate(prompts, params, request_ids)

    def abort(self, request_id: str) -> bool:
        return self.engine.abort(request_id)

    def update_weights(self, weights: WeightSource, version: int) -> WeightUpdate:
        # The fingerprint is of the tensors as this process received them: the sender compares it
        # with its own (WeightSync), so a transfer that corrupts or drops a tensor is caught.
        self.last_update = self.engine.update_weights(weights, version)
        return self.last_update

    def get_last_update(self) -> WeightUpdate | None:
        return self.last_update


class EnvWorkerActor:
    """Runs environments for episodes: each `create` makes one, addressed by id until `close`."""

    def __init__(self, env: EnvConfig, env_timeout_s: float) -> None:
        # user_tasks imports neither torch nor the controller: a rollout worker never loads torch
        # (seconds per worker on a small CPU).
        from ale_roll.user_tasks import make_env_factory

        self._factory = make_env_factory(env, env_timeout_s, batched=False)
        self._envs: dict[int, Any] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()  # the actor is threaded: envs are created/closed concurrently
        self.created = 0

    def ready(self) -> int:
        return os.getpid()

    def create(self) -> int:
        env = self._factory()
        with self._lock:
            env_id = next(self._ids)
            self._envs[env_id] = env
            self.created += 1
        return env_id

    def reset(self, env_id: int, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        return self._envs[env_id].reset(seed)  # type: ignore[no-any-return]

    def step(self, env_id: int, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return self._envs[env_id].step(action)  # type: ignore[no-any-return]

    def close(self, env_id: int) -> None:
        with self._lock:
            env = self._envs.pop(env_id, None)
        if env is not None:
            env.close()

    def stats(self) -> dict[str, int]:
        """Environments created so far and still open."""
        with self._lock:
            return {"created": self.created, "open": len(self._envs)}
