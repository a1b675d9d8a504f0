"""One thread for a process's torch work on CPU, so that a second torch thread helps.

torch's CPU ops parallelise with OpenMP (libgomp), and libgomp keeps one team of worker threads
per *calling* thread. The trainer used to call torch from three threads: the model load on the
main thread, generation on the batcher's driver thread and the train step on an executor thread.
With ``torch_threads: 2`` on 2 CPUs that is three teams, and once libgomp manages more threads than
there are CPUs it stops letting idle workers spin (its "throttled" spin count is ~100 iterations):
every parallel region then wakes its worker through the kernel. On the 2-core bench machine the
same generate + train step took 23 ms on the only team and 55 ms once a second team existed, and
2 torch threads were 1.3–1.6× *slower* than 1. With every torch call on one thread there is one
team, and 2 threads vs 1 is ~0.9 as in TRL (which runs everything on the main thread).

:func:`compute` returns the process's :class:`ComputeThread`; ``configure(enabled=...)`` switches
it (``ale_roll.trainer.setup.configure_compute``: on for a CPU run with more than one torch thread;
off on a GPU, where CPU threads hardly matter and generation must overlap training, and with one
torch thread, where there is no team to share and an async run's generation and training overlap
on separate cores). When off, :meth:`ComputeThread.run` calls the function on the caller's thread
and :meth:`ComputeThread.arun` on a worker thread, as before. Unconfigured, it is on when no CUDA
device is visible.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def _cuda_visible() -> bool:
    import torch

    return bool(torch.cuda.is_available())


class ComputeThread:
    """A single worker thread that runs torch work (generation, train steps, weight pushes, saves)."""

    def __init__(self, enabled: bool | None = None) -> None:
        self._enabled = enabled
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._ident: int | None = None

    @property
    def enabled(self) -> bool:
        """Whether work is sent to the thread (default: when no CUDA device is visible)."""
        if self._enabled is None:
            self._enabled = not _cuda_visible()
        return self._enabled

    def configure(self, *, enabled: bool | None = None, threads: int = 0) -> None:
        """``enabled`` None keeps the default (on without CUDA); ``threads`` > 0 sets torch's intra-op
        threads where the work runs (on the thread when enabled, else on the caller's)."""
        if enabled is not None:
            self._enabled = enabled
        if threads > 0:
            import torch

            self.run(torch.set_num_threads, threads)

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="ale-torch")
                self._executor.submit(self._mark).result()
            return self._executor

    def _mark(self) -> None:
        self._ident = threading.get_ident()

    def on_thread(self) -> bool:
        """True on the compute thread itself (a call from there runs inline: no self-deadlock)."""
        return self._ident is not None and threading.get_ident() == self._ident

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Run ``fn`` there (or now, inline, when off or already there); its future."""
        if not self.enabled or self.on_thread():
            f: Future[T] = Future()
            try:
                f.set_result(fn(*args, **kwargs))
            except BaseException as e:  # noqa: BLE001 - handed to the caller through the future
                f.set_exception(e)
            return f
        return self._pool().submit(fn, *args, **kwargs)

    def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` there and wait for its result (exceptions propagate)."""
        return self.submit(fn, *args, **kwargs).result()

    async def arun(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Await ``fn`` run there; when off, on a worker thread (``asyncio.to_thread``) as before."""
        if not self.enabled:
            return await asyncio.to_thread(fn, *args, **kwargs)
        return await asyncio.wrap_future(self.submit(fn, *args, **kwargs))


_COMPUTE = ComputeThread()


def compute() -> ComputeThread:
    """The process's compute thread."""
    return _COMPUTE
