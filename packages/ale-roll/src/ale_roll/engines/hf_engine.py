"""InferenceEngine on HF transformers ``generate``: the dependency-free backend (CPU or GPU)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

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
from ale_roll.engines.weight_sync import fingerprint, read_weight_source
from ale_roll.types import StopReason


class _AbortCriteria:
    """Per-row stopping criterion: rows whose request was aborted stop at the next token."""

    def __init__(self, engine: HFInferenceEngine, request_ids: list[str], prompt_len: int) -> None:
        self.engine, self.request_ids, self.prompt_len = engine, request_ids, prompt_len
        self.aborted_at: dict[int, int] = {}  # row -> number of tokens it had when aborted

    def __call__(self, input_ids: torch.Tensor, scores: Any, **kwargs: Any) -> torch.Tensor:
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        with self.engine._lock:
            aborted = set(self.engine._aborted)
        if not aborted:  # the usual case: no per-row scan at every generated token
            return done
        for row, rid in enumerate(self.request_ids):
            if rid in aborted:
                self.aborted_at.setdefault(row, input_ids.shape[1] - self.prompt_len)
                done[row] = True
        return done


class _TokenReporter:
    """Reports each row's tokens as ``generate`` samples them (``on_token(row, token, logprob)``).

    Two hooks of HF's loop: a logits processor placed before the sampling warpers (HF merges custom
    processors ahead of temperature/top-k/top-p), so it sees the raw logits ``output_logits``
    returns, keeps them and their logsumexp; and a stopping criterion, called once the step's token
    is appended, that reports it. A row is reported up to the cut :meth:`HFInferenceEngine._finish`
    makes (its first stop token, its abort, ``max_tokens``), so what was reported is exactly a
    prefix of the returned Generation.
    """

    def __init__(self, on_token: TokenCallback, abort: _AbortCriteria, stop_ids: set[int], rows: int,
                 max_tokens: int) -> None:
        self.on_token, self.abort, self.stop_ids, self.max_tokens = on_token, abort, stop_ids, max_tokens
        self.open = set(range(rows))
        self.logits: torch.Tensor | None = None
        self.lse: torch.Tensor | None = None

    def processor(self) -> Any:
        from transformers import LogitsProcessor

        reporter = self

        class Keep(LogitsProcessor):  # type: ignore[misc]
            def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
                reporter.logits, reporter.lse = scores.float(), torch.logsumexp(scores.float(), -1)
                return scores

        return Keep()

    def __call__(self, input_ids: torch.Tensor, scores: Any, **kwargs: Any) -> torch.Tensor:
        n = input_ids.shape[1] - self.abort.prompt_len  # tokens each row has now
        assert self.logits is not None and self.lse is not None
        last = input_ids[:, -1]
        # One gather and two list conversions per step, not tensor indexing per row (256 rows a call).
        lps = (self.logits.gather(1, last.unsqueeze(1)).squeeze(1) - self.lse).tolist()
        toks = last.tolist()
        for row in sorted(self.open):
            cut = self.abort.aborted_at.get(row)
            if (cut is not None and n > cut) or n > self.max_tokens:
                self.open.discard(row)
                continue
            self.on_token(row, toks[row], lps[row])
            if toks[row] in self.stop_ids:
                self.open.discard(row)
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


class HFInferenceEngine(ReportingGenerate):
    """Batched generation with raw-model logprobs; weights replaced in place by ``update_weights``."""

    def __init__(self, model: Any, eos_token_ids: Sequence[int] | None = None, pad_token_id: int | None = None) -> None:
        self.model = model.eval()
        cfg = model.config
        eos = eos_token_ids if eos_token_ids is not None else cfg.eos_token_id
        self.eos_token_ids = tuple([eos] if isinstance(eos, int) else (eos or []))
        pad = pad_token_id if pad_token_id is not None else cfg.pad_token_id
        self.pad_token_id = int(pad if pad is not None else (self.eos_token_ids or (0,))[0])
        self._version = 0
        self._lock = threading.Lock()
        self._aborted: set[str] = set()
        self._running: set[str] = set()
        self._generate_lock = threading.Lock()

    @classmethod
    def from_pretrained(cls, path: str | Path, dtype: str = "float32", device: str = "cpu") -> HFInferenceEngine:
        from ale_roll.models import load_model

        model, _ = load_model(path, dtype=dtype, device=device)
        return cls(model)

    @property
    def policy_version(self) -> int:
        return self._version

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def abort(self, request_id: str) -> bool:
        with self._lock:
            if request_id not in self._running:
                return False
            self._aborted.add(request_id)
            return True

    def _generate(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams, request_ids: Sequence[str] | None,
        on_token: TokenCallback | None,
    ) -> list[Generation]:
        from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

        ids = request_ids_for(prompts, request_ids)
        if not prompts:
            return []
        stop_ids = set(params.stop_token_ids) | (set() if params.ignore_eos else set(self.eos_token_ids))
        with self._generate_lock:
            with self._lock:
                self._running.update(ids)
            try:
                input_ids, attn = self._left_pad(prompts)
                criteria = _AbortCriteria(self, ids, input_ids.shape[1])
                stopping: list[Any] = [criteria]
                processors = LogitsProcessorList()
                if on_token is not None:
                    reporter = _TokenReporter(on_token, criteria, stop_ids, len(prompts), params.max_tokens)
                    stopping.append(reporter)  # after the abort criterion: it reads its cuts
                    processors.append(reporter.processor())
                gen_cfg = GenerationConfig(
                    max_new_tokens=params.max_tokens,
                    do_sample=not params.greedy,
                    temperature=params.temperature if not params.greedy else None,
                    top_p=params.top_p if not params.greedy else None,
                    top_k=params.top_k if (params.top_k > 0 and not params.greedy) else None,
                    eos_token_id=sorted(stop_ids) or None,
                    pad_token_id=self.pad_token_id,
                    output_logits=True,
                    return_dict_in_generate=True,
                )
                if params.seed is not None:
                    torch.manual_seed(params.seed)
                with torch.no_grad():
                    out = self.model.generate(
                        input_ids=input_ids,
                        attention_mask=attn,
                        generation_config=gen_cfg,
                        stopping_criteria=StoppingCriteriaList(stopping),
                        logits_processor=processors,
                    )
                new = out.sequences[:, input_ids.shape[1]:]
                if new.shape[1]:
                    logits = torch.stack(out.logits, dim=1).float()  # raw logits: [B, n, V]
                    lp = torch.gather(logits, -1, new.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, -1)
                else:
                    lp = new.float()
                return [
                    self._finish(ids[i], list(prompts[i]), new[i].tolist(), lp[i].tolist(), stop_ids,
                                 criteria.aborted_at.get(i), params.max_tokens)
                    for i in range(len(prompts))
                ]
            finally:
                with self._lock:
                    self._running.difference_update(ids)
                    self._aborted.difference_update(ids)

    def _finish(
        self, rid: str, prompt: list[int], toks: list[int], lps: list[float], stop_ids: set[int],
        aborted_at: int | None, max_tokens: int,
    ) -> Generation:
        reason = StopReason.LENGTH
        n = len(toks)
        for j, t in enumerate(toks):
            if aborted_at is not None and j >= aborted_at:
                n, reason = aborted_at, StopReason.ABORTED
                break
            if t in stop_ids:
                n, reason = j + 1, StopReason.STOP  # the stop token is part of the completion, as in vLLM
                break
        else:
            if aborted_at is not None and n < max_tokens:
                reason = StopReason.ABORTED
        return Generation(rid, toks[:n], lps[:n], reason, self._version, prompt)

    def _left_pad(self, prompts: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        # One tensor from nested lists, not a tensor and two slice writes per row (256 rows a call).
        width = max(len(p) for p in prompts)
        pad = self.pad_token_id
        ids = torch.tensor([[pad] * (width - len(p)) + list(p) for p in prompts], dtype=torch.long)
        attn = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], dtype=torch.long)
        return ids.to(self.device), attn.to(self.device)

    @property
    def max_model_len(self) -> int:
        return int(getattr(self.model.config, "max_position_embeddings", 0) or 0)

    def close(self) -> None:
        """Nothing to release (the model is plain memory)."""

    def update_weights(self, weights: WeightSource, version: int) -> WeightUpdate:
        tensors = read_weight_source(weights)
        own = self.model.state_dict()
        unknown = sorted(set(tensors) - set(own))
        if unknown:
            raise WeightSyncError(f"unknown weight names: {unknown[:5]}")
        with self._generate_lock, torch.no_grad():
            for name, t in tensors.items():
                own[name].copy_(t)
            # Fingerprint what is now *in the model* (same layout as HF names), not just what arrived:
            # that also proves the copy took effect.
            loaded = {name: own[name] for name in tensors}
            self._version = version
        return WeightUpdate(version=version, fingerprint=fingerprint(loaded), num_tensors=len(tensors))
