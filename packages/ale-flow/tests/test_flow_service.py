"""AgentService over real gRPC on a free port, with the scripted model behind it."""

from __future__ import annotations

import threading
import time

import grpc
import pytest
from ale_flow.models.scripted import Reply, ScriptedModel, call

agent_pb2 = pytest.importorskip("ale_proto.v1.agent_pb2", reason="ale-proto stubs are not generated")
from ale_flow.service import AgentServicer, serve_agent_service  # noqa: E402
from ale_proto.v1 import agent_pb2_grpc  # noqa: E402


@pytest.fixture
def service():
    scripts: list[list] = []
    servicer = AgentServicer(model_factory=lambda settings: ScriptedModel(scripts.pop(0)), token="t0k")
    server, port = serve_agent_service("127.0.0.1:0", servicer)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = agent_pb2_grpc.AgentServiceStub(channel)
    yield stub, scripts
    channel.close()
    server.stop(grace=None)


AUTH = (("authorization", "Bearer t0k"),)


def test_run_streams_events_and_trajectory(service, tmp_path):
    stub, scripts = service
    scripts.append([Reply("writing", calls=[call("write_file", path="a.txt", content="A")]), "wrote a.txt"])
    req = agent_pb2.RunAgentRequest(task="write a.txt", workspace=str(tmp_path / "w"), mode="yolo", run_id="r1")
    events = list(stub.RunAgent(req, metadata=AUTH, timeout=60))
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds == ["assistant_message", "tool", "tool", "assistant_message", "stopped"]
    assert events[2].tool.result.content.startswith("Wrote 1 bytes") and events[2].step == 1
    stopped = events[-1].stopped
    assert stopped.kind == agent_pb2.AGENT_STOP_KIND_COMPLETED and stopped.message == "wrote a.txt" and stopped.steps == 2
    assert (tmp_path / "w" / "a.txt").read_text() == "A"
    traj = stub.GetTrajectory(agent_pb2.GetTrajectoryRequest(run_id="r1"), metadata=AUTH, timeout=30).trajectory
    assert traj.metadata["task"] == "write a.txt" and traj.turns[0].tool_calls[0].name == "write_file"


def test_interrupt_a_running_agent(service, tmp_path):
    stub, scripts = service
    scripts.append([Reply(calls=[call("shell", command="sleep 60")]), "never"])
    req = agent_pb2.RunAgentRequest(task="hang", workspace=str(tmp_path), mode="yolo", run_id="r2")
    out: list = []
    t = threading.Thread(target=lambda: out.extend(stub.RunAgent(req, metadata=AUTH, timeout=60)))
    t.start()
    deadline = time.monotonic() + 30
    while True:
        try:
            r = stub.InterruptAgent(agent_pb2.InterruptAgentRequest(run_id="r2"), metadata=AUTH, timeout=10)
            if r.interrupted:
                break
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.NOT_FOUND
        assert time.monotonic() < deadline
        time.sleep(0.1)
    t.join(timeout=30)
    assert out[-1].stopped.kind == agent_pb2.AGENT_STOP_KIND_INTERRUPTED
    again = stub.InterruptAgent(agent_pb2.InterruptAgentRequest(run_id="r2"), metadata=AUTH, timeout=10)
    assert again.interrupted is False


def test_auth_and_bad_requests(service, tmp_path):
    stub, scripts = service
    req = agent_pb2.RunAgentRequest(task="x", workspace=str(tmp_path))
    with pytest.raises(grpc.RpcError) as e:
        list(stub.RunAgent(req, timeout=10))
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(grpc.RpcError) as e:
        list(stub.RunAgent(agent_pb2.RunAgentRequest(task="x", workspace=str(tmp_path), mode="warp"), metadata=AUTH, timeout=10))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "mode" in e.value.details()
    with pytest.raises(grpc.RpcError) as e:
        stub.GetTrajectory(agent_pb2.GetTrajectoryRequest(run_id="nope"), metadata=AUTH, timeout=10)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
