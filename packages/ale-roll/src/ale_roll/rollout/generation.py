"""Per-episode generation calls, micro-batched onto one InferenceEngine.

Episodes ask for one completion at a time (`await generator.generate(prompt_ids, params)`), each
at its own pace. `BatchingGenerator` gathers the requests that arrive within a short window (up
to `max_batch`) into one `engine.generate` call on a worker thread — the engine may be in-process
(HF, vLLM) or the InferenceService client; both implement the `InferenceEngine` Protocol.

Weight sync pauses generation only for the sync itself: `async with generator.paused():` waits for
the running micro-batch, holds new ones back, and releases them when the new weights are in.
Every request has a timeout; a timed-out request is aborted on the engine and raises
`GenerationTimeout` (the episode is then filtered and resampled).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from ale_roll.engines.base import Generation, InferenceEngine, SamplingParams


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


@dataclass
class _Request:
    prompt: list[int]
    params: SamplingParams
    future: asyncio.Future[Generation]
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)


class BatchingGenerator:
    """Micro-batches concurrent generation requests onto one engine (see the module docstring)."""

    def __init__(self, engine: InferenceEngine, *, max_batch: int = 64, window_s: float = 0.002,
                 timeout_s: float = 60.0) -> None:
        self.engine = engine
        self.max_batch = max_batch
        self.window_s = window_s
        self.timeout_s = timeout_s
        self._queue: asyncio.Queue[_Request] | None = None
        self._engine_lock: asyncio.Lock | None = None
        self._worker: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="generate")
        self.busy_s = 0.0
        self.tokens = 0

    @property
    def policy_version(self) -> int:
        return self.engine.policy_version

    def _start(self) -> None:
        if self._worker is None or self._worker.done():
            self._queue = asyncio.Queue()
            self._engine_lock = asyncio.Lock()
            self._worker = asyncio.get_running_loop().create_task(self._dispatch(), name="generation-dispatch")

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Generation:
        self._start()
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        req = _Request(list(prompt_ids), params, loop.create_future())
        self._queue.put_nowait(req)
        # A timer per request, not wait_for + shield: those add two tasks per request on the event
        # loop, which a 256-episode step pays 256 times on one core however many torch threads run.
        timer = loop.call_later(self.timeout_s, self._expire, req)
        try:
            return await req.future
        finally:
            timer.cancel()

    def _expire(self, req: _Request) -> None:
        if not req.future.done():
            self.engine.abort(req.request_id)
            req.future.set_exception(GenerationTimeout(f"generation {req.request_id} exceeded {self.timeout_s}s"))

    async def _dispatch(self) -> None:
        assert self._queue is not None and self._engine_lock is not None
        loop = asyncio.get_running_loop()
        while True:
            first = await self._queue.get()
            batch = [first]
            deadline = loop.time() + self.window_s
            while len(batch) < self.max_batch:
                if not self._queue.empty():  # take what is queued without a wait_for per request
                    batch.append(self._queue.get_nowait())
                    continue
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    batch.append(await asyncio.wait_for(self._queue.get(), remaining))
                except asyncio.TimeoutError:
                    break
            # Requests with different sampling params go in separate engine calls.
            by_params: dict[SamplingParams, list[_Request]] = {}
            for req in batch:
                if not req.future.done():
                    by_params.setdefault(req.params, []).append(req)
            async with self._engine_lock:
                for params, reqs in by_params.items():
                    await self._run(loop, params, reqs)

    async def _run(self, loop: asyncio.AbstractEventLoop, params: SamplingParams, reqs: list[_Request]) -> None:
        t0 = time.perf_counter()
        try:
            gens = await loop.run_in_executor(
                self._executor, lambda: self.engine.generate([r.prompt for r in reqs], params, [r.request_id for r in reqs]))
        except Exception as exc:  # one failed call fails its requests, not the dispatcher
            for r in reqs:
                if not r.future.done():
                    r.future.set_exception(exc)
            return
        finally:
            self.busy_s += time.perf_counter() - t0
        for r, g in zip(reqs, gens, strict=True):
            self.tokens += len(g.token_ids)
            if not r.future.done():
                r.future.set_result(g)

    @contextlib.asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        """Hold generation (after the running micro-batch) for the duration of the block."""
        self._start()
        assert self._engine_lock is not None
        async with self._engine_lock:
            yield

    async def run_on_engine_thread(self, fn, *args):  # type: ignore[no-untyped-def]
        """Run `fn(*args)` on the generation thread (e.g. a weight load), after the running batch."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def close(self) -> None:
        """Stop the dispatcher and the worker thread."""
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._worker
        self._executor.shutdown(wait=False, cancel_futures=True)
