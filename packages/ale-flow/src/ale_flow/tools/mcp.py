"""MCP tools: connect to configured MCP servers (stdio or streamable HTTP) with the official `mcp`
SDK and expose each server tool as `<server>__<tool>` in the registry.

The SDK is async; the agent loop is sync. Each connection owns an event loop in a daemon thread
that keeps the session open, and tool calls are submitted to it with a timeout. Works with the
SDK's 1.x (camelCase fields) and 2.x (snake_case fields). Install with `pip install ale-flow[mcp]`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

from ale_flow.settings import MCPServerConfig
from ale_flow.tools.base import ToolContext
from ale_flow.types import ToolResult


class MCPError(RuntimeError):
    """An MCP server could not be reached or initialized."""


def _field(obj: Any, *names: str, default: Any = None) -> Any:
    for n in names:
        if hasattr(obj, n):
            return getattr(obj, n)
    return default


def _content_text(result: Any) -> str:
    parts = []
    for item in _field(result, "content", default=[]) or []:
        text = _field(item, "text")
        parts.append(text if text is not None else f"[{_field(item, 'type', default='content')} omitted]")
    structured = _field(result, "structured_content", "structuredContent")
    if not parts and structured is not None:
        parts.append(str(structured))
    return "\n".join(parts)


@dataclass
class MCPTool:
    """One server tool, callable through the registry like any built-in."""

    name: str
    description: str
    parameters: dict[str, Any]
    read_only: bool
    remote_name: str
    connection: MCPConnection

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return self.connection.call(self.remote_name, args)


class MCPConnection:
    """A live session with one MCP server."""

    def __init__(self, name: str, config: MCPServerConfig, connect_timeout_s: float = 30.0) -> None:
        self.name = name
        self.config = config
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"mcp-{name}", daemon=True)
        self._session: Any = None
        self._raw_tools: list[Any] = []
        self._ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._stop: asyncio.Event | None = None
        self._thread.start()
        # One long-lived task owns the transport: anyio scopes must be exited by the task that entered them.
        self._main_task = asyncio.run_coroutine_threadsafe(self._main(), self._loop)
        try:
            self._ready.result(connect_timeout_s)
        except BaseException:
            self.close()
            raise

    def _submit(self, coro: Any, timeout: float) -> Any:
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        try:
            async with AsyncExitStack() as stack:
                await self._open(stack)
                self._ready.set_result(None)
                await self._stop.wait()
        except Exception as e:
            err = e if isinstance(e, MCPError) else MCPError(f"MCP server {self.name!r} failed: {type(e).__name__}: {e}")
            if not self._ready.done():
                self._ready.set_exception(err)

    async def _open(self, stack: AsyncExitStack) -> None:
        try:
            from mcp import ClientSession
        except ImportError as e:  # pragma: no cover - depends on the install
            raise MCPError("MCP support needs the mcp package: pip install 'ale-flow[mcp]'") from e
        cfg = self.config
        if cfg.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            if not cfg.command:
                raise MCPError(f"MCP server {self.name!r}: stdio transport needs `command`")
            params = StdioServerParameters(command=cfg.command[0], args=cfg.command[1:], env=cfg.env or None)
            streams = await stack.enter_async_context(stdio_client(params))
        else:
            if not cfg.url:
                raise MCPError(f"MCP server {self.name!r}: http transport needs `url`")
            try:
                from mcp.client.streamable_http import streamable_http_client as http_client
            except ImportError:  # mcp 1.x name
                from mcp.client.streamable_http import streamablehttp_client as http_client  # type: ignore[no-redef,attr-defined,unused-ignore]
            streams = await stack.enter_async_context(http_client(cfg.url))
        read, write = streams[0], streams[1]
        self._session = await stack.enter_async_context(ClientSession(read, write))
        await self._session.initialize()
        self._raw_tools = list((await self._session.list_tools()).tools)

    def tools(self) -> list[MCPTool]:
        out = []
        for t in self._raw_tools:
            schema = _field(t, "input_schema", "inputSchema", default=None) or {"type": "object", "properties": {}}
            ann = _field(t, "annotations")
            read_only = bool(_field(ann, "read_only_hint", "readOnlyHint", default=False)) if ann is not None else False
            out.append(MCPTool(f"{self.name}__{t.name}", t.description or "", dict(schema), read_only, t.name, self))
        return out

    def call(self, tool: str, args: dict[str, Any]) -> ToolResult:
        try:
            result = self._submit(self._session.call_tool(tool, args), self.config.timeout_s)
        except concurrent.futures.TimeoutError:
            return ToolResult(f"Error: MCP tool {tool} timed out after {self.config.timeout_s:g}s", is_error=True)
        except Exception as e:
            return ToolResult(f"Error: MCP tool {tool} failed: {type(e).__name__}: {e}", is_error=True)
        return ToolResult(_content_text(result), is_error=bool(_field(result, "is_error", "isError", default=False)))

    def close(self) -> None:
        """End the session (the stdio server process exits) and stop the loop thread."""
        if self._loop.is_running():
            if self._stop is not None:
                self._loop.call_soon_threadsafe(self._stop.set)
            try:
                self._main_task.result(10.0)
            except Exception:  # noqa: S110 - best effort during shutdown
                self._main_task.cancel()
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)


def connect_all(servers: dict[str, MCPServerConfig]) -> tuple[list[MCPConnection], list[str]]:
    """Connect every configured server; failures become warnings, not crashes."""
    conns: list[MCPConnection] = []
    errors: list[str] = []
    for name, cfg in servers.items():
        try:
            conns.append(MCPConnection(name, cfg))
        except (MCPError, concurrent.futures.TimeoutError, OSError) as e:
            errors.append(str(e) or f"MCP server {name!r} timed out while connecting")
    return conns, errors
