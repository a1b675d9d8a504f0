"""Connections to an Admin: target, API key, TLS and timeouts from arguments or the environment.

``ALE_ROCK_ADDRESS`` (default ``127.0.0.1:7700``), ``ALE_ROCK_API_KEY``, ``ALE_ROCK_TLS_CA`` (a PEM
file; enables TLS) and ``ALE_ROCK_TIMEOUT`` (seconds, default 60).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
from ale_proto.v1 import sandbox_pb2_grpc

from ale_rock.grpc_options import channel_options
from ale_rock.sdk.errors import Unauthenticated, from_rpc_error

DEFAULT_ADDRESS = "127.0.0.1:7700"
CHANNEL_OPTIONS = channel_options(16 * 2**20)


class _Settings:
    def __init__(self, address: str | None, api_key: str | None, timeout: float | None, tls_ca: str | Path | None):
        self.address = address or os.environ.get("ALE_ROCK_ADDRESS") or DEFAULT_ADDRESS
        self.api_key = api_key if api_key is not None else os.environ.get("ALE_ROCK_API_KEY", "")
        self.timeout = float(timeout if timeout is not None else os.environ.get("ALE_ROCK_TIMEOUT", 60))
        ca = tls_ca if tls_ca is not None else os.environ.get("ALE_ROCK_TLS_CA")
        self.tls_ca = Path(ca) if ca else None
        if not self.api_key:
            raise Unauthenticated("no API key: pass api_key= or set ALE_ROCK_API_KEY")
        self.metadata = (("authorization", f"Bearer {self.api_key}"),)

    def credentials(self) -> grpc.ChannelCredentials | None:
        return grpc.ssl_channel_credentials(self.tls_ca.read_bytes()) if self.tls_ca else None


class _Connection:
    """What both clients share: settings, the channel (blocking or ``grpc.aio``) and its stub."""

    def __init__(self, grpc_module: Any, address: str | None, api_key: str | None, timeout: float | None,
                 tls_ca: str | Path | None) -> None:
        self.settings = _Settings(address, api_key, timeout, tls_ca)
        creds = self.settings.credentials()
        self._channel = (
            grpc_module.secure_channel(self.settings.address, creds, options=CHANNEL_OPTIONS)
            if creds else grpc_module.insecure_channel(self.settings.address, options=CHANNEL_OPTIONS)
        )
        self.stub = sandbox_pb2_grpc.SandboxServiceStub(self._channel)

    @property
    def address(self) -> str:
        return self.settings.address

    def _start(self, method: str, request: Any, timeout: float | None) -> Any:
        return getattr(self.stub, method)(request, timeout=timeout or self.settings.timeout,
                                          metadata=self.settings.metadata)


class Client(_Connection):
    """A blocking connection to an Admin's SandboxService. Thread-safe; share it between sandboxes."""

    def __init__(
        self, address: str | None = None, api_key: str | None = None, timeout: float | None = None,
        tls_ca: str | Path | None = None,
    ) -> None:
        super().__init__(grpc, address, api_key, timeout, tls_ca)

    def call(self, method: str, request: Any, timeout: float | None = None) -> Any:
        try:
            return self._start(method, request, timeout)
        except grpc.RpcError as e:
            raise from_rpc_error(e, self.address) from None

    def stream(self, method: str, request: Any, timeout: float | None = None) -> Iterator[Any]:
        call = self._start(method, request, timeout)
        try:
            yield from call
        except grpc.RpcError as e:
            raise from_rpc_error(e, self.address) from None
        finally:
            call.cancel()

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient(_Connection):
    """An asyncio connection to an Admin's SandboxService (create it inside the event loop)."""

    def __init__(
        self, address: str | None = None, api_key: str | None = None, timeout: float | None = None,
        tls_ca: str | Path | None = None,
    ) -> None:
        super().__init__(grpc.aio, address, api_key, timeout, tls_ca)

    async def call(self, method: str, request: Any, timeout: float | None = None) -> Any:
        try:
            return await self._start(method, request, timeout)
        except grpc.RpcError as e:
            raise from_rpc_error(e, self.address) from None

    async def stream(self, method: str, request: Any, timeout: float | None = None) -> AsyncIterator[Any]:
        call = self._start(method, request, timeout)
        try:
            async for item in call:
                yield item
        except grpc.RpcError as e:
            raise from_rpc_error(e, self.address) from None
        finally:
            call.cancel()

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
