"""Continuous micro-batching in front of one InferenceEngine (used by the InferenceService).

Requests from many concurrent RPCs are queued; one driver thread gathers them (a short window
after the first arrives, at most ``max_batch``) and calls ``engine.generate`` once per group of
compatible requests. While the engine runs, new requests queue up and go out together in the next
call, so under load the engine always sees full batches.

Which requests share a call:
- equal sampling parameters except ``max_tokens``: the call runs to the largest ``max_tokens`` of the
  group and each result is cut back to its own (a prefix of a sample is a sample of that length);
- the longest prompt plus that largest ``max_tokens`` must fit the model's context, else the group
  is split (each request alone always fits: ``max_tokens`` is clamped on admission);
- a request with a ``seed`` runs alone: the seed promises the same output every time, and on
  batch-sampling engines (HF) the output would depend on who else shares the batch.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from ale_roll.engines.base import Generation, InferenceEngine, SamplingParams
from ale_roll.types import StopReason


@dataclass(eq=False)  # compared by identity: list.remove must not compare prompts field by field
class _Item:
    request_id: str
    prompt: list[int]
    params: SamplingParams
    key: object
    future: Future[Generation] = field(default_factory=Future)
    state: str = "queued"  # queued -> running -> done


def _group_key(params: SamplingParams, rid: str) -> object:
    """Requests with equal keys may share one engine call."""
    if params.seed is not None:
        return ("solo", rid)
    return (params.temperature, params.top_p, params.top_k, params.stop_token_ids, params.ignore_eos)


class MicroBatcher:
    """Gathers concurrent requests into few ``engine.generate`` calls; thread-safe."""

    def __init__(self, engine: InferenceEngine, *, max_model_len: int = 0, window_s: float = 0.002,
                 max_batch: int = 256) -> None:
        self.engine, self.max_model_len = engine, max_model_len
        self.window_s, self.max_batch = window_s, max_batch
        self.engine_calls = 0
        """How many ``engine.generate`` calls were made (for tests and metrics)."""
        self._cond = threading.Condition()
        self._pending: list[_Item] = []
        self._items: dict[str, _Item] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._drive, name="ale-microbatcher", daemon=True)
        self._thread.start()

    def clamp(self, prompt_len: int, max_tokens: int) -> int:
        """``max_tokens`` cut to what the model's context leaves after the prompt (ValueError if none)."""
        if not self.max_model_len:
            return max_tokens
        room = self.max_model_len - prompt_len
        if room <= 0:
            raise ValueError(f"the prompt has {prompt_len} tokens; the model's context is {self.max_model_len}")
        return min(max_tokens, room)

    def submit(self, prompt: Sequence[int], params: SamplingParams, request_id: str) -> Future[Generation]:
        """Queue one request; the future resolves to its Generation (``StopReason.ABORTED`` if aborted)."""
        return self.submit_many([prompt], [params], [request_id])[0]

    def submit_many(self, prompts: Sequence[Sequence[int]], params: Sequence[SamplingParams],
                    request_ids: Sequence[str]) -> list[Future[Generation]]:
        """Queue several requests at once, so they land in the same engine call (all or none queued)."""
        items = []
        for prompt, sp, rid in zip(prompts, params, request_ids, strict=True):
            max_tokens = self.clamp(len(prompt), sp.max_tokens)
            if max_tokens != sp.max_tokens:
                sp = dataclasses.replace(sp, max_tokens=max_tokens)
            items.append(_Item(rid, list(prompt), sp, _group_key(sp, rid)))
        with self._cond:
            if self._closed:
                raise RuntimeError("the batcher is closed")
            taken = [i.request_id for i in items if i.request_id in self._items]
            if taken or len({i.request_id for i in items}) != len(items):
                raise ValueError(f"request ids already running or repeated: {taken[:5] or 'duplicates'}")
            for item in items:
                self._items[item.request_id] = item
            self._pending.extend(items)
            self._cond.notify_all()
        return [i.future for i in items]

    def generate(self, prompts: Sequence[Sequence[int]], params: Sequence[SamplingParams],
                 request_ids: Sequence[str], timeout_s: float | None = None) -> list[Generation]:
        """Submit many requests at once and wait for all of them."""
        return [f.result(timeout=timeout_s) for f in self.submit_many(prompts, params, request_ids)]

    def running(self) -> list[str]:
        """Ids of every queued or running request."""
        with self._cond:
            return list(self._items)

    def abort(self, request_id: str) -> bool:
        """Abort a queued request (resolved at once, no tokens) or a running one (via the engine)."""
        with self._cond:
            item = self._items.get(request_id)
            if item is None:
                return False
            if item.state == "queued":
                self._pending.remove(item)
                del self._items[request_id]
                item.state = "done"
                item.future.set_result(Generation(request_id, [], [], StopReason.ABORTED, self.engine.policy_version, item.prompt))
                return True
        return bool(self.engine.abort(request_id))

    def close(self, timeout_s: float = 10.0) -> None:
        """Abort everything queued or running and stop the driver thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for rid in self.running():
            self.abort(rid)
        self._thread.join(timeout_s)

    # -- the driver thread -------------------------------------------------------------------------

    def _next_batch(self) -> list[_Item] | None:
        with self._cond:
            # Continuous batching: only a fresh burst waits for its window; requests that queued
            # while the engine was busy go out at once.
            fresh = not self._pending
            while True:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return None
                deadline = time.monotonic() + self.window_s
                while fresh and len(self._pending) < self.max_batch and not self._closed:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                if self._pending:  # else all of it was aborted during the window: wait again
                    break
            if self._closed:
                return None
            key = self._pending[0].key
            batch: list[_Item] = []
            longest = most = 0
            for item in self._pending:
                if len(batch) >= self.max_batch or item.key != key:
                    continue
                lo, mo = max(longest, len(item.prompt)), max(most, item.params.max_tokens)
                if self.max_model_len and batch and lo + mo > self.max_model_len:
                    continue  # would push the longest prompt past the context: next call
                batch.append(item)
                longest, most = lo, mo
            for item in batch:
                item.state = "running"
            self._pending = [i for i in self._pending if i.state == "queued"]
            return batch

    def _drive(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            self._run(batch)

    def _run(self, batch: list[_Item]) -> None:
        most = max(i.params.max_tokens for i in batch)
        params = dataclasses.replace(batch[0].params, max_tokens=most)
        try:
            self.engine_calls += 1
            gens = self.engine.generate([i.prompt for i in batch], params, [i.request_id for i in batch])
        except BaseException as e:  # noqa: BLE001 - every waiter must hear about the failure
            self._finish(batch, None, e)
            return
        self._finish(batch, [_cut(g, i.params.max_tokens) for g, i in zip(gens, batch)], None)

    def _finish(self, batch: list[_Item], gens: list[Generation] | None, error: BaseException | None) -> None:
        with self._cond:
            for item in batch:
                self._items.pop(item.request_id, None)
                item.state = "done"
        for n, item in enumerate(batch):
            if gens is not None:
                item.future.set_result(gens[n])
            else:
                item.future.set_exception(error or RuntimeError("generation failed"))


def _cut(gen: Generation, max_tokens: int) -> Generation:
    """A group's call ran to its largest ``max_tokens``: cut this request back to its own."""
    if len(gen.token_ids) <= max_tokens:
        return gen
    return dataclasses.replace(gen, token_ids=gen.token_ids[:max_tokens], logprobs=gen.logprobs[:max_tokens],
                               stop_reason=StopReason.LENGTH)
