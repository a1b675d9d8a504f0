"""EnvService clients: :class:`RemoteEnv` behaves as a gem environment; :class:`AsyncVectorEnvClient`
drives hundreds of environments at once over one asyncio channel."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import grpc
from ale_proto.errors import DeadlineExceeded, Unavailable, error_from_rpc, has_error_detail
from ale_proto.v1 import env_pb2, env_pb2_grpc

from ale_rock.envs.convert import from_struct, step_from_pb, to_struct
from ale_rock.envs.core import StepResult
from ale_rock.envs.errors import EnvDeadlineExceeded, EnvError, EnvUnavailable
from ale_rock.grpc_options import channel_options

_CHANNEL_OPTIONS = channel_options(
    16 << 20,
    # A restarted env host (a worker back after a crash) is found again within ~2 s,
    # not after gRPC's default reconnect backoff of up to two minutes.
    extra=[("grpc.initial_reconnect_backoff_ms", 200), ("grpc.min_reconnect_backoff_ms", 200),
           ("grpc.max_reconnect_backoff_ms", 2000)],
)


def typed_error(err: grpc.RpcError) -> EnvError:
    """The :class:`EnvError` subclass a failed call stands for."""
    error = error_from_rpc(err)
    if not has_error_detail(err):  # the transport's own failure (deadline, connection): an env's
        finer = {DeadlineExceeded: EnvDeadlineExceeded, Unavailable: EnvUnavailable}.get(type(error))
        if finer is not None:
            return finer(error.message, error.field, error.metadata)
    return error


def _make_request(
    env_id: str, kwargs: dict[str, Any], step_timeout_s: float, budget_s: float
) -> env_pb2.MakeRequest:
    return env_pb2.MakeRequest(
        env_id=env_id,
        kwargs=to_struct(kwargs),
        step_timeout_ms=int(step_timeout_s * 1000),
        episode_budget_s=int(budget_s),
    )


class RemoteEnv:
    """An environment living in an EnvService, with gem's API (reset / step / close).

    Errors are raised as the typed :mod:`ale_rock.envs.errors` classes, e.g. ``SandboxLost`` when
    the sandbox died (resample the episode) or ``EpisodeNotActive`` after the end.
    """

    def __init__(
        self,
        env_id: str,
        address: str,
        *,
        step_timeout_s: float = 0,
        episode_budget_s: float = 0,
        rpc_timeout_s: float = 120.0,
        channel: grpc.Channel | None = None,
        api_key: str = "",
        **kwargs: Any,
    ) -> None:
        self.env_id = env_id
        # The Admin-hosted EnvService authenticates like SandboxService (a standalone one ignores it).
        self._metadata = (("authorization", f"Bearer {api_key}"),) if api_key else None
        self._own_channel = channel is None
        self._channel = channel or grpc.insecure_channel(address, options=_CHANNEL_OPTIONS)
        self._stub = env_pb2_grpc.EnvServiceStub(self._channel)
        self._timeout = rpc_timeout_s
        resp = self._call(self._stub.Make, _make_request(env_id, kwargs, step_timeout_s, episode_budget_s))
        self.handle: str = resp.env_handle
        self.sandbox_id: str = resp.sandbox_id
        self.action_description: str = resp.action_description
        self.tools: list[dict[str, Any]] = [from_struct(t) for t in resp.tools]
        self._closed = False

    def _call(self, method: Any, request: Any) -> Any:
        try:
            return method(request, timeout=self._timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise typed_error(e) from None

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode."""
        req = env_pb2.ResetRequest(env_handle=self.handle, seed=seed)
        resp = self._call(self._stub.Reset, req)
        info = from_struct(resp.info)
        self.sandbox_id = str(info.get("sandbox_id", self.sandbox_id))
        return resp.observation, info

    def step(self, action: str) -> StepResult:
        """Apply one action: ``(observation, reward, terminated, truncated, info)``."""
        return step_from_pb(
            self._call(self._stub.Step, env_pb2.StepRequest(env_handle=self.handle, action=action))
        )

    def close(self) -> None:
        """Close the environment on the server (idempotent) and the channel if we opened it."""
        if self._closed:
            return
        self._closed = True
        try:
            self._stub.Close(env_pb2.CloseRequest(env_handle=self.handle), timeout=self._timeout, metadata=self._metadata)
        except grpc.RpcError:
            pass  # the server may be gone; its reaper reclaims the env
        if self._own_channel:
            self._channel.close()

    @property
    def unwrapped(self) -> RemoteEnv:
        return self

    def __enter__(self) -> RemoteEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # best effort: a forgotten env should not hold a sandbox
        try:
            if not getattr(self, "_closed", True):
                self.close()
        except Exception:
            pass


