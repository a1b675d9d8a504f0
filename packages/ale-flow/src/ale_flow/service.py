"""AgentService (gRPC): run agents for other programs and languages, streaming the same events
the Python API yields. An edge module: protobuf types stop here.

    server, port = serve_agent_service("127.0.0.1:0", token="secret")
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc
from ale_proto.config import ConfigError, deep_merge, parse_overrides

from ale_flow import events as ev
from ale_flow.agent import Agent
from ale_flow.models.base import Model
from ale_flow.settings import Settings, load_settings, set_dotted
from ale_flow.trajectory import load_trajectory
from ale_flow.types import AgentStopReason
from ale_flow.workspace import SANDBOX_SCHEME, open_workspace

ModelFactory = Callable[[Settings], Model]

_KIND = {
    AgentStopReason.COMPLETED: "AGENT_STOP_KIND_COMPLETED",
    AgentStopReason.MAX_STEPS: "AGENT_STOP_KIND_MAX_STEPS",
    AgentStopReason.MAX_TOKENS: "AGENT_STOP_KIND_MAX_TOKENS",
    AgentStopReason.MAX_COST: "AGENT_STOP_KIND_MAX_COST",
    AgentStopReason.TIME_LIMIT: "AGENT_STOP_KIND_TIMEOUT",
    AgentStopReason.INTERRUPTED: "AGENT_STOP_KIND_INTERRUPTED",
    AgentStopReason.LOOP_DETECTED: "AGENT_STOP_KIND_LOOP_DETECTED",
    AgentStopReason.FAILURE_STREAK: "AGENT_STOP_KIND_LOOP_DETECTED",
    AgentStopReason.MALFORMED_LIMIT: "AGENT_STOP_KIND_ERROR",
    AgentStopReason.MODEL_ERROR: "AGENT_STOP_KIND_ERROR",
    AgentStopReason.BLOCKED: "AGENT_STOP_KIND_HOOK",
}


def _openai_model(settings: Settings) -> Model:
    from ale_flow.cli import _build_model

    model: Model = _build_model(settings)
    return model


class AgentServicer:
    """Implements ale.v1.AgentService over `Agent` (one thread per running agent)."""

    def __init__(self, model_factory: ModelFactory | None = None, token: str | None = None, base_settings: dict[str, Any] | None = None) -> None:
        self.model_factory = model_factory or _openai_model
        self.token = token
        self.base_settings = base_settings or {}
        self._lock = threading.Lock()
        self._agents: dict[str, Agent] = {}
        self._running: set[str] = set()

    # -- helpers
    def _check_auth(self, context: Any) -> None:
        if self.token is None:
            return
        md = dict(context.invocation_metadata())
        if md.get("authorization") != f"Bearer {self.token}":
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")

    def _settings(self, req: Any) -> Settings:
        # A copy (the base's nested sections stay untouched); values parsed as YAML like `-c key=value`.
        cli = deep_merge(self.base_settings, parse_overrides(f"{k}={v}" for k, v in req.settings.items()))
        if req.model.base_url:
            set_dotted(cli, "model.base_url", req.model.base_url)
        if req.model.model:
            set_dotted(cli, "model.name", req.model.model)
        if req.model.api_key:
            set_dotted(cli, "model.api_key", req.model.api_key)
        if req.max_steps:
            set_dotted(cli, "limits.max_steps", req.max_steps)
        if req.mode:
            cli["mode"] = req.mode
        return load_settings(None if req.workspace.startswith(SANDBOX_SCHEME) else req.workspace, cli)

    @staticmethod
    def _to_response(pb: Any, run_id: str, step: int, event: ev.Event, agent: Agent) -> Any | None:
        from ale_proto.v1 import common_pb2

        r = pb.RunAgentResponse(run_id=run_id, step=step)
        r.time.FromNanoseconds(time.time_ns())
        if isinstance(event, ev.AssistantMessage):
            r.assistant_message = event.content
        elif isinstance(event, (ev.ToolStarted, ev.ToolFinished)) and event.call is not None:
            import json

            tool = pb.AgentToolEvent(call=common_pb2.ToolCall(id=event.call.id, name=event.call.name, arguments_json=json.dumps(event.call.arguments)))
            if isinstance(event, ev.ToolFinished) and event.result is not None:
                tool.result.CopyFrom(common_pb2.Observation(tool_call_id=event.call.id, content=event.result.content, is_error=event.result.is_error))
                tool.blocked = event.result.blocked
            r.tool.CopyFrom(tool)
        elif isinstance(event, ev.Compressed):
            r.compression = f"{event.before_tokens} -> {event.after_tokens} tokens ({'lossy' if event.lossy else 'lossless'})"
        elif isinstance(event, ev.Reminder):
            r.reminder = event.text
        elif isinstance(event, ev.Intervention):
            r.loop_detected = event.text
        elif isinstance(event, ev.Stopped):
            r.stopped.CopyFrom(
                pb.AgentStopped(
                    kind=pb.AgentStopKind.Value(_KIND[event.reason]),
                    message=event.final_message or event.detail,
                    trajectory_path=str(agent.trajectory_path or ""),
                    steps=event.steps,
                    tokens=event.usage.total_tokens,
                )
            )
        else:
            return None
        return r

    # -- RPCs
    def RunAgent(self, request: Any, context: Any) -> Iterator[Any]:  # noqa: N802 (gRPC method name)
        from ale_proto.v1 import agent_pb2 as pb

        self._check_auth(context)
        if not request.task:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "task: must not be empty")
        if not request.workspace:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "workspace: must be a directory path or sandbox://ID")
        try:
            settings = self._settings(request)
        except ConfigError as e:  # SettingsError, or a bad `settings` entry
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        try:
            workspace = open_workspace(request.workspace)
        except Exception as e:  # the sandbox SDK's connection errors are not ours to enumerate
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"workspace: cannot open {request.workspace}: {e}")
        agent = Agent(self.model_factory(settings), workspace, settings)
        run_id = request.run_id or uuid.uuid4().hex
        with self._lock:
            if run_id in self._agents:
                context.abort(grpc.StatusCode.ALREADY_EXISTS, f"run_id: {run_id} already exists")
            self._agents[run_id] = agent
            self._running.add(run_id)
        context.add_callback(agent.interrupt)  # a client that goes away interrupts its run
        step = 0
        try:
            for event in agent.run(request.task):
                step = getattr(event, "step", step) or step
                msg = self._to_response(pb, run_id, step, event, agent)
                if msg is not None:
                    yield msg
        finally:
            agent.close()
            with self._lock:
                self._running.discard(run_id)

    def InterruptAgent(self, request: Any, context: Any) -> Any:  # noqa: N802
        from ale_proto.v1 import agent_pb2 as pb

        self._check_auth(context)
        with self._lock:
            agent = self._agents.get(request.run_id)
            running = request.run_id in self._running
        if agent is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"run_id: no run {request.run_id!r}")
        assert agent is not None  # abort() raises
        if running:
            agent.interrupt()
        return pb.InterruptAgentResponse(interrupted=running)

    def GetTrajectory(self, request: Any, context: Any) -> Any:  # noqa: N802
        from ale_proto.v1 import agent_pb2 as pb

        from ale_flow.trajectory_proto import to_proto

        self._check_auth(context)
        with self._lock:
            agent = self._agents.get(request.run_id)
        if agent is None or agent.trajectory_path is None or not agent.trajectory_path.exists():
            context.abort(grpc.StatusCode.NOT_FOUND, f"run_id: no trajectory for {request.run_id!r}")
        assert agent is not None and agent.trajectory_path is not None
        return pb.GetTrajectoryResponse(trajectory=to_proto(load_trajectory(agent.trajectory_path)))


def serve_agent_service(address: str = "127.0.0.1:0", servicer: AgentServicer | None = None, max_workers: int = 16, **kw: Any) -> tuple[Any, int]:
    """Start a gRPC server with AgentService (+ health and reflection when available); returns (server, port)."""
    from ale_proto import serving
    from ale_proto.v1 import agent_pb2, agent_pb2_grpc

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers), options=[serving.NO_REUSEPORT], interceptors=serving.strict_requests())
    agent_pb2_grpc.add_AgentServiceServicer_to_server(servicer or AgentServicer(**kw), server)
    try:
        from ale_proto.serving import add_standard_services

        add_standard_services(server, [agent_pb2.DESCRIPTOR.services_by_name["AgentService"].full_name])
    except ImportError:
        pass  # health/reflection need ale-proto[server]; the service works without them
    port = serving.bind(server, address)
    server.start()
    return server, port
