"""The one batching layer in front of an InferenceEngine: continuous batching, pause/resume.

Every generation request of a process goes through one :class:`MicroBatcher`: the
InferenceService's ``Generate`` streams and ``GenerateBatch`` calls from any client, and the
in-process callers (the rollout's episodes through :class:`~ale_roll.rollout.generation.BatchingGenerator`,
which is a thin asyncio view of the same object). One driver thread calls ``engine.generate``
(through ``compute``, the process's one torch thread, when the engine computes in this process:
see :mod:`ale_roll.engines.compute`); there is no other queue or event loop between a request and
the engine.

Continuous batching: when the engine is idle a request goes out at once (``window_s`` 0, the
default; a positive window makes an idle batcher wait that long for company). Requests that
arrive while a call runs queue up and go out together in the next call as soon as it returns, so
under load the engine always sees full batches without a fixed window.

Which requests share a call:
- equal sampling parameters except ``max_tokens``: the call runs to the largest ``max_tokens`` of the
  group and each result is cut back to its own (a prefix of a sample is a sample of that length);
- the longest prompt plus that largest ``max_tokens`` must fit the model's context, else the group
  is split (each request alone always fits: ``max_tokens`` is clamped on admission);
- a request with a ``seed`` runs alone: the seed promises the same output every time, and on
  batch-sampling engines (HF) the output would depend on who else shares the batch.

Pause/resume (weight sync): :meth:`MicroBatcher.pause` waits for the running call to finish and
holds every queued and new request until :meth:`MicroBatcher.resume`; a request held longer than
``pause_timeout_s`` fails with :class:`BatcherPaused` (a clear error, not a hang). Pauses nest
(each ``pause`` needs its ``resume``), so the trainer's sync and an RPC ``Pause`` can overlap.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field

from ale_roll.engines.base import Generation, InferenceEngine, SamplingParams, TokenStreamingEngine
from ale_roll.engines.compute import ComputeThread
from ale_roll.types import StopReason


class BatcherPaused(TimeoutError):
    """A request waited longer than ``pause_timeout_s`` while the batcher was paused (a weight sync)."""


@dataclass(eq=False)  # compared by identity: list.remove must not compare prompts field by field
class _Item:
    request_id: str
    prompt: list[int]
    params: SamplingParams
    key: object
    queued_at: float = field(default_factory=time.monotonic)
    future: Future[Generation] = field(default_factory=Future)
    state: str = "queued"  # queued -> running -> done
    abort_sent: bool = False
    on_token: Callable[[int, float], None] | None = None
    """``(token_id, logprob)`` per token as it is sampled, where the engine can say (a stream)."""
    reported: int = 0


@dataclass
class BatcherStats:
    """The batcher's own counters (for tests, metrics and the benchmark)."""

    engine_calls: int = 0
    requests: int = 0
    """Requests that reached the engine."""
    batch_sizes: Counter[int] = field(default_factory=Counter)
    """How many engine calls had each batch size."""
    busy_s: float = 0.0
    """Seconds spent inside ``engine.generate``."""
    tokens: int = 0
    """Generated tokens returned (after cutting back to each request's ``max_tokens``)."""
    paused_timeouts: int = 0


def _group_key(params: SamplingParams, rid: str) -> object:
    """Requests with equal keys may share one engine call."""
    if params.seed is not None:
        return ("solo", rid)
    return (params.temperature, params.top_p, params.top_k, params.stop_token_ids, params.ignore_eos)


