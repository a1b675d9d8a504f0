"""Egress policy decisions (deny by default) and the safety-event log they feed."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass

MAX_RECENT_EVENTS = 100


@dataclass(frozen=True)
class Rule:
    """One allowed destination: an exact host (name or IP) or "*", and a port (0 = any)."""

    host: str
    port: int = 0


@dataclass(frozen=True)
class Decision:
    """The outcome of a policy check."""

    allowed: bool
    address: str = ""
    """Where to connect when allowed (the resolved IP for wildcard rules)."""
    reason: str = ""


@dataclass(frozen=True)
class SafetyEventData:
    """A blocked action (SafetyEvent in the contract)."""

    kind: str
    """"egress_blocked" (the only kind this module records)."""
    time: float
    """Unix time."""
    command: str
    detail: str


def _is_public(ip: str) -> bool:
    addr = ipaddress.ip_address(ip)
    return bool(addr.is_global) and not addr.is_multicast


def decide(rules: list[Rule], host: str, port: int) -> Decision:
    """Check ``host:port`` against ``rules``.

    An exact host rule allows that host as named. A "*" rule allows only public addresses: the
    name is resolved here and the connection goes to the checked IP, so neither DNS tricks nor a
    wildcard can reach the worker's loopback, private networks or link-local metadata services.
    """
    name = host.lower().rstrip(".")
    for rule in rules:
        if rule.port not in (0, port):
            continue
        if rule.host != "*" and rule.host.lower().rstrip(".") == name:
            return Decision(True, address=host)
    if any(r.host == "*" and r.port in (0, port) for r in rules):
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as e:
            return Decision(False, reason=f"cannot resolve {host}: {e}")
        ips = [str(info[4][0]) for info in infos]
        if ips and all(_is_public(ip) for ip in ips):
            return Decision(True, address=ips[0])
        return Decision(
            False, reason=f"{host} resolves to a non-public address; name it explicitly to allow it"
        )
    return Decision(False, reason=f"{host}:{port} is not in the sandbox's network policy")


class SafetyLog:
    """Per-sandbox counts and recent safety events."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._recent: dict[str, deque[SafetyEventData]] = {}
        self._counts: dict[str, int] = {}

    def record(self, sandbox_id: str, kind: str, command: str, detail: str) -> None:
        """Add an event."""
        event = SafetyEventData(kind=kind, time=time.time(), command=command, detail=detail)
        with self._lock:
            self._recent.setdefault(sandbox_id, deque(maxlen=MAX_RECENT_EVENTS)).append(event)
            self._counts[sandbox_id] = self._counts.get(sandbox_id, 0) + 1

    def get(self, sandbox_id: str) -> tuple[int, list[SafetyEventData]]:
        """(total count, most recent events) of a sandbox."""
        with self._lock:
            return self._counts.get(sandbox_id, 0), list(self._recent.get(sandbox_id, ()))

    def forget(self, sandbox_id: str) -> None:
        """Drop a removed sandbox's events."""
        with self._lock:
            self._recent.pop(sandbox_id, None)
            self._counts.pop(sandbox_id, None)
