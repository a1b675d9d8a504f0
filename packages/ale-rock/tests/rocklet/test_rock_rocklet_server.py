"""A real Rocklet process over gRPC: exec, streams, cancellation, files, typed errors, fuzzing."""

from __future__ import annotations

import hashlib
import threading
import time

import grpc
import pytest
from ale_proto.errors import error_detail_of
from ale_proto.v1 import common_pb2, rocklet_pb2, sandbox_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

R = rocklet_pb2


def test_exec_and_info(rocklet_stub) -> None:
    info = rocklet_stub.GetInfo(R.GetInfoRequest())
    assert info.version and info.workdir
    res = rocklet_stub.Exec(
        R.RockletServiceExecRequest(spec=sandbox_pb2.ExecSpec(command="echo hi; exit 4"))
    ).result
    assert (
        res.end_reason == sandbox_pb2.EXEC_END_REASON_EXITED and res.exit_code == 4 and res.stdout == b"hi\n"
    )


def test_exec_stream_events(rocklet_stub) -> None:
    events = list(
        rocklet_stub.ExecStream(
            R.RockletServiceExecStreamRequest(
                spec=sandbox_pb2.ExecSpec(command="echo a; sleep 0.2; echo b >&2")
            )
        )
    )
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds[0] == "started" and kinds[-1] == "exit"
    assert b"".join(e.stdout for e in events) == b"a\n" and b"".join(e.stderr for e in events) == b"b\n"


def test_caller_deadline_interrupts_command(rocklet_stub) -> None:
    with pytest.raises(grpc.RpcError) as e:
        rocklet_stub.Exec(
            R.RockletServiceExecRequest(spec=sandbox_pb2.ExecSpec(command="sleep 30"), exec_id="dl-1"),
            timeout=0.5,
        )
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    # The command was cancelled with its call: signalling it now finds nothing running.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            rocklet_stub.SignalProcess(R.RockletServiceSignalProcessRequest(exec_id="dl-1"))
        except grpc.RpcError as err:
            assert error_detail_of(err).code == common_pb2.ERROR_CODE_NOT_FOUND
            break
        time.sleep(0.1)
    else:
        pytest.fail("the command outlived its caller")


def test_signal_process_over_grpc(rocklet_stub) -> None:
    out: list = []
    t = threading.Thread(
        target=lambda: out.append(
            rocklet_stub.Exec(
                R.RockletServiceExecRequest(
                    spec=sandbox_pb2.ExecSpec(command="exec sleep 30"), exec_id="sig-1"
                )
            )
        )
    )
    t.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if rocklet_stub.SignalProcess(
                R.RockletServiceSignalProcessRequest(exec_id="sig-1", signal=15)
            ).delivered:
                break
        except grpc.RpcError:
            time.sleep(0.05)
    t.join(10)
    assert out[0].result.end_reason == sandbox_pb2.EXEC_END_REASON_INTERRUPTED


def test_a_rocklet_outside_a_sandbox_refuses_to_kill_all_processes(rocklet_stub) -> None:
    """This Rocklet runs on the test host (no ``own_sandbox`` in its settings): kill(-1) from it
    would reach every process of the host the tests run as."""
    with pytest.raises(grpc.RpcError) as e:
        rocklet_stub.SignalProcess(R.RockletServiceSignalProcessRequest(all_processes=True), timeout=10)
    detail = error_detail_of(e.value)
    assert detail.code == common_pb2.ERROR_CODE_FAILED_PRECONDITION and detail.field == "all_processes", detail
    assert rocklet_stub.GetInfo(R.GetInfoRequest(), timeout=10)  # and serves on


def test_session_over_grpc(rocklet_stub) -> None:
    sid = rocklet_stub.CreateSession(
        R.RockletServiceCreateSessionRequest(spec=sandbox_pb2.SessionSpec())
    ).session_id
    rocklet_stub.RunInSession(
        R.RockletServiceRunInSessionRequest(
            session_id=sid, command=sandbox_pb2.SessionCommand(command="cd /")
        )
    )
    res = rocklet_stub.RunInSession(
        R.RockletServiceRunInSessionRequest(session_id=sid, command=sandbox_pb2.SessionCommand(command="pwd"))
    )
    assert res.result.stdout == b"/\n"
    rocklet_stub.CloseSession(R.RockletServiceCloseSessionRequest(session_id=sid))


def test_upload_download_over_grpc(rocklet_stub) -> None:
    data = b"0123456789" * 300_000
    digest = hashlib.sha256(data).hexdigest()

    def parts():
        yield R.RockletServiceUploadFileRequest(
            header=sandbox_pb2.UploadHeader(path="big/file.bin", sha256=digest)
        )
        for i in range(0, len(data), 1 << 20):
            yield R.RockletServiceUploadFileRequest(chunk=data[i : i + (1 << 20)])

    resp = rocklet_stub.UploadFile(parts())
    assert (resp.size, resp.sha256) == (len(data), digest)
    got = list(rocklet_stub.DownloadFile(R.RockletServiceDownloadFileRequest(path="big/file.bin")))
    assert got[0].info.size == len(data) and got[-1].sha256 == digest
    assert b"".join(m.chunk for m in got) == data


