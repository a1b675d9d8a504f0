"""Shared fixtures for ale-flow tests: a temp workspace and an agent factory over the scripted model."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ale_flow import Agent, LocalWorkspace, Settings
from ale_flow.events import Event, Stopped
from ale_flow.models.scripted import ScriptedModel

from ._json_server import JsonServer


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Keep the developer's ~/.ale and ALE_FLOW_* variables out of every test.
    monkeypatch.setenv("ALE_HOME", str(tmp_path / "ale_home"))
    for k in list(__import__("os").environ):
        if k.startswith("ALE_FLOW_"):
            monkeypatch.delenv(k)


@pytest.fixture
def ws(tmp_path: Path) -> LocalWorkspace:
    return LocalWorkspace(tmp_path / "ws")


RunFn = Callable[..., tuple[list[Event], Stopped, Agent]]


@pytest.fixture
def run_agent(ws: LocalWorkspace) -> RunFn:
    """run_agent(script, task="...", **settings) -> (events, stopped, agent)."""

    def _run(script: list[Any], task: str = "do the task", agent_kwargs: dict[str, Any] | None = None, **settings: Any) -> tuple[list[Event], Stopped, Agent]:
        settings.setdefault("mode", "yolo")
        model = script if isinstance(script, ScriptedModel) else ScriptedModel(script)
        agent = Agent(model, ws, Settings.model_validate(settings), **(agent_kwargs or {}))
        events = list(agent.run(task))
        assert isinstance(events[-1], Stopped)
        return events, events[-1], agent

    return _run


class CannedServer(JsonServer):
    """Serves queued (status, body) pairs on /v1/chat/completions and records requests."""

    def __init__(self) -> None:
        self.queue: list[tuple[int, Any]] = []
        self.requests: list[dict[str, Any]] = []
        super().__init__(self._answer)

    def _answer(self, path: str, headers: Any, body: dict[str, Any]) -> tuple[int, Any]:
        self.requests.append({"path": path, "auth": headers.get("authorization"), "body": body})
        return self.queue.pop(0) if self.queue else (200, CannedServer.completion("done"))

    @staticmethod
    def completion(content: str | None = "", tool_calls: list[dict[str, Any]] | None = None, finish: str = "stop", usage: tuple[int, int] = (10, 5)) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": "assistant", "content": content}
        if tool_calls:
            msg["tool_calls"] = tool_calls
        return {"choices": [{"index": 0, "message": msg, "finish_reason": finish}], "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]}}

    @staticmethod
    def native_call(name: str, arguments: str, id_: str = "call_a") -> dict[str, Any]:
        return {"id": id_, "type": "function", "function": {"name": name, "arguments": arguments}}


@pytest.fixture
def server() -> Iterator[CannedServer]:
    """A real HTTP server speaking /v1/chat/completions with queued canned responses."""
    s = CannedServer()
    yield s
    s.close()
