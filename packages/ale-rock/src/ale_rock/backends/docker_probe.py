"""Waiting for a freshly started Rocklet: its socket appears, then it answers ``GetInfo``; and
warming a pooled one up before it is handed out."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import grpc
from ale_proto.v1 import rocklet_pb2, rocklet_pb2_grpc, sandbox_pb2

from ale_rock.grpc_options import channel_options

# gRPC's default reconnect backoff starts at 1 s: far too slow for a server that is about to
# listen. Short backoffs keep create -> first exec close to the container's own start time.
_FAST_RECONNECT = [
    ("grpc.initial_reconnect_backoff_ms", 10),
    ("grpc.min_reconnect_backoff_ms", 10),
    ("grpc.max_reconnect_backoff_ms", 100),
]


def wait_for_rocklet(socket_path: Path, timeout_s: float, alive: Callable[[], bool]) -> None:
    """Return once the Rocklet on ``socket_path`` answers; raise TimeoutError or RuntimeError.

    ``alive`` is checked every few polls so a container that died (bad image, no python3) fails
    fast instead of waiting out the timeout.
    """
    deadline = time.monotonic() + timeout_s
    polls = 0
    while not socket_path.exists():
        polls += 1
        if polls % 50 == 0 and not alive():
            raise RuntimeError("the sandbox exited before its Rocklet listened")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no Rocklet socket at {socket_path} after {timeout_s:.0f}s")
        time.sleep(0.003)
    with grpc.insecure_channel(f"unix:{socket_path}", options=channel_options(extra=_FAST_RECONNECT)) as channel:
        stub = rocklet_pb2_grpc.RockletServiceStub(channel)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the Rocklet at {socket_path} did not answer in {timeout_s:.0f}s")
            try:
                stub.GetInfo(rocklet_pb2.GetInfoRequest(), timeout=min(left, 2.0), wait_for_ready=True)
                return
            except grpc.RpcError as e:
                if e.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise
                if not alive():
                    raise RuntimeError("the sandbox exited before its Rocklet answered") from e


def warm_up_rocklet(socket_path: Path, timeout_s: float) -> None:
    """Run one ``true`` through the Rocklet (``/bin/sh -c``, as every command): the first command
    of a new container reads the shell and its libraries from the container's fresh filesystem
    snapshot and takes the Rocklet's exec path cold (0.5-1 s on a busy 2-core host, 10 ms after),
    a cost a warm slot pays before it is claimed rather than in its claimer's first command."""
    with grpc.insecure_channel(f"unix:{socket_path}", options=channel_options()) as channel:
        stub = rocklet_pb2_grpc.RockletServiceStub(channel)
        req = rocklet_pb2.RockletServiceExecRequest(spec=sandbox_pb2.ExecSpec(command="true"))
        result = stub.Exec(req, timeout=timeout_s).result
    if result.exit_code != 0:
        raise RuntimeError(f"the warm-up command failed: exit {result.exit_code}, {result.stderr[-200:]!r}")
