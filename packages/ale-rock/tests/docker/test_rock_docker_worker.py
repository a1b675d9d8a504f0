"""A real Worker on a real port driving the Docker backend exactly as it drives the local one:
WorkerService starts the sandbox, RockletService calls go through the worker's proxy."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import grpc
import pytest
from ale_proto.v1 import rocklet_pb2, rocklet_pb2_grpc, sandbox_pb2, worker_pb2, worker_pb2_grpc

pytestmark = pytest.mark.docker


def test_worker_with_docker_backend(base_image, docker_ps) -> None:
    from ale_rock.worker.auth import worker_channel
    from ale_rock.worker.config import WorkerConfig
    from ale_rock.worker.server import serve_worker

    wid = f"dw{uuid.uuid4().hex[:8]}"
    state = Path("/tmp/ale-dt") / wid
    worker = serve_worker(WorkerConfig(backend="docker", state_dir=state, worker_id=wid, max_sandboxes=4))
    channel = worker_channel(worker.address, worker.secret)
    ws, rs = worker_pb2_grpc.WorkerServiceStub(channel), rocklet_pb2_grpc.RockletServiceStub(channel)
    md = [("ale-sandbox-id", "dk1")]
    try:
        started = ws.StartSandbox(
            worker_pb2.StartSandboxRequest(sandbox_id="dk1", spec=sandbox_pb2.SandboxSpec(env={"A": "1"})),
            timeout=120,
        )
        assert started.state == sandbox_pb2.SANDBOX_STATE_RUNNING, started.message
        # Started cold or claimed from the warm pool: the container is the worker's either way.
        assert started.state == sandbox_pb2.SANDBOX_STATE_RUNNING and docker_ps(f"ale.worker={wid}")
        spec = sandbox_pb2.ExecSpec(command="echo $A; id -u; exit 3")
        res = rs.Exec(rocklet_pb2.RockletServiceExecRequest(spec=spec), metadata=md, timeout=60).result
        assert (res.stdout, res.exit_code) == (b"1\n1000\n", 3)
        up = rs.UploadFile(
            iter(
                [
                    rocklet_pb2.RockletServiceUploadFileRequest(
                        header=sandbox_pb2.UploadHeader(path="u.txt")
                    ),
                    rocklet_pb2.RockletServiceUploadFileRequest(chunk=b"abc"),
                ]
            ),
            metadata=md,
            timeout=60,
        )
        assert up.size == 3
        read = rs.ReadFile(rocklet_pb2.RockletServiceReadFileRequest(path="u.txt"), metadata=md, timeout=60)
        assert read.data == b"abc"
        with pytest.raises(grpc.RpcError) as bad:
            ws.StartSandbox(
                worker_pb2.StartSandboxRequest(
                    sandbox_id="dk2", spec=sandbox_pb2.SandboxSpec(image="ale-no-such-image:never")
                ),
                timeout=120,
            )
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "spec.image" in str(
            bad.value.details()
        )
        ws.RemoveSandbox(worker_pb2.RemoveSandboxRequest(sandbox_id="dk1"), timeout=120)
        assert ws.ListWorkerSandboxes(worker_pb2.ListWorkerSandboxesRequest(), timeout=30).sandboxes == []
    except grpc.RpcError as e:
        pytest.fail(f"{e.code()}: {e.details()}")
    finally:
        channel.close()
        worker.stop(grace_s=1)
        assert docker_ps(f"ale.worker={wid}") == []
        shutil.rmtree(state, ignore_errors=True)
