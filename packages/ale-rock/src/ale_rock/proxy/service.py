"""ModelProxyService (gRPC): open/close episodes and stream their records; plus
``serve_model_proxy(config)`` that runs the gRPC service and the HTTP endpoint together, and
``run_model_proxy(config)`` that also blocks until SIGTERM/SIGINT (the ``ale-rock proxy`` entry)."""

from __future__ import annotations

import signal
import threading
from concurrent import futures
from typing import Any, Literal

import grpc
from ale_proto import serving
from ale_proto.errors import abort, make_error
from ale_proto.serving import add_standard_services
from ale_proto.v1 import common_pb2, model_proxy_pb2, model_proxy_pb2_grpc
from pydantic import BaseModel, ConfigDict

from ale_rock.grpc_options import server_options
from ale_rock.proxy.admin import EpisodeAdmin, UpstreamSettings
from ale_rock.proxy.core import ModelProxy
from ale_rock.proxy.episode_book import EpisodeBook
from ale_rock.proxy.errors import ProxyError
from ale_rock.proxy.http import ProxyHTTPServer

SERVICE_NAME = model_proxy_pb2.DESCRIPTOR.services_by_name["ModelProxyService"].full_name
_KINDS = {
    model_proxy_pb2.UPSTREAM_KIND_INFERENCE_SERVICE: "inference",
    model_proxy_pb2.UPSTREAM_KIND_OPENAI: "openai",
    model_proxy_pb2.UPSTREAM_KIND_REPLAY: "replay",
}


class ModelProxyConfig(BaseModel):
    """Configuration of a ModelProxy (gRPC control service + OpenAI HTTP endpoint)."""

    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    """Interface both servers bind."""
    grpc_port: int = 0
    """Port of ModelProxyService; 0 picks a free one."""
    http_port: int = 0
    """Port of the OpenAI endpoint; 0 picks a free one."""
    public_base_url: str = ""
    """Base of the URL handed to agents (as their Rocklet reaches the proxy); default http://host:port."""
    default_upstream: Literal["inference", "openai", "replay"] = "inference"
    """Upstream for episodes opened with UPSTREAM_KIND_UNSPECIFIED."""
    default_target: str = ""
    """Upstream address for episodes that give none."""
    default_model: str = ""
    """Model name for episodes that give none ("" = the agent's request names it)."""
    openai_api_key: str = ""
    """Key the proxy sends to an OpenAI-compatible upstream."""
    retries: int = 4
    """Retries on 429 / 5xx / connection errors (OpenAI upstream)."""
    backoff_s: float = 0.25
    """First backoff; doubles per retry, with jitter."""
    upstream_timeout_s: float = 300.0
    """Limit of one upstream call."""
    max_body_bytes: int = 8 << 20
    """Largest request body accepted (413 beyond)."""
    require_sandbox_header: bool = False
    """Refuse calls without the Rocklet's X-Ale-Sandbox-Id header (set when agents run in sandboxes)."""
    record_dir: str = ""
    """If set, every call is also appended to <record_dir>/<episode_id>.jsonl."""
    keep_closed_episodes: int = 1000
    """Closed episodes whose records stay readable through SubscribeCalls (oldest forgotten)."""
    admin_token: str = ""
    """Bearer token of the HTTP admin routes (open/close episodes, read records); "" turns them off."""


_ERROR_CODES = {400: common_pb2.ERROR_CODE_INVALID_ARGUMENT, 404: common_pb2.ERROR_CODE_NOT_FOUND,
                409: common_pb2.ERROR_CODE_ALREADY_EXISTS}


def _abort(context: Any, e: ProxyError) -> None:
    abort(context, make_error(_ERROR_CODES.get(e.status, common_pb2.ERROR_CODE_INTERNAL), e.message,
                              e.param or ""))


def settings_of(cfg: ModelProxyConfig) -> UpstreamSettings:
    """The upstream part of a config."""
    return UpstreamSettings(cfg.default_upstream, cfg.default_target, cfg.default_model, cfg.openai_api_key,
                            cfg.retries, cfg.backoff_s, cfg.upstream_timeout_s)


