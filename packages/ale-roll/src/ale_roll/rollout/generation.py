"""Per-episode generation calls, batched onto one InferenceEngine by the process's one batcher.

Episodes ask for one completion at a time (`await generator.generate(prompt_ids, params)`), each
at its own pace. `BatchingGenerator` is the asyncio face of a
:class:`~ale_roll.engines.batcher.MicroBatcher` (continuous batching on one driver thread): a
request goes from the event loop into the batcher's queue and its result comes straight back onto
the loop, with no dispatcher task or executor hop in between. The engine may be in-process (HF,
vLLM) or the InferenceService client; both implement the `InferenceEngine` Protocol. In
agent-native mode the InferenceService that the agents' ModelProxy calls serves *this* batcher
(`InferenceServicer(generator.batcher, ...)`), so agents' calls and GEM episodes share one queue,
one pause and one engine.

Weight sync pauses generation only for the sync itself: `async with generator.paused():` waits for
the running engine call, holds new ones back, and releases them when the new weights are in.
Every request has a timeout; a timed-out request is aborted on the engine and raises
`GenerationTimeout` (the episode is then filtered and resampled).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import Future
from typing import Any, Protocol

from ale_roll.engines.base import Generation, InferenceEngine, SamplingParams
from ale_roll.engines.batcher import BatcherPaused, MicroBatcher
from ale_roll.engines.compute import ComputeThread


class GenerationTimeout(TimeoutError):
    """A generation request did not finish within its timeout."""


class Generator(Protocol):
    """What an episode needs from inference."""

    @property
    def policy_version(self) -> int:
        """Version of the weights new requests are served with."""
        ...

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Generation:
        """One completion for one prompt."""
        ...


class BatchingGenerator:
    """Batches concurrent generation requests onto one engine (see the module docstring)."""

    def __init__(self, engine: InferenceEngine, *, max_batch: int = 64, window_s: float = 0.0,
                 timeout_s: float = 60.0, compute: ComputeThread | None = None) -> None:
        self.engine = engine
        self.timeout_s = timeout_s
        # Held requests fail with the generation timeout, not before: the pause is part of it.
        # max_model_len 0: nothing is clamped here (the episodes' max_new_tokens bound a completion).
        # compute: the process's torch thread when the engine computes here (None for a remote one).
        self.batcher = MicroBatcher(engine, window_s=window_s, max_batch=max_batch, pause_timeout_s=timeout_s,
                                    compute=compute)

    @property
    def policy_version(self) -> int:
        return self.engine.policy_version

    @property
    def max_batch(self) -> int:
        return self.batcher.max_batch

    @property
    def busy_s(self) -> float:
        """Seconds the engine spent generating for this batcher."""
        return self.batcher.stats.busy_s

    @property
    def tokens(self) -> int:
        """Generated tokens returned."""
        return self.batcher.stats.tokens

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Generation:
        loop = asyncio.get_running_loop()
        rid = self.batcher.new_id()
        out: asyncio.Future[Generation] = loop.create_future()
        # The driver thread hands the result straight to this loop: one thread switch per request.
        self.batcher.submit(prompt_ids, params, rid).add_done_callback(
            lambda f: _call_soon(loop, _settle, out, f))
        # A timer per request, not wait_for + shield: those add two tasks per request on the event
        # loop, which a 256-episode step pays 256 times on one core however many torch threads run.
        timer = loop.call_later(self.timeout_s, self._expire, rid, out)
        try:
            return await out
        finally:
            timer.cancel()

    async def generate_many(self, prompts: Sequence[list[int]], params: SamplingParams) -> list[Generation]:
        """Many completions as one request (`EpisodeRunner.run_batch`: a synchronous step's episodes): queued
        together, so they share engine calls (``max_batch`` each), and the loop is woken once when the
        last is done instead of a future, a timer and a thread switch per prompt. Fails as a whole."""
        if not prompts:
            return []
        loop = asyncio.get_running_loop()
        ids = [self.batcher.new_id() for _ in prompts]
        out: asyncio.Future[None] = loop.create_future()
        futures = self.batcher.submit_many(prompts, [params] * len(prompts), ids)
        left, lock = [len(futures)], threading.Lock()

        def one_done(_: Future[Generation]) -> None:
            with lock:
                left[0] -= 1
                last = left[0] == 0
            if last:
                _call_soon(loop, _finish_many, out, None)

        for f in futures:
            f.add_done_callback(one_done)
        timer = loop.call_later(self.timeout_s, _finish_many, out,
                                GenerationTimeout(f"{len(ids)} generations exceeded {self.timeout_s}s"))
        try:
            await out
        finally:
            timer.cancel()
            for rid, f in zip(ids, futures, strict=True):
                if not f.done():  # timed out or cancelled: nobody waits for these any more
                    self.batcher.abort(rid)
        gens = []
        for f in futures:
            exc = f.exception()
            if exc is not None:
                raise GenerationTimeout(str(exc)) if isinstance(exc, BatcherPaused) else exc
            gens.append(f.result())
        return gens

    def _expire(self, rid: str, out: asyncio.Future[Generation]) -> None:
        if not out.done():
            out.set_exception(GenerationTimeout(f"generation {rid} exceeded {self.timeout_s}s"))
            self.batcher.abort(rid)

    @contextlib.asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        """Hold generation (after the running engine call) for the duration of the block."""
        pausing = asyncio.ensure_future(asyncio.to_thread(self.batcher.pause))
        try:
            await asyncio.shield(pausing)
        except asyncio.CancelledError:
            # The pause still completes on its thread: undo it then, or the batcher stays held.
            pausing.add_done_callback(lambda f: None if f.cancelled() or f.exception() else self.batcher.resume())
            raise
        try:
            yield
        finally:
            self.batcher.resume()

    async def close(self) -> None:
        """Abort what is queued or running and stop the batcher's driver thread."""
        await asyncio.to_thread(self.batcher.close)


def _finish_many(out: asyncio.Future[None], error: BaseException | None) -> None:
    if not out.done():  # the last result and the timeout race: the first one counts
        if error is None:
            out.set_result(None)
        else:
            out.set_exception(error)


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> None:
    with contextlib.suppress(RuntimeError):  # the loop closed while its request ran: nobody waits
        loop.call_soon_threadsafe(fn, *args)


def _settle(out: asyncio.Future[Generation], done: Future[Generation]) -> None:
    if out.done():  # timed out meanwhile
        return
    exc = done.exception()
    if isinstance(exc, BatcherPaused):  # held by a weight sync for the whole timeout
        out.set_exception(GenerationTimeout(str(exc)))
    elif exc is not None:
        out.set_exception(exc)
    else:
        out.set_result(done.result())
