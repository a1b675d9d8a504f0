"""Errors the ModelProxy answers with, shaped as OpenAI's: ``{"error": {"message", "type", "param",
"code"}}``. A client mistake is a 4xx naming the offending ``param``; an upstream failure a 5xx."""

from __future__ import annotations

from typing import Any

_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    429: "rate_limit_error",
}


class ProxyError(Exception):
    """A call the proxy answers with an HTTP error. ``param`` names the request field at fault
    (``messages[2].content``), ``code`` is a short machine-readable reason. Server side; a client
    of the proxy's gRPC control service gets ``ale_rock.sdk.model_proxy.ModelProxyClientError``."""

    def __init__(
        self, status: int, message: str, param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code

    @property
    def kind(self) -> str:
        """OpenAI's error ``type``."""
        if self.status >= 500:
            return "server_error"
        return _TYPES.get(self.status, "invalid_request_error")

    def body(self) -> dict[str, Any]:
        """The JSON body of the HTTP error."""
        return {
            "error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}
        }


class UpstreamError(ProxyError):
    """The upstream failed or refused; ``status`` is the HTTP status the agent gets."""


def invalid(param: str, message: str, code: str = "invalid_value") -> ProxyError:
    """A 400 for a bad request field."""
    return ProxyError(400, f"{param}: {message}", param, code)
