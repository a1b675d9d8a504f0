"""Bad input, property-based: every malformed request gets a typed error naming the field (never an
internal error), and the Admin keeps serving."""

from __future__ import annotations

import grpc
import pytest
from ale_proto.errors import error_detail_of
from ale_proto.v1 import common_pb2, sandbox_pb2, sandbox_pb2_grpc
from ale_rock import Sandbox
from ale_rock.local_cluster import LocalCluster
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

U32 = st.integers(min_value=0, max_value=2**32 - 1)
U64 = st.integers(min_value=0, max_value=2**64 - 1)
TEXT = st.text(max_size=300)
TYPED = {
    common_pb2.ERROR_CODE_INVALID_ARGUMENT, common_pb2.ERROR_CODE_NOT_FOUND,
    common_pb2.ERROR_CODE_RESOURCE_EXHAUSTED, common_pb2.ERROR_CODE_FAILED_PRECONDITION,
}
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def stub(fake_cluster: LocalCluster) -> sandbox_pb2_grpc.SandboxServiceStub:
    return sandbox_pb2_grpc.SandboxServiceStub(grpc.insecure_channel(fake_cluster.address))


@pytest.fixture(scope="module")
def running(fake_cluster: LocalCluster) -> str:
    return Sandbox.create(client=fake_cluster.client(), cpu=0.01, memory="8Mi").id


def call(stub: sandbox_pb2_grpc.SandboxServiceStub, cluster: LocalCluster, method: str, req: object) -> object:
    md = (("authorization", f"Bearer {cluster.api_key()}"),)
    try:
        return getattr(stub, method)(req, metadata=md, timeout=60)
    except grpc.RpcError as e:
        detail = error_detail_of(e)
        assert detail.code in TYPED, (method, e.code(), e.details())
        if detail.code == common_pb2.ERROR_CODE_INVALID_ARGUMENT:
            assert detail.field, (method, detail)
        return None


resources = st.builds(common_pb2.Resources, cpu_millis=U32, memory_bytes=U64, disk_bytes=U64, max_pids=U32,
                      max_open_files=U32, gpus=U32)
specs = st.builds(
    sandbox_pb2.SandboxSpec, image=st.one_of(st.sampled_from(["", "base:1", "nope:2"]), TEXT), resources=resources,
    workdir=st.one_of(st.just(""), TEXT), ttl_seconds=U32, idle_timeout_seconds=U32,
    backend=st.integers(min_value=0, max_value=5),
    env=st.dictionaries(TEXT, TEXT, max_size=3), labels=st.dictionaries(TEXT, TEXT, max_size=3),
    network=st.builds(sandbox_pb2.NetworkPolicy, allow=st.lists(
        st.builds(sandbox_pb2.EgressRule, host=TEXT, port=U32), max_size=3)),
)


@FUZZ
@given(spec=specs, request_id=TEXT)
def test_fuzz_create(stub: sandbox_pb2_grpc.SandboxServiceStub, fake_cluster: LocalCluster,
                     spec: sandbox_pb2.SandboxSpec, request_id: str) -> None:
    resp = call(stub, fake_cluster, "CreateSandbox",
                sandbox_pb2.CreateSandboxRequest(spec=spec, wait=True, request_id=request_id))
    if resp is not None:  # accepted: clean up so quotas don't fill
        call(stub, fake_cluster, "DeleteSandbox",
             sandbox_pb2.DeleteSandboxRequest(sandbox_id=resp.sandbox.id))  # type: ignore[attr-defined]


exec_specs = st.builds(
    sandbox_pb2.ExecSpec, command=st.one_of(TEXT, st.text(min_size=4097, max_size=5000)),
    argv=st.lists(TEXT, max_size=3), cwd=TEXT, timeout_ms=st.integers(0, 2000),
    env=st.dictionaries(TEXT, TEXT, max_size=2),
)


@FUZZ
@given(sandbox_id=st.one_of(TEXT, st.just("sb-000000000000")), spec=exec_specs, use_running=st.booleans())
def test_fuzz_exec_and_files(stub: sandbox_pb2_grpc.SandboxServiceStub, fake_cluster: LocalCluster, running: str,
                             sandbox_id: str, spec: sandbox_pb2.ExecSpec, use_running: bool) -> None:
    sid = running if use_running else sandbox_id
    if use_running and len(spec.command) <= 4096:
        # the stand-in worker runs commands on the host: only ever `echo` with fuzzed arguments
        args = [*spec.argv] or [spec.command]
        spec.command = ""
        spec.argv[:] = ["echo", *args]
    call(stub, fake_cluster, "Exec", sandbox_pb2.ExecRequest(sandbox_id=sid, spec=spec))
    call(stub, fake_cluster, "ReadFile", sandbox_pb2.ReadFileRequest(sandbox_id=sandbox_id, path=spec.cwd))
    call(stub, fake_cluster, "GetSandbox", sandbox_pb2.GetSandboxRequest(sandbox_id=sandbox_id))
    call(stub, fake_cluster, "SignalProcess", sandbox_pb2.SignalProcessRequest(sandbox_id=sid, exec_id=spec.cwd))


def test_still_serving_after_fuzz(fake_cluster: LocalCluster, running: str) -> None:
    sb = Sandbox(running, fake_cluster.client())
    assert sb.exec(["echo", "alive"]).stdout == "alive\n"
