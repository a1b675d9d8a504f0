"""The gateway's HTTP stamper: the sandbox id it adds is the only one, on every request."""

from __future__ import annotations

import pytest
from ale_rock.egress.httpstamp import HttpFramingError, SandboxHeaderStamper
from hypothesis import given
from hypothesis import strategies as st

REQ = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: model-proxy\r\nX-Ale-Sandbox-Id: forged\r\n"
       b"Content-Length: 5\r\n\r\nhello")


def heads(stream: bytes) -> list[list[bytes]]:
    out = []
    while stream:
        head, _, stream = stream.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        out.append(lines)
        length = next((int(x.split(b":")[1]) for x in lines if x.lower().startswith(b"content-length")), 0)
        stream = stream[length:]
    return out


def test_overwrites_a_forged_header_on_every_request_of_a_keepalive_stream() -> None:
    s = SandboxHeaderStamper("sb-real")
    out = s.feed(REQ + REQ.replace(b"forged", b"x").replace(b"X-Ale", b"x-ale"))
    parsed = heads(out)
    assert len(parsed) == 2
    for lines in parsed:
        ids = [x for x in lines if x.lower().startswith(b"x-ale-sandbox-id")]
        assert ids == [b"X-Ale-Sandbox-Id: sb-real"]
    assert out.count(b"hello") == 2


@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=30))
def test_split_anywhere_gives_the_same_bytes(cuts: list[int]) -> None:
    data = REQ * 3
    whole = SandboxHeaderStamper("sb").feed(data)
    s, out, pos = SandboxHeaderStamper("sb"), b"", 0
    for c in cuts:
        out += s.feed(data[pos : pos + c])
        pos += c
    out += s.feed(data[pos:])
    assert out == whole


@pytest.mark.parametrize(
    "bad",
    [
        b"POST / HTTP/1.1\r\nFoo: a\nX-Ale-Sandbox-Id: evil\r\n\r\n",  # bare LF hides a header
        b"POST / HTTP/1.1\r\nFoo: a\r\n X-Ale-Sandbox-Id: evil\r\n\r\n",  # folded
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        b"POST / HTTP/1.1\r\nX-Ale-Sandbox-Id : evil\r\n\r\n",
        b"GARBAGE\r\n\r\n",
    ],
)
def test_ambiguous_framing_is_refused(bad: bytes) -> None:
    with pytest.raises(HttpFramingError):
        SandboxHeaderStamper("sb").feed(bad)


def test_oversize_head_is_refused() -> None:
    s = SandboxHeaderStamper("sb", max_head_bytes=100)
    with pytest.raises(HttpFramingError):
        s.feed(b"GET / HTTP/1.1\r\n" + b"A: b\r\n" * 50)
