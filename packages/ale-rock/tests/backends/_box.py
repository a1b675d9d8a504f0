"""A started sandbox seen through a gRPC stub to its Rocklet's Unix socket (backend and red-team tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
from ale_proto.v1 import rocklet_pb2, rocklet_pb2_grpc, sandbox_pb2


class Box:
    """A started sandbox and a stub to its Rocklet; ``backend`` and ``id`` where a test needs them."""

    def __init__(self, socket: Path, backend: Any = None, sandbox_id: str = "") -> None:
        self.backend = backend
        self.id = sandbox_id
        self.channel = grpc.insecure_channel(f"unix:{socket}")
        self.stub = rocklet_pb2_grpc.RockletServiceStub(self.channel)

    def sh(self, command: str, timeout_ms: int = 20000, **spec: Any) -> Any:
        """Run ``command`` through the Rocklet's Exec and return its ExecResult message."""
        req = rocklet_pb2.RockletServiceExecRequest(
            spec=sandbox_pb2.ExecSpec(command=command, timeout_ms=timeout_ms, **spec)
        )
        return self.stub.Exec(req, timeout=timeout_ms / 1000 + 30).result
