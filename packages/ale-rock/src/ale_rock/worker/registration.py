"""Registration and heartbeats with the admin; keeps retrying while the admin is down."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import grpc
from ale_proto.v1 import worker_pb2, worker_pb2_grpc

from ale_rock.grpc_options import channel_options
from ale_rock.worker.auth import WORKER_SECRET_METADATA

log = logging.getLogger("ale_rock.worker")


class Registrar:
    """Background thread: register (re-register when the admin forgets us), then heart-beat."""

    def __init__(
        self,
        admin_address: str,
        join_token: str,
        worker_secret: str,
        info: Callable[[], Any],
        heartbeat: Callable[[], Any],
        on_registered: Callable[[set[str]], None],
        interval_s: float,
        retry_s: float,
    ) -> None:
        self._channel = grpc.insecure_channel(admin_address, options=channel_options())
        self._stub = worker_pb2_grpc.WorkerRegistryServiceStub(self._channel)
        self._md = [("authorization", f"Bearer {join_token}")]
        # The worker credential travels once per registration, over the join-token call.
        self._register_md = [*self._md, (WORKER_SECRET_METADATA, worker_secret)]
        self._info = info
        self._heartbeat = heartbeat
        self._on_registered = on_registered
        self.interval_s = interval_s
        self.retry_s = retry_s
        self.registered = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="registrar", daemon=True)
        self.last_error = ""

    def start(self) -> None:
        """Start the loop."""
        self._thread.start()

    def _loop(self) -> None:
        known = False
        while not self._stop.is_set():
            try:
                if not known:
                    info, running = self._info()
                    resp = self._stub.RegisterWorker(
                        worker_pb2.RegisterWorkerRequest(worker=info, running_sandbox_ids=running),
                        metadata=self._register_md,
                        timeout=10,
                    )
                    self._on_registered(set(resp.keep_sandbox_ids))
                    if resp.heartbeat_interval_ms:
                        self.interval_s = resp.heartbeat_interval_ms / 1000
                    known = True
                    self.registered.set()
                    log.info("registered with the admin")
                resp = self._stub.Heartbeat(self._heartbeat(), metadata=self._md, timeout=10)
                if resp.heartbeat_interval_ms:
                    self.interval_s = resp.heartbeat_interval_ms / 1000
                known = bool(resp.known)
                self.last_error = ""
                self._stop.wait(self.interval_s)
            except grpc.RpcError as e:
                self.last_error = f"{e.code()}: {e.details()}"
                log.warning("admin unreachable (%s); retrying", self.last_error)
                if e.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION):
                    known = False
                self._stop.wait(self.retry_s)
            except Exception:  # noqa: BLE001 - never let the loop die
                log.exception("registration loop error")
                self._stop.wait(self.retry_s)

    def stop(self, deregister: bool, worker_id: str) -> None:
        """Stop the loop; tell the admin we leave when asked."""
        self._stop.set()
        self._thread.join(timeout=5)
        if deregister and self.registered.is_set():
            try:
                self._stub.DeregisterWorker(
                    worker_pb2.DeregisterWorkerRequest(worker_id=worker_id), metadata=self._md, timeout=3
                )
            except grpc.RpcError:
                pass
        self._channel.close()
