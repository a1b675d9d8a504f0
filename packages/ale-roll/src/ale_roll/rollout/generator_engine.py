"""The rollout's BatchingGenerator as an InferenceEngine, to serve it as the InferenceService.

In agent-native mode the model calls arrive on the InferenceService's gRPC threads (agent →
ModelProxy → InferenceService). Serving the raw engine there would bypass the rollout's
generator: no micro-batching across episodes and, worse, no pause during weight sync (a weight
load racing a generation). ``GeneratorEngine`` hands every request to the generator on the
controller's event loop instead, so agent-native and GEM-mode generations share one batcher,
one timeout and one ``generator.paused()`` window::

    servicer = InferenceServicer(GeneratorEngine(generator, asyncio.get_running_loop()), tokenizer)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Sequence
from typing import Any

from ale_roll.engines.base import Generation, SamplingParams, WeightSource, WeightUpdate
from ale_roll.rollout.generation import BatchingGenerator, GenerationTimeout


class GeneratorEngine:
    """InferenceEngine whose ``generate`` runs on ``loop`` through ``generator`` (thread-safe)."""

    def __init__(self, generator: BatchingGenerator, loop: asyncio.AbstractEventLoop, timeout_s: float | None = None) -> None:
        self.generator, self.loop = generator, loop
        self.timeout_s = timeout_s if timeout_s is not None else generator.timeout_s + 5.0
        """Wait for one result from the loop; the generator's own timeout (which aborts) comes first."""

    @property
    def policy_version(self) -> int:
        return self.generator.policy_version

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
                 request_ids: Sequence[str] | None = None) -> list[Generation]:
        if self.loop.is_closed():
            raise RuntimeError("the rollout's event loop is closed")
        futures = [asyncio.run_coroutine_threadsafe(self.generator.generate(list(p), params), self.loop) for p in prompts]
        out = []
        try:
            for i, fut in enumerate(futures):
                gen = fut.result(self.timeout_s)
                if request_ids:
                    gen.request_id = request_ids[i]
                out.append(gen)
        except concurrent.futures.TimeoutError:
            raise GenerationTimeout(f"no generation from the rollout loop within {self.timeout_s}s") from None
        finally:
            for fut in futures:
                fut.cancel()
        return out

    def abort(self, request_id: str) -> bool:
        """Not mapped: a request here is bounded by the generator's timeout, which aborts on the engine."""
        return False

    @property
    def max_model_len(self) -> int:
        """0: nothing is checked in front of the rollout's generator (the episodes' max_tokens bound it)."""
        return 0

    def close(self) -> None:
        """Nothing of its own: the generator and its engine belong to the controller, which closes them."""

    def update_weights(self, weights: WeightSource, version: int) -> WeightUpdate:
        """Load weights into the generator's engine, inside ``generator.paused()`` (nothing generates meanwhile)."""

        async def paused_update() -> Any:
            async with self.generator.paused():
                return await self.generator.run_on_engine_thread(self.generator.engine.update_weights, weights, version)

        update: WeightUpdate = asyncio.run_coroutine_threadsafe(paused_update(), self.loop).result()
        return update
