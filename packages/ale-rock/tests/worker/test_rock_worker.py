"""The worker over a real port: WorkerService, the RockletService proxy, bad input, fuzzing."""

from __future__ import annotations

import grpc
import pytest
from ale_proto.errors import error_detail_of
from ale_proto.v1 import common_pb2, rocklet_pb2, sandbox_pb2, worker_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

W, R, S = worker_pb2, rocklet_pb2, sandbox_pb2
INVALID, NOT_FOUND = common_pb2.ERROR_CODE_INVALID_ARGUMENT, common_pb2.ERROR_CODE_NOT_FOUND


def _md(sid: str) -> list[tuple[str, str]]:
    return [("ale-sandbox-id", sid)]


def _detail(call) -> common_pb2.ErrorDetail:
    with pytest.raises(grpc.RpcError) as e:
        call()
    return error_detail_of(e.value)


def test_health_and_lifecycle_through_the_proxy(worker, stubs) -> None:
    ws, rs = stubs
    health = health_pb2_grpc.HealthStub(grpc.insecure_channel(worker.address))
    assert (
        health.Check(health_pb2.HealthCheckRequest(service="ale.v1.WorkerService")).status
        == health_pb2.HealthCheckResponse.SERVING
    )
    resp = ws.StartSandbox(
        W.StartSandboxRequest(sandbox_id="sb-life", namespace="ns1", spec=S.SandboxSpec(env={"A": "1"}))
    )
    assert resp.state == S.SANDBOX_STATE_RUNNING
    res = rs.Exec(
        R.RockletServiceExecRequest(spec=S.ExecSpec(command="echo $A; exit 2")), metadata=_md("sb-life")
    ).result
    assert (res.stdout, res.exit_code) == (b"1\n", 2)
    # Streams and client-streams pass through the proxy too.
    events = list(
        rs.ExecStream(
            R.RockletServiceExecStreamRequest(spec=S.ExecSpec(command="echo s")), metadata=_md("sb-life")
        )
    )
    assert events[-1].exit.end_reason == S.EXEC_END_REASON_EXITED
    up = rs.UploadFile(
        iter(
            [
                R.RockletServiceUploadFileRequest(header=S.UploadHeader(path="u.txt")),
                R.RockletServiceUploadFileRequest(chunk=b"abc"),
            ]
        ),
        metadata=_md("sb-life"),
    )
    assert up.size == 3
    assert rs.ReadFile(R.RockletServiceReadFileRequest(path="u.txt"), metadata=_md("sb-life")).data == b"abc"
    listed = ws.ListWorkerSandboxes(W.ListWorkerSandboxesRequest()).sandboxes
    assert [(s.sandbox_id, s.state) for s in listed] == [("sb-life", S.SANDBOX_STATE_RUNNING)]
    # Starting the same id again is idempotent.
    assert (
        ws.StartSandbox(W.StartSandboxRequest(sandbox_id="sb-life", spec=S.SandboxSpec())).state
        == S.SANDBOX_STATE_RUNNING
    )
    stats = ws.GetSandboxStats(W.WorkerServiceGetSandboxStatsRequest(sandbox_id="sb-life")).stats
    assert stats.pids >= 1
    ws.StopSandbox(W.WorkerServiceStopSandboxRequest(sandbox_id="sb-life", grace_period_ms=500))
    listed = ws.ListWorkerSandboxes(W.ListWorkerSandboxesRequest()).sandboxes
    assert listed[0].state == S.SANDBOX_STATE_STOPPED
    d = _detail(
        lambda: rs.Exec(
            R.RockletServiceExecRequest(spec=S.ExecSpec(command="true")), metadata=_md("sb-life"), timeout=10
        )
    )
    assert d.code == common_pb2.ERROR_CODE_UNAVAILABLE
    ws.RemoveSandbox(W.RemoveSandboxRequest(sandbox_id="sb-life"))
    assert ws.ListWorkerSandboxes(W.ListWorkerSandboxesRequest()).sandboxes == []