@pytest.mark.parametrize(
    ("call", "field", "code"),
    [
        (
            lambda s: s.Exec(R.RockletServiceExecRequest(spec=sandbox_pb2.ExecSpec())),
            "spec.command",
            common_pb2.ERROR_CODE_INVALID_ARGUMENT,
        ),
        (
            lambda s: s.ReadFile(R.RockletServiceReadFileRequest(path="")),
            "path",
            common_pb2.ERROR_CODE_INVALID_ARGUMENT,
        ),
        (
            lambda s: s.ReadFile(R.RockletServiceReadFileRequest(path="/no/such")),
            "path",
            common_pb2.ERROR_CODE_NOT_FOUND,
        ),
        (
            lambda s: s.RunInSession(R.RockletServiceRunInSessionRequest(session_id="nope")),
            "session_id",
            common_pb2.ERROR_CODE_NOT_FOUND,
        ),
        (
            lambda s: s.SignalProcess(R.RockletServiceSignalProcessRequest()),
            "exec_id",
            common_pb2.ERROR_CODE_INVALID_ARGUMENT,
        ),
        (
            lambda s: s.SignalProcess(R.RockletServiceSignalProcessRequest(exec_id="x", signal=99)),
            "signal",
            common_pb2.ERROR_CODE_INVALID_ARGUMENT,
        ),
        (
            lambda s: s.WriteFile(R.RockletServiceWriteFileRequest(path="f", mode=0o70000)),
            "mode",
            common_pb2.ERROR_CODE_INVALID_ARGUMENT,
        ),
        (
            lambda s: s.UploadFile(iter([R.RockletServiceUploadFileRequest(chunk=b"x")])),
            "header",
            common_pb2.ERROR_CODE_INVALID_ARGUMENT,
        ),
        (  # "at most 1 MiB per message" is the contract's limit, enforced (2 MiB was accepted)
            lambda s: s.UploadFile(iter([
                R.RockletServiceUploadFileRequest(header=sandbox_pb2.UploadHeader(path="chunky")),
                R.RockletServiceUploadFileRequest(chunk=b"x" * (1 << 20)),
                R.RockletServiceUploadFileRequest(chunk=b"x" * ((2 << 20) + 1)),
            ])),
            "chunk",
            common_pb2.ERROR_CODE_INVALID_ARGUMENT,
        ),
        (
            lambda s: s.ReadFile(R.RockletServiceReadFileRequest(path="/etc/hostname", limit=(4 << 20) + 1)),
            "limit",
            common_pb2.ERROR_CODE_INVALID_ARGUMENT,
        ),
    ],
)
def test_typed_errors(rocklet_stub, call, field: str, code: int) -> None:
    with pytest.raises(grpc.RpcError) as e:
        call(rocklet_stub)
    detail = error_detail_of(e.value)
    assert (detail.code, detail.field) == (code, field)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    path=st.text(max_size=300),
    session_id=st.text(max_size=80),
    exec_id=st.text(max_size=80),
    command=st.text(max_size=200),
    offset=st.integers(min_value=0, max_value=2**63),
)
def test_fuzzed_requests_never_break_the_server(
    rocklet_stub, path, session_id, exec_id, command, offset
) -> None:
    calls = [
        lambda: rocklet_stub.ReadFile(R.RockletServiceReadFileRequest(path=path, offset=offset, limit=16)),
        lambda: rocklet_stub.ListFiles(R.RockletServiceListFilesRequest(path=path)),
        lambda: rocklet_stub.RunInSession(R.RockletServiceRunInSessionRequest(session_id=session_id)),
        lambda: rocklet_stub.SignalProcess(R.RockletServiceSignalProcessRequest(exec_id=exec_id)),
        lambda: rocklet_stub.Exec(
            R.RockletServiceExecRequest(
                spec=sandbox_pb2.ExecSpec(argv=[command or "true"], timeout_ms=2000), exec_id=exec_id
            )
        ),
    ]
    for call in calls:
        try:
            call()
        except grpc.RpcError as e:
            detail = error_detail_of(e)
            # Typed client errors only: never an INTERNAL/UNKNOWN crash of the server.
            assert detail.code in (
                common_pb2.ERROR_CODE_INVALID_ARGUMENT,
                common_pb2.ERROR_CODE_NOT_FOUND,
            ), (detail, e.details())
    assert rocklet_stub.GetInfo(R.GetInfoRequest()).version


def test_cancelled_stream_stops_its_command(rocklet_stub) -> None:
    spec = sandbox_pb2.ExecSpec(command="while :; do echo tick; sleep 0.05; done")
    stream = rocklet_stub.ExecStream(R.RockletServiceExecStreamRequest(spec=spec, exec_id="stream-1"))
    first = next(stream)
    assert first.WhichOneof("event") == "started"
    assert next(stream).stdout.startswith(b"tick")
    stream.cancel()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            rocklet_stub.SignalProcess(
                R.RockletServiceSignalProcessRequest(exec_id="stream-1", signal=18)
            )  # SIGCONT: harmless probe
        except grpc.RpcError as err:
            assert error_detail_of(err).code == common_pb2.ERROR_CODE_NOT_FOUND
            return
        time.sleep(0.1)
    pytest.fail("the streamed command outlived its cancelled call")
