"""Which egress destinations no policy may open: the machine itself and ALE's own services.

A sandbox's only way out is the worker's egress gateway, which runs on the host. A rule to the
host's loopback, to a link-local address (cloud metadata), to one of the host's own addresses or
to an ALE service port (the admin, a worker, the ModelProxy, the InferenceService) would hand the
sandbox the host's view of the network, so such rules are refused three times: by the admin when
a policy is set, by the worker when it receives it, and by the gateway at connect time, after it
resolved the name (a name resolving to loopback is refused there, and the connection goes to the
checked address, so DNS cannot swap it afterwards).

The reserved host ``model-proxy`` is ALE's own, gateway-stamped route to the ModelProxy and is
not a destination in this sense.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
import time
from collections.abc import Iterable, Sequence

MODEL_PROXY_HOST = "model-proxy"
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
_CACHE_S = 5.0

Endpoint = tuple[str, int]
"""(host, port) of an ALE service; port 0 = every port of that host."""


def _norm(host: str) -> str:
    return host.strip().strip("[]").lower().rstrip(".")


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        addr = ipaddress.ip_address(_norm(text).split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


_local_lock = threading.Lock()
_local_cache: tuple[float, frozenset[str]] = (0.0, frozenset())


def local_addresses() -> frozenset[str]:
    """Every address of this host's interfaces (IPv4 from the kernel's local routes, IPv6 from
    /proc/net/if_inet6, plus what the host name resolves to); cached for a few seconds."""
    global _local_cache
    with _local_lock:
        stamp, cached = _local_cache
        if cached and time.monotonic() - stamp < _CACHE_S:
            return cached
    found: set[str] = set()
    with contextlib.suppress(OSError):
        last = ""
        with open("/proc/net/fib_trie") as f:
            for line in f:
                text = line.strip()
                if text.startswith("|--"):
                    last = text[3:].strip()
                elif text.startswith("/32 host LOCAL") and last:
                    found.add(last)
    with contextlib.suppress(OSError), open("/proc/net/if_inet6") as f:
        for line in f:
            raw = line.split()[0] if line.split() else ""
            if len(raw) == 32:
                found.add(str(ipaddress.IPv6Address(int(raw, 16))))
    with contextlib.suppress(OSError):
        for info in socket.getaddrinfo(socket.gethostname(), None):
            found.add(str(info[4][0]).split("%", 1)[0])
    result = frozenset(str(_ip(a)) for a in found if _ip(a) is not None)
    with _local_lock:
        _local_cache = (time.monotonic(), result)
    return result


def address_problem(ip: str, local: Iterable[str] | None = None) -> str:
    """Why ``ip`` is no egress destination ("" when it may be one)."""
    addr = _ip(ip)
    if addr is None:
        return ""
    if addr.is_loopback:
        return "is loopback"
    if addr.is_link_local:
        return "is link-local"
    if addr.is_unspecified:
        return "is unspecified"
    if addr.is_multicast:
        return "is multicast"
    if str(addr) in (local_addresses() if local is None else frozenset(local)):
        return "is an address of this host"
    return ""


def host_problem(host: str) -> str:
    """Why a rule's host is no egress destination, judged without DNS ("" when it may be one)."""
    name = _norm(host)
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        return "is loopback"
    return address_problem(name)


def _same_host(a: str, b: str) -> bool:
    ia, ib = _ip(a), _ip(b)
    if ia is not None and ib is not None:
        return ia == ib
    return _norm(a) == _norm(b)


def rule_problem(host: str, port: int, protected: Sequence[Endpoint] = ()) -> str:
    """Why a rule ``host:port`` (port 0 = any) must be refused, as ``"<host>:<port> <reason>"``,
    or "" when it is admissible. ``"*"`` and ``model-proxy`` are judged at connect time."""
    if host == "*" or _norm(host) == MODEL_PROXY_HOST:
        return ""
    if problem := host_problem(host):
        return f"{host}:{port} {problem}"
    for p_host, p_port in protected:
        if (0 in (port, p_port) or port == p_port) and _same_host(host, p_host):
            return f"{host}:{port} is an ALE service port ({p_host}:{p_port or '*'})"
    return ""


def resolve_protected(protected: Sequence[Endpoint]) -> set[Endpoint]:
    """The protected endpoints as (IP, port) pairs (names resolved now; unresolvable ones dropped)."""
    out: set[Endpoint] = set()
    for host, port in protected:
        if (ip := _ip(host)) is not None:
            out.add((str(ip), port))
            continue
        with contextlib.suppress(OSError, UnicodeError):
            for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM):
                if (ip := _ip(str(info[4][0]))) is not None:
                    out.add((str(ip), port))
    return out


def connect_problem(ips: Sequence[str], port: int, protected_ips: set[Endpoint]) -> str:
    """Why the gateway must not connect to ``port`` on these resolved addresses ("" = it may)."""
    for ip in ips:
        if problem := address_problem(ip):
            return f"{ip} {problem}"
        norm = str(_ip(ip) or ip)
        if (norm, port) in protected_ips or (norm, 0) in protected_ips:
            return f"{ip}:{port} is an ALE service port"
    return ""
