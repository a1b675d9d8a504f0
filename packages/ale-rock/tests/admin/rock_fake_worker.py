"""A stand-in Worker for the Admin's tests (a script, run as a real subprocess on a real port).

It speaks the real contract (registers with the join token, heartbeats, serves WorkerService and
a RockletService "proxy" keyed by ``ale-sandbox-id``) but runs commands as plain host processes:
it exercises the Admin's scheduling, state machine and forwarding, not isolation.

Two knobs make it a slow worker under load, from a request's env (the sandbox spec's for
StartSandbox, the ExecSpec's for Exec): ``FAKE_MUTE_S`` stops its heartbeats for that long (it is
too busy to heart-beat, so the Admin declares it lost, and it re-registers when it resumes) and
``FAKE_START_S`` makes StartSandbox take that long.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from ale_proto import errors
from ale_proto.v1 import common_pb2, rocklet_pb2, rocklet_pb2_grpc, sandbox_pb2, worker_pb2, worker_pb2_grpc
from ale_rock.worker.auth import WORKER_SECRET_METADATA, WorkerSecretInterceptor, new_secret

SANDBOXES: dict[str, int] = {}
LOCK = threading.Lock()
MUTE_UNTIL = 0.0
"""No heartbeat before this time.monotonic() (set by FAKE_MUTE_S)."""


def _mute(env: Any) -> None:
    global MUTE_UNTIL
    if seconds := float(env.get("FAKE_MUTE_S", 0) or 0):
        MUTE_UNTIL = time.monotonic() + seconds


def _sandbox(context: grpc.ServicerContext) -> str:
    sid = dict(context.invocation_metadata()).get("ale-sandbox-id", "")
    with LOCK:
        ok = SANDBOXES.get(sid) == sandbox_pb2.SANDBOX_STATE_RUNNING
    if not ok:
        errors.abort(context, errors.make_error(common_pb2.ERROR_CODE_NOT_FOUND, f"no sandbox {sid}", "sandbox_id"))
    return sid


class Worker(worker_pb2_grpc.WorkerServiceServicer):
    def StartSandbox(self, request, context):
        if request.spec.image == "fail":
            return worker_pb2.StartSandboxResponse(state=sandbox_pb2.SANDBOX_STATE_FAILED, message="image 'fail'")
        _mute(request.spec.env)
        time.sleep(float(request.spec.env.get("FAKE_START_S", 0) or 0))
        with LOCK:
            SANDBOXES[request.sandbox_id] = sandbox_pb2.SANDBOX_STATE_RUNNING
        return worker_pb2.StartSandboxResponse(state=sandbox_pb2.SANDBOX_STATE_RUNNING)

    def StopSandbox(self, request, context):
        with LOCK:
            if request.sandbox_id in SANDBOXES:
                SANDBOXES[request.sandbox_id] = sandbox_pb2.SANDBOX_STATE_STOPPED
        return worker_pb2.WorkerServiceStopSandboxResponse()

    def RemoveSandbox(self, request, context):
        with LOCK:
            SANDBOXES.pop(request.sandbox_id, None)
        return worker_pb2.RemoveSandboxResponse()

    def ListWorkerSandboxes(self, request, context):
        with LOCK:
            items = [worker_pb2.WorkerSandboxStatus(sandbox_id=k, state=v) for k, v in SANDBOXES.items()]
        return worker_pb2.ListWorkerSandboxesResponse(sandboxes=items)

    def GetSandboxStats(self, request, context):
        return worker_pb2.WorkerServiceGetSandboxStatsResponse(stats=sandbox_pb2.SandboxStats(pids=1))

    def SetNetworkPolicy(self, request, context):
        return worker_pb2.WorkerServiceSetNetworkPolicyResponse()

    def CommitSandbox(self, request, context):
        return worker_pb2.WorkerServiceCommitSandboxResponse(image=request.name or "snap", size_bytes=1, digest="d")


class Rocklet(rocklet_pb2_grpc.RockletServiceServicer):
    def Exec(self, request, context):
        _sandbox(context)
        spec = request.spec
        _mute(spec.env)
        t0 = time.monotonic()
        try:
            p = subprocess.run(spec.command or list(spec.argv), shell=bool(spec.command), capture_output=True,
                               timeout=(spec.timeout_ms / 1000) or None, input=spec.stdin)
            result = sandbox_pb2.ExecResult(end_reason=sandbox_pb2.EXEC_END_REASON_EXITED, exit_code=p.returncode,
                                            stdout=p.stdout, stderr=p.stderr)
        except subprocess.TimeoutExpired as e:
            result = sandbox_pb2.ExecResult(end_reason=sandbox_pb2.EXEC_END_REASON_TIMEOUT, exit_code=124,
                                            stdout=e.stdout or b"", stderr=e.stderr or b"")
        result.duration_s = time.monotonic() - t0
        return rocklet_pb2.RockletServiceExecResponse(result=result)

    def SignalProcess(self, request, context):
        _sandbox(context)
        return rocklet_pb2.RockletServiceSignalProcessResponse(delivered=False)

    def ExecStream(self, request, context):
        _sandbox(context)
        p = subprocess.Popen(request.spec.command, shell=True, stdout=subprocess.PIPE)
        yield rocklet_pb2.RockletServiceExecStreamResponse(started=sandbox_pb2.ExecStarted(pid=p.pid))
        assert p.stdout is not None
        for line in p.stdout:
            yield rocklet_pb2.RockletServiceExecStreamResponse(stdout=line)
        yield rocklet_pb2.RockletServiceExecStreamResponse(
            exit=sandbox_pb2.ExecResult(end_reason=sandbox_pb2.EXEC_END_REASON_EXITED, exit_code=p.wait()))


def register_loop(admin: str, token: str, info: worker_pb2.WorkerInfo, secret: str) -> None:
    stub = worker_pb2_grpc.WorkerRegistryServiceStub(grpc.insecure_channel(admin))
    md = (("authorization", f"Bearer {token}"),)
    register_md = (*md, (WORKER_SECRET_METADATA, secret))
    registered = False
    while True:
        if time.monotonic() < MUTE_UNTIL:
            time.sleep(0.05)
            continue
        try:
            if not registered:
                with LOCK:
                    running = list(SANDBOXES)
                resp = stub.RegisterWorker(worker_pb2.RegisterWorkerRequest(worker=info, running_sandbox_ids=running),
                                           metadata=register_md, timeout=5)
                keep = set(resp.keep_sandbox_ids)
                with LOCK:
                    for sid in [s for s in SANDBOXES if s not in keep]:
                        SANDBOXES.pop(sid)
                registered = True
            with LOCK:
                statuses = [worker_pb2.WorkerSandboxStatus(sandbox_id=k, state=v) for k, v in SANDBOXES.items()]
            hb = stub.Heartbeat(worker_pb2.HeartbeatRequest(worker_id=info.worker_id, sandboxes=statuses),
                                metadata=md, timeout=5)
            registered = hb.known
        except grpc.RpcError as e:
            print(f"registry: {e.code()}", file=sys.stderr, flush=True)
            if e.code() == grpc.StatusCode.UNAUTHENTICATED:
                sys.exit(3)
        time.sleep(0.2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--admin", required=True)
    ap.add_argument("--secrets", required=True, help="the cluster's 0600 JSON file with the join token")
    ap.add_argument("--id", required=True)
    ap.add_argument("--cpu-millis", type=int, default=8000)
    ap.add_argument("--memory-bytes", type=int, default=16 * 2**30)
    args = ap.parse_args()
    token = json.loads(Path(args.secrets).read_text())["join_token"]
    # Sealed like a real worker: only the admin (which learns the secret at RegisterWorker) gets in.
    secret = new_secret()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), interceptors=[WorkerSecretInterceptor(secret)])
    worker_pb2_grpc.add_WorkerServiceServicer_to_server(Worker(), server)
    rocklet_pb2_grpc.add_RockletServiceServicer_to_server(Rocklet(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    info = worker_pb2.WorkerInfo(
        worker_id=args.id, address=f"127.0.0.1:{port}",
        capacity=common_pb2.Resources(cpu_millis=args.cpu_millis, memory_bytes=args.memory_bytes),
        backends=[sandbox_pb2.SANDBOX_BACKEND_DOCKER],  # it "starts" any image, as a docker worker would
    )
    threading.Thread(target=register_loop, args=(f"127.0.0.1:{args.admin}" if args.admin.isdigit() else args.admin,
                                                  token, info, secret), daemon=True).start()
    server.wait_for_termination()


if __name__ == "__main__":
    main()
