"""The typed-error wire convention over a real gRPC server on a real port."""

from __future__ import annotations

from concurrent import futures

import grpc
import pytest
from ale_proto import errors
from ale_proto.v1 import common_pb2, trainer_pb2, trainer_pb2_grpc


class _Trainer(trainer_pb2_grpc.TrainerServiceServicer):
    def GetJob(self, request, context):  # noqa: N802 - gRPC method name
        if not request.job_id:
            errors.abort(context, errors.make_error(common_pb2.ERROR_CODE_INVALID_ARGUMENT, "must be set", "job_id"))
        errors.abort(context, errors.make_error(common_pb2.ERROR_CODE_NOT_FOUND, f"no job {request.job_id}", "job_id"))


@pytest.fixture()
def stub():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trainer_pb2_grpc.add_TrainerServiceServicer_to_server(_Trainer(), server)
    from ale_proto.serving import add_standard_services

    add_standard_services(server, ["ale.v1.TrainerService"])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield trainer_pb2_grpc.TrainerServiceStub(channel), channel
    channel.close()
    server.stop(grace=None)


def test_error_detail_round_trips_with_field(stub) -> None:
    s, _ = stub
    with pytest.raises(grpc.RpcError) as info:
        s.GetJob(trainer_pb2.GetJobRequest(), timeout=5)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    detail = errors.error_detail_of(info.value)
    assert detail.code == common_pb2.ERROR_CODE_INVALID_ARGUMENT
    assert detail.field == "job_id"
    assert "job_id" in info.value.details()


def test_not_found_maps_to_status(stub) -> None:
    s, _ = stub
    with pytest.raises(grpc.RpcError) as info:
        s.GetJob(trainer_pb2.GetJobRequest(job_id="j-1"), timeout=5)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    assert errors.error_detail_of(info.value).message == "no job j-1"


def test_health_and_reflection_are_served(stub) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    _, channel = stub
    health = health_pb2_grpc.HealthStub(channel)
    resp = health.Check(health_pb2.HealthCheckRequest(service="ale.v1.TrainerService"), timeout=5)
    assert resp.status == health_pb2.HealthCheckResponse.SERVING
    refl = reflection_pb2_grpc.ServerReflectionStub(channel)
    answers = list(refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5))
    names = {s.name for s in answers[0].list_services_response.service}
    assert "ale.v1.TrainerService" in names


def test_status_derived_when_no_detail_attached() -> None:
    class _Err(grpc.RpcError):
        def code(self):
            return grpc.StatusCode.UNAVAILABLE

        def details(self):
            return "connection refused"

        def trailing_metadata(self):
            return ()

    d = errors.error_detail_of(_Err())
    assert d.code == common_pb2.ERROR_CODE_UNAVAILABLE and d.message == "connection refused"
