"""Authentication: client API keys → namespaces, and the workers' join token."""

from __future__ import annotations

import hmac
from collections.abc import Iterable

from ale_rock.admin.errors import AdminError, Code


def bearer_token(metadata: Iterable[tuple[str, str | bytes]] | None) -> str:
    """The token of an ``authorization: Bearer <token>`` metadata entry, or ""."""
    for key, value in metadata or ():
        if key.lower() == "authorization":
            text = value.decode() if isinstance(value, bytes) else value
            scheme, _, token = text.partition(" ")
            if scheme.lower() == "bearer":
                return token.strip()
    return ""


class Authenticator:
    """Maps API keys to namespaces and checks join tokens, in constant time per key."""

    def __init__(self, api_keys: dict[str, str], join_token: str) -> None:
        self._keys = dict(api_keys)
        self._join_token = join_token

    def namespace_of(self, metadata: Iterable[tuple[str, str | bytes]] | None) -> str:
        """The caller's namespace; UNAUTHENTICATED for a missing or unknown key."""
        token = bearer_token(metadata)
        if not token:
            raise AdminError(Code.UNAUTHENTICATED, "missing API key (metadata 'authorization: Bearer KEY')")
        namespace = ""
        for key, ns in self._keys.items():
            if hmac.compare_digest(key.encode(), token.encode()):
                namespace = ns
        if not namespace:
            raise AdminError(Code.UNAUTHENTICATED, "unknown API key")
        return namespace

    def check_join_token(self, metadata: Iterable[tuple[str, str | bytes]] | None) -> None:
        """UNAUTHENTICATED unless the caller presents the workers' join token."""
        token = bearer_token(metadata)
        if not self._join_token or not hmac.compare_digest(token.encode(), self._join_token.encode()):
            raise AdminError(Code.UNAUTHENTICATED, "invalid or missing worker join token")
