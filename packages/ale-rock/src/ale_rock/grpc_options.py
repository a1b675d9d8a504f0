"""The gRPC options of every ale-rock server and channel, in one place so both sides agree.

Why this module exists: a channel that sends keepalive pings and a server that does not expect
them kill long calls. gRPC's default server policy accepts one ping per 5 minutes while it sends
no data; each earlier ping is a "strike", and after 2 strikes it sends GOAWAY ENHANCE_YOUR_CALM
("Too many pings"). The Admin pinged its workers every 30 s, so a quiet ``Exec`` of more than a
few minutes was cut off. Hence: every ale-rock server accepts pings at least as often as every
ale-rock channel sends them (:data:`MIN_RECV_PING_INTERVAL_MS` <= :data:`KEEPALIVE_TIME_MS`).

Note the server key is ``grpc.http2.min_ping_interval_without_data_ms``; the often-quoted
``...min_recv_ping_interval...`` spelling is only the C macro's name and gRPC ignores it silently.
"""

from __future__ import annotations

from collections.abc import Sequence

Options = list[tuple[str, int]]

KEEPALIVE_TIME_MS = 30_000
"""How often a channel pings a connection with calls in flight (finds dead peers and half-open
TCP connections during long, silent calls)."""
KEEPALIVE_TIMEOUT_MS = 20_000
"""How long a ping may go unanswered before the channel drops the connection."""
MIN_RECV_PING_INTERVAL_MS = 10_000
"""The shortest ping interval a server tolerates: a third of :data:`KEEPALIVE_TIME_MS`, so timer
jitter or a client configured a little faster never earns a strike."""
MAX_PING_STRIKES = 2
"""gRPC's default: a peer pinging faster than the floor above is still cut off after 2 strikes."""
PERMIT_WITHOUT_CALLS = 1
"""Channels also ping idle connections (a dead worker is noticed before the next call), so
servers must accept pings on connections without calls too; the two sides share this value."""

if MIN_RECV_PING_INTERVAL_MS > KEEPALIVE_TIME_MS:  # pragma: no cover - a guard against bad edits
    raise AssertionError("servers must accept the pings ale-rock's own channels send")


def _message_limits(max_message_bytes: int | None) -> Options:
    if max_message_bytes is None:
        return []
    return [("grpc.max_send_message_length", max_message_bytes), ("grpc.max_receive_message_length", max_message_bytes)]


def channel_options(
    max_message_bytes: int | None = None,
    *,
    keepalive: bool = True,
    keepalive_time_ms: int = KEEPALIVE_TIME_MS,
    keepalive_timeout_ms: int = KEEPALIVE_TIMEOUT_MS,
    extra: Sequence[tuple[str, int]] = (),
) -> Options:
    """Options for a channel to an ale-rock server.

    ``keepalive=False`` is for channels to servers outside ale-rock (their ping policy is not
    ours to set). ``max_pings_without_data=0`` keeps pinging at the stated rate through a long
    silent call; gRPC's default of 2 would slow it to one ping a minute after the second.
    """
    opts = _message_limits(max_message_bytes)
    if keepalive:
        opts += [
            ("grpc.keepalive_time_ms", keepalive_time_ms),
            ("grpc.keepalive_timeout_ms", keepalive_timeout_ms),
            ("grpc.keepalive_permit_without_calls", PERMIT_WITHOUT_CALLS),
            ("grpc.http2.max_pings_without_data", 0),
        ]
    return opts + list(extra)


MAX_PENDING_RPCS = 1_000_000
"""Calls gRPC may hold that arrived before the server asked for them. gRPC's defaults (1,000, hard
limit 3,000) CANCEL the rest: a burst of a few thousand CreateSandbox calls (the scale benchmark's
4k in flight) lost a third of them with a bare ``CANCELLED``; a worker the Admin forwards thousands of
calls to, likewise. Callers bound their wait with deadlines."""
MAX_UNREQUESTED_S = 3600
"""How long such a call may wait (gRPC's default, 30 s, CANCELLED the tail of a 16k burst)."""
PENDING_RPC_OPTIONS = [("grpc.server.max_pending_requests", MAX_PENDING_RPCS),
                       ("grpc.server.max_pending_requests_hard_limit", MAX_PENDING_RPCS),
                       ("grpc.server_max_unrequested_time_in_server", MAX_UNREQUESTED_S)]
"""Servers that may take bursts (the Admin, the Worker) add these to :func:`server_options`."""


def server_options(
    max_message_bytes: int | None = None,
    *,
    min_ping_interval_ms: int = MIN_RECV_PING_INTERVAL_MS,
    extra: Sequence[tuple[str, int]] = (),
) -> Options:
    """Options for an ale-rock server: accepts the keepalive pings of :func:`channel_options`."""
    return _message_limits(max_message_bytes) + [
        ("grpc.http2.min_ping_interval_without_data_ms", min_ping_interval_ms),
        ("grpc.keepalive_permit_without_calls", PERMIT_WITHOUT_CALLS),
        ("grpc.http2.max_ping_strikes", MAX_PING_STRIKES),
        ("grpc.so_reuseport", 0),  # a second server on a taken port must fail, not share it
        *extra,
    ]