def test_denied_egress_shows_in_stats(stubs) -> None:
    ws, rs = stubs
    ws.StartSandbox(W.StartSandboxRequest(sandbox_id="sb-egress", spec=S.SandboxSpec()))
    try:
        cmd = "curl -s -m 10 -o /dev/null -w '%{http_code}' http://192.0.2.1/"
        assert (
            rs.Exec(
                R.RockletServiceExecRequest(spec=S.ExecSpec(command=cmd)), metadata=_md("sb-egress")
            ).result.stdout
            == b"403"
        )
        stats = ws.GetSandboxStats(W.WorkerServiceGetSandboxStatsRequest(sandbox_id="sb-egress")).stats
        assert stats.safety_event_count == 1
        event = stats.recent_safety_events[0]
        assert event.kind == common_pb2.SafetyEvent.KIND_EGRESS_BLOCKED and "192.0.2.1" in event.detail
        assert "curl" in event.command and event.time.seconds > 0
        ws.SetNetworkPolicy(
            W.WorkerServiceSetNetworkPolicyRequest(
                sandbox_id="sb-egress",
                policy=S.NetworkPolicy(allow=[S.EgressRule(host="192.0.2.1", port=80)]),
            )
        )
        # Allowed now, so the gateway tries to connect; TEST-NET is unroutable from here: 502, not 403.
        cmd2 = "curl -s -m 20 -o /dev/null -w '%{http_code}' http://192.0.2.1/"
        code = rs.Exec(
            R.RockletServiceExecRequest(spec=S.ExecSpec(command=cmd2)), metadata=_md("sb-egress")
        ).result.stdout
        assert code != b"403"
    finally:
        ws.RemoveSandbox(W.RemoveSandboxRequest(sandbox_id="sb-egress"))


@pytest.mark.parametrize(
    ("request_", "field", "code"),
    [
        (W.StartSandboxRequest(sandbox_id="Bad_ID"), "sandbox_id", INVALID),
        (W.StartSandboxRequest(sandbox_id=""), "sandbox_id", INVALID),
        (
            W.StartSandboxRequest(sandbox_id="ok-1", spec=S.SandboxSpec(image="no-such:image")),
            "spec.image",
            INVALID,
        ),
        (
            W.StartSandboxRequest(sandbox_id="ok-1", spec=S.SandboxSpec(workdir="rel/dir")),
            "spec.workdir",
            INVALID,
        ),
        (
            W.StartSandboxRequest(
                sandbox_id="ok-1", spec=S.SandboxSpec(resources=common_pb2.Resources(memory_bytes=2**62))
            ),
            "spec.resources.memory_bytes",
            INVALID,
        ),
        (
            W.StartSandboxRequest(
                sandbox_id="ok-1", spec=S.SandboxSpec(resources=common_pb2.Resources(cpu_millis=10**9))
            ),
            "spec.resources.cpu_millis",
            INVALID,
        ),
        (
            W.StartSandboxRequest(
                sandbox_id="ok-1", spec=S.SandboxSpec(network=S.NetworkPolicy(allow=[S.EgressRule(host="")]))
            ),
            "spec.network.allow[0].host",
            INVALID,
        ),
        (W.StartSandboxRequest(sandbox_id="ok-1", spec=S.SandboxSpec(env={"A=B": "x"})), "spec.env", INVALID),
    ],
)
def test_start_bad_input_names_the_field(stubs, request_, field: str, code: int) -> None:
    ws, _ = stubs
    d = _detail(lambda: ws.StartSandbox(request_))
    assert (d.code, d.field) == (code, field), d