class MicroBatcher:
    """Gathers concurrent requests into few ``engine.generate`` calls; thread-safe."""

    def __init__(self, engine: InferenceEngine, *, max_model_len: int = 0, window_s: float = 0.0,
                 max_batch: int = 256, pause_timeout_s: float = 60.0, compute: ComputeThread | None = None) -> None:
        self.engine, self.max_model_len, self.compute = engine, max_model_len, compute
        self.window_s, self.max_batch, self.pause_timeout_s = window_s, max_batch, pause_timeout_s
        self.stats = BatcherStats()
        self._cond = threading.Condition()
        self._pending: list[_Item] = []
        self._items: dict[str, _Item] = {}
        self._running = 0  # requests inside the current engine call
        self._pauses = 0
        self._paused_since = 0.0
        self._closed = False
        self._ids = 0
        self._thread = threading.Thread(target=self._drive, name="ale-microbatcher", daemon=True)
        self._thread.start()

    @property
    def engine_calls(self) -> int:
        """How many ``engine.generate`` calls were made."""
        return self.stats.engine_calls

    @property
    def policy_version(self) -> int:
        return self.engine.policy_version

    def clamp(self, prompt_len: int, max_tokens: int) -> int:
        """``max_tokens`` cut to what the model's context leaves after the prompt (ValueError if none)."""
        if not self.max_model_len:
            return max_tokens
        room = self.max_model_len - prompt_len
        if room <= 0:
            raise ValueError(f"the prompt has {prompt_len} tokens; the model's context is {self.max_model_len}")
        return min(max_tokens, room)

    def new_id(self) -> str:
        """A request id unique within this batcher (cheaper than a uuid per request)."""
        with self._cond:
            self._ids += 1
            return f"b{id(self):x}-{self._ids}"

    @property
    def streams_tokens(self) -> bool:
        """Whether ``on_token`` callbacks are called as tokens are sampled (else never: the
        Generation brings them all)."""
        return isinstance(self.engine, TokenStreamingEngine)

    def submit(self, prompt: Sequence[int], params: SamplingParams, request_id: str | None = None,
               on_token: Callable[[int, float], None] | None = None) -> Future[Generation]:
        """Queue one request; the future resolves to its Generation (``StopReason.ABORTED`` if aborted).

        ``on_token(token_id, logprob)`` is called on the batcher's thread for each token as it is
        sampled, where the engine can (:attr:`streams_tokens`): the tokens reported are a prefix of
        (or all of) the Generation's, and every one is reported before the future resolves.
        """
        return self.submit_many([prompt], [params], [request_id or self.new_id()], [on_token])[0]

    def submit_many(self, prompts: Sequence[Sequence[int]], params: Sequence[SamplingParams],
                    request_ids: Sequence[str],
                    on_tokens: Sequence[Callable[[int, float], None] | None] | None = None) -> list[Future[Generation]]:
        """Queue several requests at once, so they land in the same engine call (all or none queued)."""
        items = []
        for n, (prompt, sp, rid) in enumerate(zip(prompts, params, request_ids, strict=True)):
            max_tokens = self.clamp(len(prompt), sp.max_tokens)
            if max_tokens != sp.max_tokens:
                sp = dataclasses.replace(sp, max_tokens=max_tokens)
            items.append(_Item(rid, list(prompt), sp, _group_key(sp, rid),
                               on_token=on_tokens[n] if on_tokens is not None else None))
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

    async def agenerate(self, prompt: Sequence[int], params: SamplingParams, request_id: str | None = None) -> Generation:
        """One request from an event loop: the driver thread resolves it straight onto the loop."""
        return await asyncio.wrap_future(self.submit(prompt, params, request_id))

    def running(self) -> list[str]:
        """Ids of every queued or running request."""
        with self._cond:
            return list(self._items)

    def abort(self, request_id: str) -> bool:
        """Abort a queued request (resolved at once, no tokens) or a running one (via the engine, once)."""
        with self._cond:
            item = self._items.get(request_id)
            if item is None or item.abort_sent:
                return False
            if item.state == "queued":
                self._pending.remove(item)
                del self._items[request_id]
                item.state = "done"
                _resolve(item.future, Generation(request_id, [], [], StopReason.ABORTED, self.engine.policy_version,
                                                 item.prompt))
                return True
            item.abort_sent = True
        return bool(self.engine.abort(request_id))

    # -- pause / resume ----------------------------------------------------------------------------

    @property
    def is_paused(self) -> bool:
        with self._cond:
            return self._pauses > 0

    def pause(self, timeout_s: float | None = None) -> int:
        """Hold new engine calls and wait for the running one; returns how many requests it waited for.

        Raises TimeoutError (and undoes this pause) when the running call outlasts ``timeout_s``.
        """
        with self._cond:
            if self._pauses == 0:
                self._paused_since = time.monotonic()
            self._pauses += 1
            waited = self._running
            if not self._cond.wait_for(lambda: self._running == 0, timeout_s):
                self._resume_locked()
                raise TimeoutError(f"{self._running} running requests did not finish within {timeout_s}s")
            return waited

    def resume(self) -> bool:
        """Undo one :meth:`pause`; returns whether that released the batcher (False: still paused, or was not)."""
        with self._cond:
            return self._resume_locked()

    def _resume_locked(self) -> bool:
        if self._pauses == 0:
            return False
        self._pauses -= 1
        self._cond.notify_all()
        return self._pauses == 0

    @contextlib.contextmanager
    def paused(self, timeout_s: float | None = None) -> Iterator[None]:
        """``with batcher.paused():`` nothing generates inside the block (running calls finished first)."""
        self.pause(timeout_s)
        try:
            yield
        finally:
            self.resume()

    def close(self, timeout_s: float = 10.0) -> None:
        """Abort everything queued or running and stop the driver thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for rid in self.running():
            self.abort(rid)
        self._thread.join(timeout_s)

    # -- the driver thread -------------------------------------------------------------------------

    def _expire_paused_locked(self) -> float | None:
        """Fail the requests held longer than ``pause_timeout_s``; seconds until the next would expire."""
        now, nxt = time.monotonic(), None
        for item in list(self._pending):
            deadline = max(item.queued_at, self._paused_since) + self.pause_timeout_s
            if deadline <= now:
                self._pending.remove(item)
                del self._items[item.request_id]
                item.state = "done"
                self.stats.paused_timeouts += 1
                _resolve(item.future, error=BatcherPaused(
                    f"request {item.request_id} waited {self.pause_timeout_s}s while generation was paused "
                    "(a weight sync) and was not started"))
            else:
                nxt = deadline - now if nxt is None else min(nxt, deadline - now)
        return nxt

    def _next_batch(self) -> list[_Item] | None:
        with self._cond:
            while True:
                while (not self._pending or self._pauses) and not self._closed:
                    self._cond.wait(self._expire_paused_locked() if self._pauses and self._pending else None)
                if self._closed:
                    return None
                if self.window_s > 0 and len(self._pending) < self.max_batch:
                    # An idle batcher's only wait: a positive window lets a fresh burst gather.
                    deadline = time.monotonic() + self.window_s
                    while len(self._pending) < self.max_batch and not self._closed and not self._pauses:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            break
                        self._cond.wait(left)
                if self._pending and not self._pauses and not self._closed:
                    break  # else aborted during the window, or paused meanwhile: wait again
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
            self._running = len(batch)
            return batch

    def _drive(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            try:
                self._run(batch)
            finally:
                with self._cond:
                    self._running = 0
                    self._cond.notify_all()  # a pause() waiting for this call

    def _run(self, batch: list[_Item]) -> None:
        most = max(i.params.max_tokens for i in batch)
        params = dataclasses.replace(batch[0].params, max_tokens=most)
        t0 = time.perf_counter()
        try:
            self.stats.engine_calls += 1
            self.stats.requests += len(batch)
            self.stats.batch_sizes[len(batch)] += 1
            prompts, ids = [i.prompt for i in batch], [i.request_id for i in batch]
            call: Callable[..., list[Generation]] = self.engine.generate
            args: tuple[object, ...] = (prompts, params, ids)
            if any(i.on_token is not None for i in batch) and isinstance(self.engine, TokenStreamingEngine):
                call, args = self.engine.generate_streaming, (*args, _Reporter(batch))
            gens = self.compute.run(call, *args) if self.compute is not None else call(*args)
        except BaseException as e:  # noqa: BLE001 - every waiter must hear about the failure
            self._finish(batch, None, e)
            return
        finally:
            self.stats.busy_s += time.perf_counter() - t0
        self._finish(batch, [_cut(g, i.params.max_tokens) for g, i in zip(gens, batch, strict=True)], None)

    def _finish(self, batch: list[_Item], gens: list[Generation] | None, error: BaseException | None) -> None:
        with self._cond:
            for item in batch:
                self._items.pop(item.request_id, None)
                item.state = "done"
        for n, item in enumerate(batch):
            if gens is not None:
                self.stats.tokens += len(gens[n].token_ids)
                _resolve(item.future, gens[n])
            else:
                _resolve(item.future, error=error or RuntimeError("generation failed"))


class _Reporter:
    """The engine's per-row token callback for one batch: each request hears its own tokens, up to
    its own ``max_tokens`` (the call runs to the group's largest), and a callback that raises is
    dropped instead of failing everyone's engine call."""

    def __init__(self, batch: list[_Item]) -> None:
        self.batch = batch

    def __call__(self, row: int, token: int, logprob: float) -> None:
        item = self.batch[row]
        if item.on_token is None or item.reported >= item.params.max_tokens:
            return
        item.reported += 1
        try:
            item.on_token(token, logprob)
        except Exception:  # noqa: BLE001 - the listener's bug must not fail the batch's call
            item.on_token = None


def _resolve(fut: Future[Generation], result: Generation | None = None, error: BaseException | None = None) -> None:
    # A waiter may have cancelled its future (an asyncio caller's timeout): nothing to tell it then.
    with contextlib.suppress(InvalidStateError):
        if error is not None:
            fut.set_exception(error)
        else:
            assert result is not None
            fut.set_result(result)


def _cut(gen: Generation, max_tokens: int) -> Generation:
    """A group's call ran to its largest ``max_tokens``: cut this request back to its own."""
    if len(gen.token_ids) <= max_tokens:
        return gen
    return dataclasses.replace(gen, token_ids=gen.token_ids[:max_tokens], logprobs=gen.logprobs[:max_tokens],
                               stop_reason=StopReason.LENGTH)