def list_remote_envs(address: str, prefix: str = "") -> list[dict[str, Any]]:
    """Every environment id the service at ``address`` accepts (follows pagination)."""
    with grpc.insecure_channel(address, options=channel_options()) as ch:
        stub = env_pb2_grpc.EnvServiceStub(ch)
        out: list[dict[str, Any]] = []
        token = ""
        while True:
            req = env_pb2.ListEnvsRequest(prefix=prefix)
            req.page.page_size, req.page.page_token = 1000, token
            resp = stub.ListEnvs(req, timeout=30)
            out += [
                {"env_id": e.env_id, "description": e.description, "tags": dict(e.tags)} for e in resp.envs
            ]
            token = resp.page.next_page_token
            if not token:
                return out


class AsyncVectorEnvClient:
    """Many environments over one asyncio channel; calls to different envs run concurrently.

    ``await make()``, then ``await reset(seeds)`` and ``await step(actions)`` return one entry per
    env. An action of ``None`` leaves that env alone (its entry is ``None``). Per-env errors are
    returned in place (as the typed exception) when ``return_exceptions`` is set, else raised.
    """

    def __init__(
        self,
        env_ids: Sequence[str],
        address: str,
        *,
        kwargs: Sequence[dict[str, Any]] | None = None,
        step_timeout_s: float = 0,
        episode_budget_s: float = 0,
        rpc_timeout_s: float = 120.0,
        return_exceptions: bool = False,
    ) -> None:
        self.env_ids = list(env_ids)
        self.address = address
        self._kwargs = list(kwargs) if kwargs is not None else [{} for _ in self.env_ids]
        self._limits = (step_timeout_s, episode_budget_s)
        self._timeout = rpc_timeout_s
        self._return_exceptions = return_exceptions
        self._channel: grpc.aio.Channel | None = None
        self._stub: Any = None
        self.handles: list[str] = []

    @property
    def num_envs(self) -> int:
        return len(self.env_ids)

    async def _call(self, method: str, request: Any) -> Any:
        try:
            return await getattr(self._stub, method)(request, timeout=self._timeout)
        except grpc.RpcError as e:
            raise typed_error(e) from None

    async def _gather(self, coros: list[Any]) -> list[Any]:
        return await asyncio.gather(*coros, return_exceptions=self._return_exceptions)

    async def make(self) -> AsyncVectorEnvClient:
        """Make every environment."""
        self._channel = grpc.aio.insecure_channel(self.address, options=_CHANNEL_OPTIONS)
        self._stub = env_pb2_grpc.EnvServiceStub(self._channel)
        reqs = [_make_request(e, k, *self._limits) for e, k in zip(self.env_ids, self._kwargs)]
        resps = await asyncio.gather(*(self._call("Make", r) for r in reqs), return_exceptions=True)
        errors = [r for r in resps if isinstance(r, BaseException)]
        self.handles = [r.env_handle if not isinstance(r, BaseException) else "" for r in resps]
        if errors:
            await self.close()
            raise errors[0]
        return self

    async def _reset_one(self, handle: str, seed: int | None) -> tuple[str, dict[str, Any]]:
        resp = await self._call("Reset", env_pb2.ResetRequest(env_handle=handle, seed=seed))
        return resp.observation, from_struct(resp.info)

    async def _step_one(self, handle: str, action: str) -> StepResult:
        return step_from_pb(await self._call("Step", env_pb2.StepRequest(env_handle=handle, action=action)))

    async def reset(self, seeds: Sequence[int | None] | None = None) -> list[Any]:
        """Reset every env; ``seeds`` per env (None entries mean random)."""
        seeds = list(seeds) if seeds is not None else [None] * self.num_envs
        return await self._gather([self._reset_one(h, s) for h, s in zip(self.handles, seeds)])

    async def step(self, actions: Sequence[str | None]) -> list[Any]:
        """Step the envs whose action is not None."""

        async def none() -> None:
            return None

        return await self._gather(
            [self._step_one(h, a) if a is not None else none() for h, a in zip(self.handles, actions)]
        )

    async def close(self) -> None:
        """Close every environment and the channel."""
        if self._stub is not None:
            await asyncio.gather(
                *(
                    self._stub.Close(env_pb2.CloseRequest(env_handle=h), timeout=self._timeout)
                    for h in self.handles
                    if h
                ),
                return_exceptions=True,
            )
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    async def __aenter__(self) -> AsyncVectorEnvClient:
        return await self.make()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
