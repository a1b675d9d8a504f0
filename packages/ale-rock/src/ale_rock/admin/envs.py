"""EnvService and EnvHubService hosted by the Admin, on its port and behind its API keys.

Environment handles belong to the namespace that made them: another namespace's calls on a handle
get NOT_FOUND, as if it did not exist. Sandbox-backed environments (``task:…``) get their
sandboxes from this Admin through the SDK on its own port with an internal key, so they are
scheduled, limited and reaped like any other sandbox (in ``envs.sandbox_namespace``).
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ale_proto.errors import abort
from ale_proto.v1 import common_pb2, env_pb2

from ale_rock.admin.auth import Authenticator
from ale_rock.admin.config import AdminConfig
from ale_rock.admin.convert import error_to_pb
from ale_rock.admin.errors import AdminError
from ale_rock.envs.errors import EnvNotFound
from ale_rock.envs.host import EnvHost, HostLimits
from ale_rock.envs.sandbox import SandboxProvider, SdkProvider
from ale_rock.envs.server import EnvServicer


class AdminEnvServicer(EnvServicer):
    """EnvService with the Admin's authentication and per-namespace handles."""

    def __init__(self, host: EnvHost, auth: Authenticator) -> None:
        super().__init__(host)
        self.auth = auth
        self._owners: dict[str, str] = {}
        self._lock = threading.Lock()

    def _namespace(self, context: Any) -> str:
        try:
            return self.auth.namespace_of(context.invocation_metadata())
        except AdminError as e:
            abort(context, error_to_pb(e))
            raise

    def _own(self, context: Any, handle: str) -> None:
        ns = self._namespace(context)
        with self._lock:
            owner = self._owners.get(handle)
        if owner is not None and owner != ns:
            abort(context, self._not_found(handle))

    def _not_found(self, handle: str) -> common_pb2.ErrorDetail:
        """Another namespace's handle answers exactly as one that never existed (built by the same
        path as the host's own NOT_FOUND, so no field or metadata tells the two apart)."""
        return self._detail(EnvNotFound(f"unknown env handle {handle!r}", field="env_handle", env_handle=handle))

    def _prune(self) -> None:
        # Handles reclaimed by the reaper never see a Close: drop owners of dead handles now and then.
        with self._lock:
            if len(self._owners) <= 2 * self.host.limits.max_envs:
                return
            handles = list(self._owners)
        dead = []
        for h in handles:
            try:
                self.host.get(h)
            except Exception:
                dead.append(h)
        with self._lock:
            for h in dead:
                self._owners.pop(h, None)

    def Make(self, request: env_pb2.MakeRequest, context: Any) -> env_pb2.MakeResponse:
        ns = self._namespace(context)
        self._prune()
        response = super().Make(request, context)
        with self._lock:
            self._owners[response.env_handle] = ns
        return response

    def Reset(self, request: env_pb2.ResetRequest, context: Any) -> env_pb2.ResetResponse:
        self._own(context, request.env_handle)
        return super().Reset(request, context)

    def Step(self, request: env_pb2.StepRequest, context: Any) -> env_pb2.StepResponse:
        self._own(context, request.env_handle)
        return super().Step(request, context)

    def Close(self, request: env_pb2.CloseRequest, context: Any) -> env_pb2.CloseResponse:
        self._own(context, request.env_handle)
        response = super().Close(request, context)
        with self._lock:
            self._owners.pop(request.env_handle, None)
        return response

    def Batch(self, request: env_pb2.EnvServiceBatchRequest, context: Any) -> env_pb2.EnvServiceBatchResponse:
        # Authenticated once; ownership is checked per call so a foreign handle fails only its call.
        ns = self._namespace(context)
        self._prune()
        self._check_batch(request, context)
        return env_pb2.EnvServiceBatchResponse(results=self._run_batch(request.calls, lambda c: self._owned_call(ns, c)))

    def _owned_call(self, ns: str, call: env_pb2.EnvCall) -> env_pb2.EnvCallResult:
        kind = call.WhichOneof("call")
        handle = getattr(call, kind).env_handle if kind in ("reset", "step", "close") else ""
        if handle:
            with self._lock:
                owner = self._owners.get(handle)
            if owner is not None and owner != ns:
                return env_pb2.EnvCallResult(error=self._not_found(handle))
        result = self._one(call)
        with self._lock:
            if kind == "make" and result.HasField("make"):
                self._owners[result.make.env_handle] = ns
            elif kind == "close":
                self._owners.pop(handle, None)
        return result

    def ListEnvs(self, request: env_pb2.ListEnvsRequest, context: Any) -> env_pb2.ListEnvsResponse:
        self._namespace(context)
        return super().ListEnvs(request, context)


@dataclass
class SelfAddress:
    """How the Admin's own SDK client reaches it; ``port`` is filled in once the port is bound."""

    config: AdminConfig
    key: str = field(default_factory=lambda: "ale-envs-" + secrets.token_hex(24))
    port: int = 0

    def provider(self) -> SandboxProvider:
        host = self.config.host if self.config.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
        tls = self.config.tls
        if tls is not None:
            host = "localhost"  # the certificate names a host; localhost is the likeliest on it
        provider = SdkProvider(f"{host}:{self.port}", self.key, image=self.config.envs.sandbox_image)
        if tls is not None:
            from ale_rock.sdk import Client

            provider.client = Client(f"{host}:{self.port}", self.key, tls_ca=tls.cert_file)
        return provider


def make_env_host(config: AdminConfig, me: SelfAddress) -> EnvHost:
    """The EnvHost of the Admin (its reaper started)."""
    e = config.envs
    host = EnvHost(HostLimits(e.max_envs, e.max_action_bytes, e.step_timeout_s, e.episode_budget_s), me.provider)
    host.start_reaper(e.reap_interval_s)
    return host


def envhub_db_path(config: AdminConfig) -> Path:
    """Where the hosted EnvHub keeps its registry."""
    assert config.envhub is not None
    return config.envhub.db_path or config.db_path.with_name(config.db_path.name + ".envhub.db")
