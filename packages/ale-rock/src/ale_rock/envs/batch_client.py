"""A micro-batching EnvService client for RL rollouts with hundreds of concurrent episodes.

Coroutines call ``await client.make(...) / reset / step / close``; calls that arrive within a short
window (``window_ms``, at most ``max_batch`` of them) leave as one ``EnvService.Batch`` RPC, and
each caller gets its own result or its own typed :class:`~ale_rock.envs.errors.EnvError`.
:class:`BatchedRemoteEnv` wraps one environment with async ``areset`` / ``astep`` / ``aclose``
(batched) and gem's sync ``reset`` / ``step`` / ``close`` (one unary RPC each), returning the same
values as :class:`~ale_rock.envs.client.RemoteEnv`.

Two transports: ``thread`` sends each batch with a blocking stub on a small thread pool (one
channel, usable from any event loop); ``aio`` uses a ``grpc.aio`` channel per event loop.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

import grpc
from ale_proto.errors import error_from_detail
from ale_proto.v1 import env_pb2, env_pb2_grpc
from pydantic import BaseModel, ConfigDict

from ale_rock.envs.client import _CHANNEL_OPTIONS, _make_request, typed_error
from ale_rock.envs.convert import from_struct, step_from_pb
from ale_rock.envs.core import StepResult
from ale_rock.envs.errors import EnvError


class BatchClientConfig(BaseModel):
    """Configuration of a :class:`BatchEnvClient`."""

    model_config = ConfigDict(extra="forbid")

    address: str
    """host:port of the EnvService."""
    window_ms: float = 1.0
    """How long the first call of a batch waits for others to join it."""
    max_batch: int = 128
    """Most calls in one Batch RPC; a full batch leaves at once (smaller batches let the server
    work on one while the client decodes another)."""
    max_in_flight: int = 4
    """Batch RPCs outstanding at once (threads of the ``thread`` transport)."""
    rpc_timeout_s: float = 120.0
    """Deadline of every RPC (a batch's calls all fail with DEADLINE_EXCEEDED past it)."""
    transport: Literal["thread", "aio"] = "thread"
    """``thread``: blocking stub on a thread pool; ``aio``: a grpc.aio channel per event loop."""
    api_key: str = ""
    """Bearer key for an Admin-hosted EnvService (a standalone one ignores it)."""


@dataclass
class MadeEnv:
    """What Make returned for one environment."""

    handle: str
    sandbox_id: str
    action_description: str
    tools: list[dict[str, Any]]


@dataclass
class _Lane:
    """The pending calls of one event loop."""

    loop: asyncio.AbstractEventLoop
    pending: list[tuple[env_pb2.EnvCall, asyncio.Future[Any]]] = field(default_factory=list)
    timer: asyncio.TimerHandle | None = None
    sending: set[asyncio.Task[None]] = field(default_factory=set)
    stub: Any = None
    channel: grpc.aio.Channel | None = None
    slots: asyncio.Semaphore | None = None


def _result_of(kind: str, result: env_pb2.EnvCallResult) -> Any:
    which = result.WhichOneof("result")
    if which == "error":
        raise error_from_detail(result.error)
    if which != kind:
        raise EnvError(f"the server answered a {kind} call with {which!r}")
    return getattr(result, kind)


class BatchEnvClient:
    """Many environments' calls over ``EnvService.Batch``; see the module docstring."""

    def __init__(self, address: str = "", *, config: BatchClientConfig | None = None, **overrides: Any) -> None:
        if config is None:
            config = BatchClientConfig(address=address, **overrides)
        self.config = config
        self._metadata = (("authorization", f"Bearer {config.api_key}"),) if config.api_key else None
        self._lane: _Lane | None = None
        self._lock = threading.Lock()
        self._channel: grpc.Channel | None = None
        self._stub: Any = None
        self._pool: ThreadPoolExecutor | None = None
        self.batches = 0
        """Batch RPCs sent (for tests and metrics)."""

    # -- public calls --------------------------------------------------------------------------
    async def make(
        self, env_id: str, kwargs: dict[str, Any] | None = None, *, step_timeout_s: float = 0,
        episode_budget_s: float = 0,
    ) -> MadeEnv:
        """Make an environment."""
        req = _make_request(env_id, kwargs or {}, step_timeout_s, episode_budget_s)
        return made_from_pb(await self._call("make", env_pb2.EnvCall(make=req)))

    async def reset(self, handle: str, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode: ``(observation, info)``."""
        resp = await self._call("reset", env_pb2.EnvCall(reset=env_pb2.ResetRequest(env_handle=handle, seed=seed)))
        return resp.observation, from_struct(resp.info)

    async def step(self, handle: str, action: str) -> StepResult:
        """Apply one action: ``(observation, reward, terminated, truncated, info)``."""
        resp = await self._call("step", env_pb2.EnvCall(step=env_pb2.StepRequest(env_handle=handle, action=action)))
        return step_from_pb(resp)

    async def close(self, handle: str) -> None:
        """Close an environment (closing twice is fine)."""
        await self._call("close", env_pb2.EnvCall(close=env_pb2.CloseRequest(env_handle=handle)))

    def env(self, env_id: str, *, step_timeout_s: float = 0, episode_budget_s: float = 0,
            **kwargs: Any) -> BatchedRemoteEnv:
        """An environment made on first use (``areset`` or ``reset``)."""
        return BatchedRemoteEnv(self, env_id, step_timeout_s, episode_budget_s, kwargs)

    # -- unary calls for the sync env API ---------------------------------------------------------
    def unary(self, method: str, request: Any) -> Any:
        """One unary EnvService call on the shared blocking channel; raises typed errors."""
        try:
            return getattr(self._sync_stub(), method)(
                request, timeout=self.config.rpc_timeout_s, metadata=self._metadata
            )
        except grpc.RpcError as e:
            raise typed_error(e) from None

    def _sync_stub(self) -> Any:
        with self._lock:
            if self._stub is None:
                self._channel = grpc.insecure_channel(self.config.address, options=_CHANNEL_OPTIONS)
                self._stub = env_pb2_grpc.EnvServiceStub(self._channel)
            return self._stub

    # -- batching -----------------------------------------------------------------------------
    def _current_lane(self) -> _Lane:
        loop = asyncio.get_running_loop()
        lane = self._lane
        if lane is None or lane.loop is not loop:  # a new event loop (e.g. a second asyncio.run)
            lane = self._lane = _Lane(loop)
            lane.slots = asyncio.Semaphore(self.config.max_in_flight)
        return lane

    async def _call(self, kind: str, call: env_pb2.EnvCall) -> Any:
        lane = self._current_lane()
        fut: asyncio.Future[Any] = lane.loop.create_future()
        lane.pending.append((call, fut))
        if len(lane.pending) >= self.config.max_batch:
            self._flush(lane)
        elif lane.timer is None:
            lane.timer = lane.loop.call_later(self.config.window_ms / 1000.0, self._flush, lane)
        return _result_of(kind, await fut)

    def _flush(self, lane: _Lane) -> None:
        if lane.timer is not None:
            lane.timer.cancel()
            lane.timer = None
        calls, lane.pending = lane.pending, []
        if calls:
            task = lane.loop.create_task(self._send(lane, calls))
            lane.sending.add(task)
            task.add_done_callback(lane.sending.discard)

    async def _send(self, lane: _Lane, calls: list[tuple[env_pb2.EnvCall, asyncio.Future[Any]]]) -> None:
        request = env_pb2.EnvServiceBatchRequest(calls=[c for c, _ in calls])
        assert lane.slots is not None
        try:
            async with lane.slots:
                self.batches += 1
                response = await self._batch_rpc(lane, request)
        except grpc.RpcError as e:
            for _, fut in calls:  # the whole RPC failed: every call fails with its (own) typed error
                if not fut.done():
                    fut.set_exception(typed_error(e))
            return
        except BaseException as e:
            for _, fut in calls:
                if not fut.done():
                    fut.set_exception(EnvError(f"batch failed: {type(e).__name__}: {e}"))
            raise
        if len(response.results) != len(calls):
            for _, fut in calls:
                if not fut.done():
                    fut.set_exception(EnvError(f"{len(response.results)} results for {len(calls)} calls"))
            return
        for (_, fut), result in zip(calls, response.results):
            if not fut.done():  # the caller may have given up (timeout, cancellation)
                fut.set_result(result)

    async def _batch_rpc(self, lane: _Lane, request: env_pb2.EnvServiceBatchRequest) -> Any:
        timeout = self.config.rpc_timeout_s
        if self.config.transport == "aio":
            if lane.stub is None:
                lane.channel = grpc.aio.insecure_channel(self.config.address, options=_CHANNEL_OPTIONS)
                lane.stub = env_pb2_grpc.EnvServiceStub(lane.channel)
            return await lane.stub.Batch(request, timeout=timeout, metadata=self._metadata)
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.config.max_in_flight, thread_name_prefix="env-batch")
            pool = self._pool
        stub = self._sync_stub()
        rpc = functools.partial(stub.Batch, request, timeout=timeout, metadata=self._metadata)
        return await lane.loop.run_in_executor(pool, rpc)

    async def aclose(self) -> None:
        """Close the channels (the environments are left to their owners' ``aclose``)."""
        lane, self._lane = self._lane, None
        if lane is not None and lane.channel is not None and lane.loop is asyncio.get_running_loop():
            await lane.channel.close()
        self.close_channels()

    def close_channels(self) -> None:
        """Close the blocking channel and the thread pool."""
        with self._lock:
            if self._channel is not None:
                self._channel.close()
            if self._pool is not None:
                self._pool.shutdown(wait=False)
            self._channel = self._stub = self._pool = None


def made_from_pb(resp: env_pb2.MakeResponse) -> MadeEnv:
    """A :class:`MadeEnv` from a MakeResponse."""
    return MadeEnv(resp.env_handle, resp.sandbox_id, resp.action_description, [from_struct(t) for t in resp.tools])


class BatchedRemoteEnv:
    """One environment behind a :class:`BatchEnvClient`, made on first use.

    ``areset`` / ``astep`` / ``aclose`` ride on the client's batches; ``reset`` / ``step`` /
    ``close`` are one unary RPC each (for callers without an event loop). Both raise the typed
    :mod:`ale_rock.envs.errors` classes, like :class:`~ale_rock.envs.client.RemoteEnv`.
    """

    def __init__(self, client: BatchEnvClient, env_id: str, step_timeout_s: float = 0,
                 episode_budget_s: float = 0, kwargs: dict[str, Any] | None = None) -> None:
        self.client = client
        self.env_id = env_id
        self._request = _make_request(env_id, kwargs or {}, step_timeout_s, episode_budget_s)
        self.handle = ""
        self.sandbox_id = ""
        self.action_description = ""
        self.tools: list[dict[str, Any]] = []
        self._closed = False

    def _made(self, made: MadeEnv) -> None:
        self.handle, self.sandbox_id = made.handle, made.sandbox_id
        self.action_description, self.tools = made.action_description, made.tools

    def _reset_done(self, obs: str, info: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self.sandbox_id = str(info.get("sandbox_id", self.sandbox_id))
        return obs, info

    # -- async (batched) ----------------------------------------------------------------------
    async def amake(self) -> BatchedRemoteEnv:
        """Make the environment on the server (a no-op once made)."""
        if not self.handle:
            resp = await self.client._call("make", env_pb2.EnvCall(make=self._request))
            self._made(made_from_pb(resp))
        return self

    async def areset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode: ``(observation, info)``."""
        await self.amake()
        return self._reset_done(*await self.client.reset(self.handle, seed))

    async def astep(self, action: str) -> StepResult:
        """Apply one action: ``(observation, reward, terminated, truncated, info)``."""
        return await self.client.step(self.handle, action)

    async def aclose(self) -> None:
        """Close the environment on the server (idempotent; a lost server is ignored, its reaper
        reclaims the env)."""
        if self._closed or not self.handle:
            self._closed = True
            return
        self._closed = True
        try:
            await self.client.close(self.handle)
        except EnvError:
            pass

    # -- sync (one unary RPC each) --------------------------------------------------------------
    def make(self) -> BatchedRemoteEnv:
        """Make the environment on the server (a no-op once made)."""
        if not self.handle:
            self._made(made_from_pb(self.client.unary("Make", self._request)))
        return self

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode: ``(observation, info)``."""
        self.make()
        resp = self.client.unary("Reset", env_pb2.ResetRequest(env_handle=self.handle, seed=seed))
        return self._reset_done(resp.observation, from_struct(resp.info))

    def step(self, action: str) -> StepResult:
        """Apply one action: ``(observation, reward, terminated, truncated, info)``."""
        return step_from_pb(self.client.unary("Step", env_pb2.StepRequest(env_handle=self.handle, action=action)))

    def close(self) -> None:
        """Close the environment on the server (idempotent)."""
        if self._closed or not self.handle:
            self._closed = True
            return
        self._closed = True
        try:
            self.client.unary("Close", env_pb2.CloseRequest(env_handle=self.handle))
        except EnvError:
            pass

    @property
    def unwrapped(self) -> BatchedRemoteEnv:
        return self
