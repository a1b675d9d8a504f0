"""Opening and closing episodes, shared by the gRPC ModelProxyService and the HTTP admin routes
(``POST /admin/v1/episodes``, ``POST /admin/v1/episodes/<id>/close``,
``GET /admin/v1/episodes/<id>/records``; bearer ``admin_token``), so any tool can get an episode
key without a gRPC client."""

from __future__ import annotations

import functools
import secrets
from dataclasses import dataclass
from typing import Any

from ale_rock.proxy.core import ModelProxy
from ale_rock.proxy.episode_book import Episode
from ale_rock.proxy.errors import ProxyError
from ale_rock.proxy.upstreams import InferenceUpstream, OnText, OpenAIUpstream, ReplayUpstream, Upstream

KINDS = ("inference", "openai", "replay")


@dataclass(frozen=True)
class UpstreamSettings:
    """How the proxy reaches upstreams (a ModelProxyConfig's upstream fields)."""

    default_upstream: str = "inference"
    default_target: str = ""
    default_model: str = ""
    openai_api_key: str = ""
    retries: int = 4
    backoff_s: float = 0.25
    upstream_timeout_s: float = 300.0


class _Named:
    """An inference upstream shared by episodes, with the episode's model name on responses."""

    def __init__(self, inner: InferenceUpstream, model: str) -> None:
        self.inner, self.model = inner, model

    def complete(self, request: dict[str, Any], call_id: str, on_text: OnText | None = None) -> Any:
        comp = self.inner.complete(request, call_id, on_text)
        comp.model = self.model or comp.model or str(request.get("model", ""))
        return comp


class EpisodeAdmin:
    """Opens episodes (credential + upstream) and closes them."""

    def __init__(self, proxy: ModelProxy, settings: UpstreamSettings, base_url: str) -> None:
        self.proxy, self.settings, self.base_url = proxy, settings, base_url.rstrip("/")

    @functools.lru_cache(maxsize=64)  # noqa: B019 - one channel per inference target, for the server's life
    def _inference(self, target: str) -> InferenceUpstream:
        return InferenceUpstream(target, timeout_s=self.settings.upstream_timeout_s)

    def _upstream(self, kind: str, target: str, model: str) -> Upstream:
        s = self.settings
        if kind == "inference":
            return _Named(self._inference(target), model)
        if kind == "openai":
            return OpenAIUpstream(target, s.openai_api_key, model, s.retries, s.backoff_s, s.upstream_timeout_s)
        return ReplayUpstream(target)

    def open(
        self,
        episode_id: str = "",
        sandbox_id: str = "",
        kind: str = "",
        target: str = "",
        model: str = "",
        max_calls: int = 0,
    ) -> tuple[Episode, str]:
        """Open an episode; returns it and the base URL its agent uses. Raises ProxyError (400 on a
        bad argument, 409 when the id exists)."""
        episode_id = episode_id or f"ep-{secrets.token_hex(6)}"
        kind = kind or self.settings.default_upstream
        if kind not in KINDS:
            raise ProxyError(400, f"upstream must be one of {', '.join(KINDS)}", "upstream", "invalid_value")
        target = target or self.settings.default_target
        if not target:
            raise ProxyError(400, "no upstream target", "upstream_target", "missing_required_parameter")
        if max_calls < 0:
            raise ProxyError(400, "max_calls must be >= 0", "max_calls", "invalid_value")
        model = model or self.settings.default_model
        try:
            upstream = self._upstream(kind, target, model)
        except (OSError, ValueError) as e:
            raise ProxyError(400, f"bad upstream: {e}", "upstream_target", "invalid_value") from None
        try:
            ep = self.proxy.book.open(episode_id, sandbox_id, upstream, model, max_calls)
        except KeyError:
            raise ProxyError(409, f"episode {episode_id!r} exists", "episode_id", "already_exists") from None
        return ep, f"{self.base_url}/e/{ep.episode_id}/v1"

    def close(self, episode_id: str) -> Episode:
        """Close an episode (its key dies); raises a 404 ProxyError for an unknown one."""
        ep = self.proxy.book.close(episode_id)
        if ep is None:
            raise ProxyError(404, f"no episode {episode_id!r}", "episode_id", "not_found")
        return ep
