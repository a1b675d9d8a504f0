"""TrainerService (ale.v1): submit, get, list, watch and stop training jobs over gRPC.

Each job runs in its own thread of the serving process (one event loop per job); status and the
latest numeric metrics are kept in memory. `StopJob` asks the controller to stop after its current
step; it then writes its final checkpoint (the `force` flag is accepted, and the job is marked
stopped either way). Protobuf types stay in this module.
"""

from __future__ import annotations

import threading
import time
import uuid
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
import yaml
from ale_proto import serving
from ale_proto.config import parse_mapping
from ale_proto.v1 import trainer_pb2, trainer_pb2_grpc

from ale_roll.config import ConfigError, RunConfig, build_config

_KINDS: dict[Any, str] = {trainer_pb2.JOB_KIND_TRAIN: "train", trainer_pb2.JOB_KIND_SFT: "sft", trainer_pb2.JOB_KIND_EVAL: "eval"}
_STATES = {"queued": trainer_pb2.JOB_STATE_QUEUED, "running": trainer_pb2.JOB_STATE_RUNNING,
           "succeeded": trainer_pb2.JOB_STATE_SUCCEEDED, "failed": trainer_pb2.JOB_STATE_FAILED,
           "stopped": trainer_pb2.JOB_STATE_STOPPED}


@dataclass
class JobRecord:
    """A job's plain-Python status."""

    job_id: str
    kind: Any
    """A trainer_pb2.JobKind value."""
    cfg: RunConfig
    state: str = "queued"
    step: int = 0
    metrics: dict[str, float] = field(default_factory=dict)
    message: str = ""
    submit_time: float = field(default_factory=time.time)
    update_time: float = field(default_factory=time.time)
    controller: Any = None
    stop_requested: bool = False

    def to_pb(self) -> trainer_pb2.Job:
        job = trainer_pb2.Job(job_id=self.job_id, kind=self.kind, state=_STATES[self.state], step=self.step,
                              total_steps=self.cfg.iterations if self.kind != trainer_pb2.JOB_KIND_SFT else self.cfg.sft.steps,
                              metrics=self.metrics, message=self.message, run_dir=self.cfg.output_dir)
        job.submit_time.FromNanoseconds(int(self.submit_time * 1e9))
        job.update_time.FromNanoseconds(int(self.update_time * 1e9))
        return job


class TrainerServicer(trainer_pb2_grpc.TrainerServiceServicer):
    """Jobs in threads; state guarded by one condition variable (watchers wait on it)."""

    def __init__(self) -> None:
        self._jobs: dict[str, JobRecord] = {}
        self._cond = threading.Condition()

    def _update(self, job: JobRecord, **changes: Any) -> None:
        with self._cond:
            for k, v in changes.items():
                setattr(job, k, v)
            job.update_time = time.time()
            self._cond.notify_all()

    def _run(self, job: JobRecord) -> None:
        def on_step(step: int, metrics: dict[str, Any]) -> None:
            numeric = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}
            self._update(job, step=step, metrics=numeric)

        self._update(job, state="running")
        try:
            kind = _KINDS[job.kind]
            if kind == "sft":
                from ale_roll.trainer.sft import run_sft

                result = run_sft(job.cfg, on_step=on_step)
            else:
                from ale_roll.trainer.controller import placed_controller

                # cluster.mode=ray: the roles run as Ray actors for the job, torn down after it.
                with placed_controller(job.cfg, on_step=on_step) as ctl:
                    self._update(job, controller=ctl)
                    if job.stop_requested:
                        ctl.stop_requested = True
                    if kind == "train":
                        result = ctl.run()
                    else:
                        import asyncio

                        ctl.resume()
                        result = asyncio.run(ctl.evaluate_only())
                        on_step(ctl.step, result)
            self._update(job, state="stopped" if job.stop_requested else "succeeded",
                         message=yaml.safe_dump(result, default_flow_style=True, width=10_000).strip()[:2000])
        except Exception as e:  # a failed job is reported, the service keeps serving
            self._update(job, state="failed", message=f"{type(e).__name__}: {e}")

    def SubmitJob(self, request: trainer_pb2.SubmitJobRequest, context: Any) -> trainer_pb2.SubmitJobResponse:
        if request.kind not in _KINDS:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "kind must be TRAIN, SFT or EVAL")
        try:
            raw = parse_mapping(request.config_yaml, "config_yaml")  # one-line errors with line:column
            overrides = list(request.overrides)
            if request.resume_from:
                overrides += [f"output_dir={request.resume_from}", "checkpoint.resume=true"]
            cfg = build_config(raw, overrides, source="config_yaml")
        except ConfigError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        job = JobRecord(uuid.uuid4().hex[:12], request.kind, cfg)
        with self._cond:
            self._jobs[job.job_id] = job
        threading.Thread(target=self._run, args=(job,), name=f"job-{job.job_id}", daemon=True).start()
        return trainer_pb2.SubmitJobResponse(job=job.to_pb())

    def _get(self, job_id: str, context: Any) -> JobRecord:
        with self._cond:
            job = self._jobs.get(job_id)
        if job is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no job {job_id!r}")
        assert job is not None
        return job

    def GetJob(self, request: trainer_pb2.GetJobRequest, context: Any) -> trainer_pb2.GetJobResponse:
        return trainer_pb2.GetJobResponse(job=self._get(request.job_id, context).to_pb())

    def ListJobs(self, request: trainer_pb2.ListJobsRequest, context: Any) -> trainer_pb2.ListJobsResponse:
        with self._cond:
            jobs = sorted(self._jobs.values(), key=lambda j: -j.submit_time)
            return trainer_pb2.ListJobsResponse(jobs=[j.to_pb() for j in jobs])

    def WatchJob(self, request: trainer_pb2.WatchJobRequest, context: Any) -> Any:
        job = self._get(request.job_id, context)
        seen = -1.0
        while context.is_active():
            with self._cond:
                if job.update_time == seen:
                    self._cond.wait(timeout=1.0)
                if job.update_time == seen:
                    continue
                seen = job.update_time
                msg = trainer_pb2.WatchJobResponse(job=job.to_pb())
                done = job.state in ("succeeded", "failed", "stopped")
            yield msg
            if done:
                return

    def StopJob(self, request: trainer_pb2.StopJobRequest, context: Any) -> trainer_pb2.StopJobResponse:
        job = self._get(request.job_id, context)
        self._update(job, stop_requested=True)
        if job.controller is not None:
            job.controller.stop_requested = True
        return trainer_pb2.StopJobResponse(job=job.to_pb())


@dataclass
class TrainerServer:
    """A running TrainerService."""

    server: grpc.Server
    port: int
    host: str

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def stop(self, grace: float = 1.0) -> None:
        self.server.stop(grace).wait(grace + 5)

    def wait(self) -> None:
        self.server.wait_for_termination()


def serve_trainer_service(host: str = "127.0.0.1", port: int = 0) -> TrainerServer:
    """Start a TrainerService and return it running."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="trainer-rpc"), options=[serving.NO_REUSEPORT], interceptors=serving.strict_requests())
    trainer_pb2_grpc.add_TrainerServiceServicer_to_server(TrainerServicer(), server)
    try:  # health + reflection, so supervisors (`ale up`) can wait for SERVING
        from ale_proto.serving import add_standard_services

        add_standard_services(server, [trainer_pb2.DESCRIPTOR.services_by_name["TrainerService"].full_name])
    except ImportError:  # ale-proto without its [server] extra: serve without them
        pass
    bound = serving.bind(server, f"{host}:{port}")
    server.start()
    return TrainerServer(server, bound, host)
