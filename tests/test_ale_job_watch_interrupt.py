"""SIGTERM (or Ctrl-C) while `ale up` follows a trainer job ends the command and the watch.

`ale up` spends most of its time inside `watch_job`, blocked on the TrainerService's `WatchJob`
stream between two updates (an evaluation sends none for a minute or more). Here a real gRPC
TrainerService on a real port keeps the stream open without sending anything, and the client is a
separate process, terminated as a user would: it must exit with 130 and the server must see the
stream end. (Written while chasing an `ale up` that hung in `_ChannelCallState.__del__` after two
SIGTERMs under heavy load; that hang did not reproduce, here or with `ale up` itself.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from ale_proto.v1 import trainer_pb2, trainer_pb2_grpc

CLIENT = r"""
import sys
from ale.interrupts import sigterm_interrupts
from ale.job.pipeline import watch_job

class Progress:
    def stage(self, name, total=None): pass
    def update(self, done, **fields):
        print("watching", flush=True)

try:
    with sigterm_interrupts():
        watch_job(sys.argv[1], "name: x", [], Progress(), timeout_s=600)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""


class SilentTrainer(trainer_pb2_grpc.TrainerServiceServicer):
    """Accepts a job, reports it running once, then keeps the watch open without a word."""

    def __init__(self) -> None:
        self.watch_ended = threading.Event()

    def SubmitJob(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC method name
        return trainer_pb2.SubmitJobResponse(job=trainer_pb2.Job(job_id="job-1", state=trainer_pb2.JOB_STATE_RUNNING))

    def WatchJob(self, request: Any, context: Any) -> Iterator[Any]:  # noqa: N802 - gRPC method name
        yield trainer_pb2.WatchJobResponse(job=trainer_pb2.Job(job_id="job-1", state=trainer_pb2.JOB_STATE_RUNNING,
                                                               step=1))
        try:
            while context.is_active():
                time.sleep(0.05)
        finally:
            self.watch_ended.set()


@pytest.fixture
def silent_trainer() -> Iterator[tuple[str, SilentTrainer]]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    servicer = SilentTrainer()
    trainer_pb2_grpc.add_TrainerServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}", servicer
    finally:
        server.stop(grace=None)


def test_sigterm_while_watching_a_trainer_job_ends_the_process(silent_trainer: tuple[str, SilentTrainer]) -> None:
    address, servicer = silent_trainer
    proc = subprocess.Popen([sys.executable, "-c", CLIENT, address], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "watching", line + proc.stdout.read() if proc.poll() is not None else line
        time.sleep(0.5)  # inside the stream's wait, as `ale up` is between two trainer updates
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)  # hung here for good before the fix
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 130 and "interrupted" in out, out
    # The stream was cancelled, not left to the server's deadline.
    assert servicer.watch_ended.wait(10)
