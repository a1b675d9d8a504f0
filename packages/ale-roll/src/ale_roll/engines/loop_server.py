"""A ``grpc.aio`` server run by an event loop on its own thread, for owners that are synchronous
(the CLI, the trainer, tests): they start it, read its port and stop it without a loop of their own."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc
from ale_proto import serving


class LoopServer:
    """A started ``grpc.aio`` server on ``address``: ``register(server)`` adds its services before
    it starts (undecodable requests get INVALID_ARGUMENT, as on every ALE server). :attr:`port` is
    the bound port."""

    def __init__(self, register: Callable[[Any], None], address: str, *, name: str = "grpc-loop",
                 max_message_bytes: int = 64 << 20) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()
        self._stopped = threading.Event()
        start = self._start(register, address, name, max_message_bytes)
        try:
            started = asyncio.run_coroutine_threadsafe(start, self.loop).result(60)
            if isinstance(started, BaseException):
                raise started
            self.server, self.port = started
        except BaseException:
            self._close_loop()
            raise

    async def _start(self, register: Callable[[Any], None], address: str, name: str,
                     max_message_bytes: int) -> tuple[Any, int] | SystemExit:
        # Synchronous servicers (health checking's) run on this small pool; the rest on the loop.
        server = grpc.aio.server(futures.ThreadPoolExecutor(2, thread_name_prefix=f"{name}-sync"),
                                 options=[("grpc.max_receive_message_length", max_message_bytes),
                                          ("grpc.max_send_message_length", max_message_bytes), serving.NO_REUSEPORT],
                                 interceptors=serving.strict_requests_aio())
        register(server)
        try:
            port = serving.bind(server, address)
        except SystemExit as e:  # PortInUse: raised on the loop it would end the loop's thread
            return e
        await server.start()
        return server, port

    def stop(self, grace: float | None = None) -> threading.Event:
        """Stop serving (calls in flight get ``grace`` seconds; None cancels them at once) and end
        the loop's thread. Returns an already-set event (as ``grpc.Server.stop`` returns one)."""
        if not self._stopped.is_set():
            with contextlib.suppress(Exception):  # a loop that is already gone has nothing to stop
                asyncio.run_coroutine_threadsafe(self.server.stop(grace), self.loop).result((grace or 0) + 10)
            self._close_loop()
            self._stopped.set()
        return self._stopped

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        """Block until :meth:`stop` ran (or ``timeout``); True when stopped."""
        return self._stopped.wait(timeout)

    def _close_loop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self.loop.close()