class ModelProxyServicer(model_proxy_pb2_grpc.ModelProxyServiceServicer):
    """Issues per-episode credentials and streams call records."""

    def __init__(self, proxy: ModelProxy, admin: EpisodeAdmin) -> None:
        self.proxy, self.admin = proxy, admin

    def OpenEpisode(self, request: model_proxy_pb2.OpenEpisodeRequest, context: Any) -> Any:
        if not request.episode_id:
            abort(
                context,
                make_error(common_pb2.ERROR_CODE_INVALID_ARGUMENT, "episode_id is required", "episode_id"),
            )
        try:
            ep, base_url = self.admin.open(
                request.episode_id, request.sandbox_id, _KINDS.get(request.upstream, ""),
                request.upstream_target, request.model, request.max_calls,
            )
        except ProxyError as e:
            _abort(context, e)
        return model_proxy_pb2.OpenEpisodeResponse(api_key=ep.api_key, base_url=base_url)

    def CloseEpisode(self, request: model_proxy_pb2.CloseEpisodeRequest, context: Any) -> Any:
        try:
            ep = self.admin.close(request.episode_id)
        except ProxyError as e:
            _abort(context, e)
        return model_proxy_pb2.CloseEpisodeResponse(calls=len(ep.records))

    def SubscribeCalls(self, request: model_proxy_pb2.SubscribeCallsRequest, context: Any) -> Any:
        if self.proxy.book.get(request.episode_id) is None:
            abort(
                context,
                make_error(
                    common_pb2.ERROR_CODE_NOT_FOUND, f"no episode {request.episode_id!r}", "episode_id"
                ),
            )
        for rec in self.proxy.book.follow(request.episode_id, request.from_index, context.is_active):
            yield model_proxy_pb2.SubscribeCallsResponse(call=rec.to_pb())


class ModelProxyServer:
    """A running ModelProxy: ``grpc_address``, ``http_url``, ``proxy``, ``stop()``."""

    def __init__(
        self,
        grpc_server: grpc.Server,
        http: ProxyHTTPServer,
        proxy: ModelProxy,
        grpc_address: str,
        http_url: str,
    ) -> None:
        self.grpc_server, self.http, self.proxy = grpc_server, http, proxy
        self.grpc_address, self.http_url = grpc_address, http_url

    def stop(self, grace: float = 1.0) -> None:
        """Stop both servers."""
        self.http.shutdown()
        self.http.server_close()
        self.grpc_server.stop(grace).wait(grace + 1)


def serve_model_proxy(config: ModelProxyConfig | None = None) -> ModelProxyServer:
    """Start the ModelProxy (gRPC service with health + reflection, and the HTTP endpoint)."""
    cfg = config or ModelProxyConfig()
    proxy = ModelProxy(EpisodeBook(cfg.keep_closed_episodes), cfg.record_dir)
    http = serving.construct_listener(f"{cfg.host}:{cfg.http_port}", ProxyHTTPServer, (cfg.host, cfg.http_port), proxy, cfg.max_body_bytes, cfg.require_sandbox_header)
    http_url = f"http://{cfg.host}:{http.server_address[1]}"
    admin = EpisodeAdmin(proxy, settings_of(cfg), cfg.public_base_url or http_url)
    http.admin, http.admin_token = admin, cfg.admin_token
    http.start()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="proxy-rpc"), options=server_options(), interceptors=serving.strict_requests())
    model_proxy_pb2_grpc.add_ModelProxyServiceServicer_to_server(
        ModelProxyServicer(proxy, admin), server
    )
    add_standard_services(server, [SERVICE_NAME])
    port = serving.bind(server, f"{cfg.host}:{cfg.grpc_port}")
    server.start()
    return ModelProxyServer(server, http, proxy, f"{cfg.host}:{port}", http_url)


def run_model_proxy(config: ModelProxyConfig) -> int:
    """Serve until SIGTERM or SIGINT, then stop both servers. Prints the bound addresses first."""
    srv = serve_model_proxy(config)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    upstream = f"{config.default_upstream} {config.default_target}" if config.default_target else "per episode"
    print(f"ale-rock proxy listening on grpc {srv.grpc_address} http {srv.http_url} (upstream: {upstream})",
          flush=True)
    done.wait()
    srv.stop()
    return 0
