"""Stamps the calling sandbox's id on every HTTP/1.1 request a sandbox sends to the ModelProxy.

The egress gateway is the only way out of a sandbox and knows which sandbox a connection belongs
to (its egress token), so the id it stamps cannot be forged: any ``X-Ale-Sandbox-Id`` the agent
sent is dropped. Only the ``model-proxy`` destination is parsed. Anything this parser could
frame differently from the proxy's server (bare LF line ends, folded headers, chunked or
duplicate-length bodies, oversize heads) is refused and the connection closed, so no second
request can be smuggled past the stamp.
"""

from __future__ import annotations

SANDBOX_HEADER = b"X-Ale-Sandbox-Id"
MAX_HEAD_BYTES = 65536


class HttpFramingError(ValueError):
    """The byte stream is not HTTP/1.1 this stamper can frame unambiguously."""


class SandboxHeaderStamper:
    """Incremental: :meth:`feed` the client's bytes, forward what it returns."""

    def __init__(self, sandbox_id: str, max_head_bytes: int = MAX_HEAD_BYTES) -> None:
        if not sandbox_id or any(c in sandbox_id for c in "\r\n"):
            raise ValueError("a sandbox id without line breaks is required")
        self._stamp = SANDBOX_HEADER + b": " + sandbox_id.encode()
        self._max_head = max_head_bytes
        self._buf = b""
        self._body_left = 0

    def feed(self, data: bytes) -> bytes:
        """The bytes to forward for ``data`` (heads rewritten, bodies passed through)."""
        self._buf += data
        out: list[bytes] = []
        while self._buf:
            if self._body_left:
                n = min(self._body_left, len(self._buf))
                out.append(self._buf[:n])
                self._buf, self._body_left = self._buf[n:], self._body_left - n
                continue
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buf) > self._max_head:
                    raise HttpFramingError("request head too large")
                break
            if end > self._max_head:
                raise HttpFramingError("request head too large")
            head, self._buf = self._buf[:end], self._buf[end + 4 :]
            rewritten, self._body_left = self._rewrite(head)
            out.append(rewritten)
        return b"".join(out)

    def _rewrite(self, head: bytes) -> tuple[bytes, int]:
        lines = head.split(b"\r\n")
        request_line, headers = lines[0], lines[1:]
        if len(request_line.split(b" ")) != 3 or not request_line.endswith((b"HTTP/1.1", b"HTTP/1.0")):
            raise HttpFramingError("not an HTTP/1.x request line")
        kept: list[bytes] = [request_line, self._stamp]
        lengths: set[int] = set()
        for line in [request_line, *headers]:
            if b"\n" in line or b"\r" in line or b"\0" in line:
                raise HttpFramingError("bare CR/LF or NUL in the request head")
        for line in headers:
            if line[:1] in (b" ", b"\t"):
                raise HttpFramingError("folded header lines are not accepted")
            name, sep, value = line.partition(b":")
            key = name.strip().lower()
            if not sep or not key or name != name.strip():
                raise HttpFramingError("malformed header line")
            if key == SANDBOX_HEADER.lower():
                continue  # the agent's own claim is dropped; ours is the only one
            if key == b"transfer-encoding":
                raise HttpFramingError("chunked request bodies are not accepted (send Content-Length)")
            if key == b"content-length":
                text = value.strip()
                if not text.isdigit():
                    raise HttpFramingError("malformed Content-Length")
                lengths.add(int(text))
            kept.append(line)
        if len(lengths) > 1:
            raise HttpFramingError("conflicting Content-Length headers")
        return b"\r\n".join(kept) + b"\r\n\r\n", lengths.pop() if lengths else 0
