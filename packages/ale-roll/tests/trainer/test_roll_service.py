"""TrainerService over real gRPC: submit an eval job, watch it, list, get, stop, bad config."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
import yaml
from ale_proto.v1 import trainer_pb2, trainer_pb2_grpc
from ale_roll.service import serve_trainer_service

pytest.importorskip("ale_rock.envs", reason="ale-rock (environments) is not installed")
WORDS = [str(i) for i in range(1, 21)] + ["higher", "lower"]
TINY = {"arch": "llama", "vocab_size": 300, "hidden_size": 64, "num_layers": 1, "num_heads": 2, "num_kv_heads": 2,
        "head_dim": 32, "intermediate_size": 128, "max_position_embeddings": 256}


def test_submit_watch_list_stop(tmp_path: Path) -> None:
    server = serve_trainer_service(port=0)
    try:
        with grpc.insecure_channel(server.address) as ch:
            stub = trainer_pb2_grpc.TrainerServiceStub(ch)
            cfg = {"model": {"tiny": TINY, "word_vocab": WORDS}, "eval": {"episodes": 4},
                   "rollout": {"max_new_tokens": 1, "observation_template": "{observation} :"},
                   "metrics": {"tensorboard": False, "plot": False, "progress": False}}
            job = stub.SubmitJob(trainer_pb2.SubmitJobRequest(
                kind=trainer_pb2.JOB_KIND_EVAL, config_yaml=yaml.safe_dump(cfg),
                overrides=[f"output_dir={tmp_path / 'eval'}"]), timeout=30).job
            states = [m.job.state for m in stub.WatchJob(trainer_pb2.WatchJobRequest(job_id=job.job_id), timeout=240)]
            assert states[-1] == trainer_pb2.JOB_STATE_SUCCEEDED, stub.GetJob(
                trainer_pb2.GetJobRequest(job_id=job.job_id), timeout=10).job.message
            got = stub.GetJob(trainer_pb2.GetJobRequest(job_id=job.job_id), timeout=10).job
            assert "eval/success" in got.metrics and got.run_dir == str(tmp_path / "eval")
            assert [j.job_id for j in stub.ListJobs(trainer_pb2.ListJobsRequest(), timeout=10).jobs] == [job.job_id]
            stopped = stub.StopJob(trainer_pb2.StopJobRequest(job_id=job.job_id), timeout=10).job
            assert stopped.job_id == job.job_id

            with pytest.raises(grpc.RpcError) as err:
                stub.SubmitJob(trainer_pb2.SubmitJobRequest(kind=trainer_pb2.JOB_KIND_TRAIN,
                                                            config_yaml="model: {tiny: {}}\nrollout: {batchsize: 2}\n"),
                               timeout=10)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "rollout.batchsize" in err.value.details()
            with pytest.raises(grpc.RpcError) as err:
                stub.GetJob(trainer_pb2.GetJobRequest(job_id="nope"), timeout=10)
            assert err.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        server.stop()
