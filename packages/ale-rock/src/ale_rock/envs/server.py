"""The EnvService gRPC server (gem API): ``serve_env_service(config)`` or
``python -m ale_rock.envs.server --port 50070``.

Text games and tool environments run in this process; terminal tasks run in sandboxes from the
configured :class:`~ale_rock.envs.sandbox.SandboxProvider`.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable, Sequence
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import grpc
from ale_proto import serving
from ale_proto.errors import abort, make_error
from ale_proto.serving import add_standard_services
from ale_proto.v1 import common_pb2, env_pb2, env_pb2_grpc
from pydantic import BaseModel, ConfigDict

from ale_rock.envs import catalog
from ale_rock.envs.convert import from_struct, step_to_pb, to_struct
from ale_rock.envs.errors import EnvError, InvalidAction
from ale_rock.envs.host import EnvHost, HostLimits
from ale_rock.envs.sandbox import LocalDirProvider, SandboxProvider, SdkProvider
from ale_rock.grpc_options import server_options

SERVICE_NAME = env_pb2.DESCRIPTOR.services_by_name["EnvService"].full_name


class EnvServerConfig(BaseModel):
    """Configuration of an EnvService server."""

    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    """Interface to bind."""
    port: int = 0
    """Port; 0 picks a free one (see ``EnvServer.port``)."""
    max_workers: int = 32
    """gRPC handler threads (concurrent calls, not concurrent environments)."""
    max_envs: int = 1024
    """Environments held at once; Make beyond it fails with RESOURCE_EXHAUSTED."""
    max_action_bytes: int = 65536
    """Largest action accepted by Step (INVALID_ARGUMENT beyond)."""
    max_batch_calls: int = 4096
    """Most calls one Batch request may carry (INVALID_ARGUMENT on ``calls`` beyond)."""
    batch_parallelism: int = 32
    """Environments whose calls one Batch runs side by side (1 runs every call in series)."""
    step_timeout_s: float = 300.0
    """Default per-call limit of Reset/Step (Make's step_timeout_ms overrides); a terminal step
    runs a command (and, at the end, the hidden tests), so keep it above their limits."""
    episode_budget_s: float = 3600.0
    """Default wall-clock budget of an episode (Make's episode_budget_s overrides)."""
    reap_interval_s: float = 1.0
    """How often environments past their budget are reclaimed."""
    sandbox: Literal["local", "sdk"] = "local"
    """Where terminal tasks run: ``local`` temp dirs (no isolation) or sandboxes via the SDK."""
    sdk_address: str = ""
    """Admin address for ``sandbox: sdk``."""
    sdk_api_key: str = ""
    """API key for ``sandbox: sdk``."""


def _provider_factory(cfg: EnvServerConfig) -> Any:
    def build() -> SandboxProvider:
        if cfg.sandbox == "sdk":
            return SdkProvider(cfg.sdk_address, cfg.sdk_api_key or None)
        return LocalDirProvider()

    return build


class EnvServicer(env_pb2_grpc.EnvServiceServicer):
    """gRPC edge of an :class:`EnvHost`: protobuf in, typed errors out.

    Each call has one ``_do_*`` method that raises :class:`EnvError`; the single-call RPCs abort
    with its :class:`ErrorDetail`, ``Batch`` puts the same detail in that call's result.
    """

    def __init__(self, host: EnvHost, max_batch_calls: int = 4096, batch_parallelism: int = 32) -> None:
        self.host = host
        self.max_batch_calls = max_batch_calls
        self.batch_parallelism = batch_parallelism
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def _detail(self, e: Exception) -> common_pb2.ErrorDetail:
        if isinstance(e, EnvError):
            return e.detail
        self.host.metrics["internal_errors"] += 1
        return make_error(common_pb2.ERROR_CODE_INTERNAL, f"{type(e).__name__}: {e}")

    def _fail(self, context: Any, e: Exception) -> None:
        abort(context, self._detail(e))

    # -- the calls, shared by the single RPCs and Batch ----------------------------------------
    def _do_make(self, request: env_pb2.MakeRequest) -> env_pb2.MakeResponse:
        slot = self.host.make(
            request.env_id,
            from_struct(request.kwargs),
            request.step_timeout_ms / 1000.0,
            float(request.episode_budget_s),
        )
        env = slot.env
        return env_pb2.MakeResponse(
            env_handle=slot.handle,
            sandbox_id=str(getattr(env, "sandbox_id", "") or ""),
            action_description=str(getattr(env, "action_description", "")),
            tools=[to_struct(t) for t in getattr(env, "tools", [])],
        )

    def _do_reset(self, request: env_pb2.ResetRequest) -> env_pb2.ResetResponse:
        seed = request.seed if request.HasField("seed") else None
        obs, info = self.host.reset(request.env_handle, seed)
        return env_pb2.ResetResponse(observation=obs, info=to_struct(info))

    def _do_step(self, request: env_pb2.StepRequest) -> env_pb2.StepResponse:
        return step_to_pb(*self.host.step(request.env_handle, request.action))

    def _do_close(self, request: env_pb2.CloseRequest) -> env_pb2.CloseResponse:
        try:
            self.host.get(request.env_handle)
        except EnvError:
            return env_pb2.CloseResponse()  # closing twice (or after a reclaim) is fine
        self.host.reclaim(request.env_handle)
        return env_pb2.CloseResponse()

    # -- single-call RPCs --------------------------------------------------------------------
    def Make(self, request: env_pb2.MakeRequest, context: Any) -> env_pb2.MakeResponse:
        try:
            return self._do_make(request)
        except Exception as e:
            self._fail(context, e)
            raise

    def Reset(self, request: env_pb2.ResetRequest, context: Any) -> env_pb2.ResetResponse:
        try:
            return self._do_reset(request)
        except Exception as e:
            self._fail(context, e)
            raise

    def Step(self, request: env_pb2.StepRequest, context: Any) -> env_pb2.StepResponse:
        try:
            return self._do_step(request)
        except Exception as e:
            self._fail(context, e)
            raise

    def Close(self, request: env_pb2.CloseRequest, context: Any) -> env_pb2.CloseResponse:
        return self._do_close(request)

    # -- Batch -------------------------------------------------------------------------------
    def Batch(self, request: env_pb2.EnvServiceBatchRequest, context: Any) -> env_pb2.EnvServiceBatchResponse:
        self._check_batch(request, context)
        return env_pb2.EnvServiceBatchResponse(results=self._run_batch(request.calls, self._one))

    def _run_batch(
        self, calls: Sequence[env_pb2.EnvCall], one: Callable[[env_pb2.EnvCall], env_pb2.EnvCallResult]
    ) -> list[env_pb2.EnvCallResult]:
        # Calls on one environment run in order; different environments' chains run side by side,
        # because each Reset/Step waits for a host thread and those waits would add up in series.
        chains: dict[object, list[int]] = {}
        for i, call in enumerate(calls):
            kind = call.WhichOneof("call")
            key = getattr(call, kind).env_handle if kind in ("reset", "step", "close") else i
            chains.setdefault(key, []).append(i)
        results: list[env_pb2.EnvCallResult] = [env_pb2.EnvCallResult()] * len(calls)

        def run(indices: list[int]) -> None:
            for i in indices:
                results[i] = one(calls[i])

        if len(chains) == 1 or self.batch_parallelism <= 1:
            run(list(range(len(calls))))
        else:
            with self._pool_lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self.batch_parallelism, thread_name_prefix="env-batch")
            list(self._pool.map(run, chains.values()))
        return results

    def _check_batch(self, request: env_pb2.EnvServiceBatchRequest, context: Any) -> None:
        if len(request.calls) > self.max_batch_calls:
            abort(
                context,
                make_error(
                    common_pb2.ERROR_CODE_INVALID_ARGUMENT,
                    f"{len(request.calls)} calls; the limit is {self.max_batch_calls}",
                    "calls",
                ),
            )
        self.host.metrics["batches"] += 1

    def _one(self, call: env_pb2.EnvCall) -> env_pb2.EnvCallResult:
        kind = call.WhichOneof("call")
        try:
            if kind == "make":
                return env_pb2.EnvCallResult(make=self._do_make(call.make))
            if kind == "reset":
                return env_pb2.EnvCallResult(reset=self._do_reset(call.reset))
            if kind == "step":
                return env_pb2.EnvCallResult(step=self._do_step(call.step))
            if kind == "close":
                return env_pb2.EnvCallResult(close=self._do_close(call.close))
            raise InvalidAction("the call sets none of make / reset / step / close", field="call")
        except Exception as e:
            return env_pb2.EnvCallResult(error=self._detail(e))

    def ListEnvs(self, request: env_pb2.ListEnvsRequest, context: Any) -> env_pb2.ListEnvsResponse:
        entries = catalog.list_envs(request.prefix)
        size = min(request.page.page_size or 100, 1000)
        start = int(request.page.page_token or 0)
        page = entries[start : start + size]
        nxt = str(start + size) if start + size < len(entries) else ""
        return env_pb2.ListEnvsResponse(
            envs=[
                env_pb2.EnvDescription(env_id=e.env_id, description=e.description, tags=e.tags) for e in page
            ],
            page=common_pb2.PageResponse(next_page_token=nxt, total_size=len(entries)),
        )


def add_env_service(server: grpc.Server, config: EnvServerConfig | None = None) -> EnvHost:
    """Add the EnvService to an existing server (e.g. the Admin's) and start its reaper; returns
    its host. Call :meth:`EnvHost.shutdown` when the server stops (it closes every env)."""
    cfg = config or EnvServerConfig()
    limits = HostLimits(cfg.max_envs, cfg.max_action_bytes, cfg.step_timeout_s, cfg.episode_budget_s)
    host = EnvHost(limits, _provider_factory(cfg))
    env_pb2_grpc.add_EnvServiceServicer_to_server(EnvServicer(host, cfg.max_batch_calls, cfg.batch_parallelism), server)
    host.start_reaper(cfg.reap_interval_s)
    return host


class EnvServer(serving.RunningServer):
    """A running EnvService: ``address``, ``host`` (the environments), ``stop()`` (which closes every env)."""

    def __init__(self, server: grpc.Server, host: EnvHost, port: int, bind: str) -> None:
        super().__init__(server, port, bind)
        self.host = host

    def close(self) -> None:
        self.host.shutdown()


def serve_env_service(config: EnvServerConfig | None = None) -> EnvServer:
    """Start an EnvService (with health checking and reflection) and return it running."""
    cfg = config or EnvServerConfig()
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=cfg.max_workers, thread_name_prefix="env-rpc"),
        options=server_options(extra=[("grpc.max_receive_message_length", max(4 << 20, 2 * cfg.max_action_bytes))]),
        interceptors=serving.strict_requests(),
    )
    host = add_env_service(server, cfg)
    add_standard_services(server, [SERVICE_NAME])
    port = serving.bind(server, f"{cfg.host}:{cfg.port}")
    server.start()
    return EnvServer(server, host, port, cfg.host)


def main(argv: list[str] | None = None) -> None:
    """``python -m ale_rock.envs.server``."""
    p = argparse.ArgumentParser(description="Serve ALE's EnvService (gem API).")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=50070)
    p.add_argument("--sandbox", choices=["local", "sdk"], default="local")
    p.add_argument("--sdk-address", default="")
    args = p.parse_args(argv)
    srv = serve_env_service(
        EnvServerConfig(host=args.host, port=args.port, sandbox=args.sandbox, sdk_address=args.sdk_address)
    )
    print(f"EnvService listening on {srv.address}", flush=True)
    try:
        srv.wait()
    except KeyboardInterrupt:
        srv.stop()


if __name__ == "__main__":
    main()