def test_unknown_sandbox_and_missing_routing(stubs) -> None:
    ws, rs = stubs
    for call in (
        lambda: ws.StopSandbox(W.WorkerServiceStopSandboxRequest(sandbox_id="nope")),
        lambda: ws.GetSandboxStats(W.WorkerServiceGetSandboxStatsRequest(sandbox_id="nope")),
        lambda: ws.CommitSandbox(W.WorkerServiceCommitSandboxRequest(sandbox_id="nope", name="x")),
        lambda: rs.GetInfo(R.GetInfoRequest(), metadata=_md("nope")),
    ):
        d = _detail(call)
        assert (d.code, d.field) == (NOT_FOUND, "sandbox_id")
    d = _detail(lambda: rs.GetInfo(R.GetInfoRequest()))
    assert (d.code, d.field) == (INVALID, "ale-sandbox-id")
    ws.RemoveSandbox(W.RemoveSandboxRequest(sandbox_id="nope"))  # removing twice/unknown is fine


def test_huge_command_and_bad_paths_through_the_proxy(stubs) -> None:
    ws, rs = stubs
    ws.StartSandbox(W.StartSandboxRequest(sandbox_id="sb-bad", spec=S.SandboxSpec()))
    try:
        d = _detail(
            lambda: rs.Exec(
                R.RockletServiceExecRequest(spec=S.ExecSpec(command="x" * (2 << 20))), metadata=_md("sb-bad")
            )
        )
        assert (d.code, d.field) == (INVALID, "spec.command")
        d = _detail(lambda: rs.ReadFile(R.RockletServiceReadFileRequest(path="a\0b"), metadata=_md("sb-bad")))
        assert (d.code, d.field) == (INVALID, "path")
        d = _detail(
            lambda: rs.ReadFile(R.RockletServiceReadFileRequest(path="/no/such"), metadata=_md("sb-bad"))
        )
        assert (d.code, d.field) == (NOT_FOUND, "path")
        assert rs.GetInfo(R.GetInfoRequest(), metadata=_md("sb-bad")).uid == 1000
    finally:
        ws.RemoveSandbox(W.RemoveSandboxRequest(sandbox_id="sb-bad"))


def test_capacity_is_enforced(worker, stubs) -> None:
    ws, _ = stubs
    ids = [f"cap-{i}" for i in range(worker.config.max_sandboxes)]
    try:
        for sid in ids:
            assert (
                ws.StartSandbox(W.StartSandboxRequest(sandbox_id=sid, spec=S.SandboxSpec())).state
                == S.SANDBOX_STATE_RUNNING
            )
        d = _detail(
            lambda: ws.StartSandbox(W.StartSandboxRequest(sandbox_id="cap-over", spec=S.SandboxSpec()))
        )
        assert d.code == common_pb2.ERROR_CODE_RESOURCE_EXHAUSTED
    finally:
        for sid in ids:
            ws.RemoveSandbox(W.RemoveSandboxRequest(sandbox_id=sid))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sandbox_id=st.text(max_size=80), name=st.text(max_size=300), grace=st.integers(0, 2**32 - 1))
def test_fuzzed_worker_requests_keep_the_server_serving(
    stubs, sandbox_id: str, name: str, grace: int
) -> None:
    ws, rs = stubs
    for call in (
        lambda: ws.GetSandboxStats(W.WorkerServiceGetSandboxStatsRequest(sandbox_id=sandbox_id)),
        lambda: ws.StopSandbox(
            W.WorkerServiceStopSandboxRequest(sandbox_id=sandbox_id, grace_period_ms=grace)
        ),
        lambda: ws.CommitSandbox(W.WorkerServiceCommitSandboxRequest(sandbox_id=sandbox_id, name=name)),
        lambda: ws.SetNetworkPolicy(W.WorkerServiceSetNetworkPolicyRequest(sandbox_id=sandbox_id)),
        # Metadata must be printable ASCII on the wire (the client library refuses anything else).
        lambda: rs.ReadFile(
            R.RockletServiceReadFileRequest(path=name),
            metadata=_md("".join(c for c in sandbox_id if " " < c < "\x7f") or "x"),
        ),
    ):
        try:
            call()
        except grpc.RpcError as e:
            assert error_detail_of(e).code in (INVALID, NOT_FOUND), e.details()
    assert ws.ListWorkerSandboxes(W.ListWorkerSandboxesRequest()) is not None
