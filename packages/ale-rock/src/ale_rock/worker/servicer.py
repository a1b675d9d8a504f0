"""WorkerService: the admin's handle on this machine's sandboxes (protobuf only at this edge)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

import grpc
from ale_proto.errors import abort, make_error
from ale_proto.v1 import common_pb2, sandbox_pb2, worker_pb2, worker_pb2_grpc
from google.protobuf import timestamp_pb2

from ale_rock.backends.base import EgressRuleModel, Limits, SandboxBackend, SandboxConfig
from ale_rock.backends.docker_snap import ImageNotFoundError
from ale_rock.egress.admission import Endpoint, rule_problem
from ale_rock.egress.gateway import EgressGateway
from ale_rock.egress.policy import Rule

SANDBOX_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
_MAX_ENV = 256
_MAX_RULES = 256


def _invalid(context: grpc.ServicerContext, field: str, message: str) -> None:
    abort(context, make_error(common_pb2.ERROR_CODE_INVALID_ARGUMENT, message, field))


class SandboxTable:
    """What the worker knows about each sandbox beyond what the backend tracks."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.namespace: dict[str, str] = {}
        self.stopped: set[str] = set()
        self.failed: dict[str, str] = {}
        self.sockets: dict[str, str] = {}
        self.granted: dict[str, Limits] = {}
        """Resources each sandbox asked for (0 = the worker's default), for free-capacity reports."""
        self.removing: set[str] = set()
        """Sandboxes whose removal runs: their processes die on purpose, which is not a crash."""
        self.known: set[str] | None = None
        """Every sandbox the backend holds, kept by StartSandbox and remove so a create needs no
        ``backend.list()`` (a container listing per create on docker); None until first needed."""


class WorkerServicer(worker_pb2_grpc.WorkerServiceServicer):
    """Starts, stops and reaps sandboxes through a backend; egress policy via the gateway."""

    def __init__(
        self,
        backend: SandboxBackend,
        gateway: EgressGateway,
        max_sandboxes: int,
        capacity: Limits,
        on_started: Callable[[str, str], None] | None = None,
        on_removed: Callable[[str], None] | None = None,
    ) -> None:
        self.backend = backend
        self.gateway = gateway
        self.max_sandboxes = max_sandboxes
        self.capacity = capacity
        self.table = SandboxTable()
        self._on_started = on_started or (lambda _sid, _sock: None)
        self._on_removed = on_removed or (lambda _sid: None)
        self._start_lock = threading.Lock()
        self._starting: dict[str, threading.Event] = {}
        """Sandboxes whose StartSandbox runs (set when it ends). Their container or directory may
        already be listed while their main process is not up yet: that is not a crash."""
        self._starts_ended = 0
        """Starts that ended so far: a "not running" read while this changed may have raced one."""
        self.egress_protected: list[Endpoint] = []
        """ALE services (host, port) no egress rule may name (this worker, the admin, the proxy)."""

    # -- helpers -------------------------------------------------------------------------------

    def _check_id(self, context: grpc.ServicerContext, sandbox_id: str, must_exist: bool = True) -> None:
        if not SANDBOX_ID.match(sandbox_id):
            _invalid(context, "sandbox_id", f"must match {SANDBOX_ID.pattern}")
        if must_exist and sandbox_id not in self.backend.list():
            abort(
                context,
                make_error(
                    common_pb2.ERROR_CODE_NOT_FOUND, f"no sandbox {sandbox_id!r} on this worker", "sandbox_id"
                ),
            )

    def config_of(self, spec: Any, context: grpc.ServicerContext) -> SandboxConfig:
        """SandboxSpec -> SandboxConfig, with each bad field named."""
        r = spec.resources
        for name, value, cap in (
            ("cpu_millis", r.cpu_millis, self.capacity.cpu_millis),
            ("memory_bytes", r.memory_bytes, self.capacity.memory_bytes),
        ):
            if cap and value > cap:
                _invalid(context, f"spec.resources.{name}", f"{value} exceeds this worker's capacity {cap}")
        if r.gpus:
            _invalid(context, "spec.resources.gpus", "this worker has no GPUs")
        if r.max_pids > 1_000_000 or r.max_open_files > 1_048_576:
            _invalid(context, "spec.resources.max_pids", "pids or open files out of range")
        if len(spec.env) > _MAX_ENV or any(not k or "=" in k or "\0" in k + v for k, v in spec.env.items()):
            _invalid(context, "spec.env", f"at most {_MAX_ENV} variables with names without '=' or NUL")
        rules = self.rules_of(spec.network, context, "spec.network.allow")
        workdir = spec.workdir or "/workspace"
        if (
            not workdir.startswith("/")
            or "\0" in workdir
            or len(workdir) > 1024
            or ".." in workdir.split("/")
        ):
            _invalid(context, "spec.workdir", "must be an absolute path without '..'")
        return SandboxConfig(
            image=spec.image,
            limits=Limits(
                cpu_millis=r.cpu_millis,
                memory_bytes=r.memory_bytes,
                disk_bytes=r.disk_bytes,
                max_pids=r.max_pids,
                max_open_files=r.max_open_files,
            ),
            allow=[EgressRuleModel(host=rule.host, port=rule.port) for rule in rules],
            env=dict(spec.env),
            workdir=workdir,
            read_only_root=spec.read_only_root,
            labels=dict(spec.labels),
            ttl_seconds=max(spec.ttl_seconds, 0),
        )

    def rules_of(self, policy: Any, context: grpc.ServicerContext, field: str) -> list[Rule]:
        """NetworkPolicy -> rules; the host itself and ALE's ports are refused (re-checked here
        whatever the admin let through)."""
        if len(policy.allow) > _MAX_RULES:
            _invalid(context, field, f"at most {_MAX_RULES} rules")
        rules = []
        for i, rule in enumerate(policy.allow):
            if not rule.host or len(rule.host) > 253 or any(c.isspace() for c in rule.host):
                _invalid(context, f"{field}[{i}].host", "a host name, an IP address or '*'")
            if rule.port > 65535:
                _invalid(context, f"{field}[{i}].port", "a port in 0..65535")
            if problem := rule_problem(rule.host, rule.port, self.egress_protected):
                _invalid(context, f"{field}[{i}]", problem)
            rules.append(Rule(host=rule.host, port=rule.port))
        return rules

    def starting(self) -> set[str]:
        """Ids of the sandboxes being started now."""
        with self._start_lock:
            return set(self._starting)

    def _running_states(self) -> dict[str, bool | None]:
        """Each sandbox the backend holds -> whether it runs, when the backend can say so for all
        in one go (docker: one container listing instead of an inspect per sandbox), else None."""
        states = getattr(self.backend, "running_states", None)
        if states is not None:
            return dict(states())
        return dict.fromkeys(self.backend.list())

    def status_of(self, sandbox_id: str, running: bool | None = None) -> tuple[Any, str]:
        """(SandboxState, message) of one sandbox. ``running`` is a listing's word for it: "runs"
        is taken, "does not run" (rare: a crash) is asked again, fresh."""
        with self._start_lock:
            if sandbox_id in self._starting:
                return sandbox_pb2.SANDBOX_STATE_PENDING, ""
        lost = getattr(self.backend, "lost_reason", None)  # kubernetes: a pod evicted or deleted
        if lost is not None and (why := lost(sandbox_id)):
            return sandbox_pb2.SANDBOX_STATE_LOST, why
        with self.table.lock:
            if sandbox_id in self.table.failed:
                return sandbox_pb2.SANDBOX_STATE_FAILED, self.table.failed[sandbox_id]
            if sandbox_id in self.table.stopped:
                return sandbox_pb2.SANDBOX_STATE_STOPPED, ""
        if running or self._runs_fresh(sandbox_id):
            return sandbox_pb2.SANDBOX_STATE_RUNNING, ""
        return sandbox_pb2.SANDBOX_STATE_FAILED, "the sandbox's main process exited"

    def _runs_fresh(self, sandbox_id: str) -> bool:
        """Whether the sandbox runs, asked now; True also when a start began or ended around the
        question (its "not running" may be the start's, which is not a crash)."""
        with self._start_lock:
            if sandbox_id in self._starting:
                return True
            ended = self._starts_ended
        if self.backend.is_running(sandbox_id):
            return True
        with self._start_lock:
            return sandbox_id in self._starting or self._starts_ended != ended

    def statuses(self) -> list[Any]:
        """WorkerSandboxStatus of every sandbox."""
        out = []
        for sid, running in self._running_states().items():
            state, message = self.status_of(sid, running)
            with self.table.lock:  # checked after the read: a removal that began before it shows here
                if sid in self.table.removing:
                    continue  # going away at the admin's request: nothing to report
            out.append(worker_pb2.WorkerSandboxStatus(sandbox_id=sid, state=state, message=message))  # type: ignore[arg-type]
        return out

    def reap_crashed(self) -> list[str]:
        """Kill what is left of sandboxes whose main process died; they stay listed as FAILED."""
        crashed = []
        for sid, running in self._running_states().items():
            with self.table.lock:
                known = sid in self.table.stopped or sid in self.table.failed
            # A sandbox being started is not up yet: stopping it would kill the start half-way.
            if known or running or self._runs_fresh(sid):
                continue
            with self.table.lock:
                if sid in self.table.removing:  # checked after the read, as in statuses()
                    continue
            try:
                self.backend.stop(sid, 0)
            except KeyError:
                continue
            with self.table.lock:
                self.table.failed[sid] = "the sandbox's main process exited"
            crashed.append(sid)
        return crashed

    def _known(self, resync: bool = False) -> set[str]:
        """The worker's count of its sandboxes (call under ``_start_lock``): from the backend's
        listing the first time and when ``resync``, kept up to date by StartSandbox and remove."""
        with self.table.lock:
            known = self.table.known
        if known is None or resync:
            listed = set(self.backend.list())
            with self.table.lock:
                self.table.known = known = listed
        return known

    def remove(self, sandbox_id: str) -> None:
        """Remove a sandbox and forget it everywhere."""
        with self.table.lock:
            self.table.removing.add(sandbox_id)
        try:
            self.backend.remove(sandbox_id)
        finally:
            with self.table.lock:
                self.table.removing.discard(sandbox_id)
        with self.table.lock:
            if self.table.known is not None:
                self.table.known.discard(sandbox_id)
        self.gateway.forget(sandbox_id)
        self._on_removed(sandbox_id)
        with self.table.lock:
            self.table.namespace.pop(sandbox_id, None)
            self.table.stopped.discard(sandbox_id)
            self.table.failed.pop(sandbox_id, None)
            self.table.sockets.pop(sandbox_id, None)
            self.table.granted.pop(sandbox_id, None)

    # -- RPCs ----------------------------------------------------------------------------------

    def StartSandbox(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        sid = request.sandbox_id
        self._check_id(context, sid, must_exist=False)
        config = self.config_of(request.spec, context)
        config.namespace = request.namespace  # scopes the images it may start from and its commits
        with self._start_lock:
            running_start = self._starting.get(sid)
        if running_start is not None:  # a repeated request: answer with the first one's outcome
            running_start.wait(context.time_remaining() if context is not None else None)
        # No listing per create: the worker's own count answers; the backend's listing is asked
        # only for a repeated id (an idempotent retry) or at the limit, so neither check loosens.
        with self._start_lock:
            repeated = sid in self._known() and sid in self._known(resync=True)
        if repeated:
            state, message = self.status_of(sid)
            return worker_pb2.StartSandboxResponse(state=state, message=message)  # type: ignore[arg-type]
        with self._start_lock:
            if sid in self._starting:
                abort(context, make_error(common_pb2.ERROR_CODE_ALREADY_EXISTS, f"sandbox {sid} is being started",
                                          "sandbox_id"))
            full = len(self._known()) + len(self._starting) >= self.max_sandboxes
            if full and len(self._known(resync=True)) + len(self._starting) >= self.max_sandboxes:
                abort(
                    context,
                    make_error(
                        common_pb2.ERROR_CODE_RESOURCE_EXHAUSTED,
                        f"this worker holds its maximum of {self.max_sandboxes} sandboxes",
                        max_sandboxes=str(self.max_sandboxes),
                    ),
                )
            done = self._starting[sid] = threading.Event()
        try:
            resp = self._start(sid, config, request.namespace, context)
        finally:
            # Only now may heartbeats and the crash reaper judge it (see ``_starting``).
            with self._start_lock:
                self._starting.pop(sid, None)
                self._starts_ended += 1
            done.set()
        if resp is None:  # it existed already
            state, message = self.status_of(sid)
            return worker_pb2.StartSandboxResponse(state=state, message=message)  # type: ignore[arg-type]
        return resp

    def _start(self, sid: str, config: SandboxConfig, namespace: str, context: grpc.ServicerContext) -> Any:
        try:
            handle = self.backend.start(sid, config)
        except ImageNotFoundError as e:  # another namespace's snapshot reads as absent
            abort(context, make_error(common_pb2.ERROR_CODE_NOT_FOUND, str(e), "spec.image"))
        except ValueError as e:
            field, _, message = str(e).partition(": ")
            _invalid(context, f"spec.{field}" if message else "spec", message or str(e))
        except FileExistsError:
            return None  # the caller answers with its status
        except Exception as e:  # noqa: BLE001 - reported to the admin as FAILED
            return worker_pb2.StartSandboxResponse(
                state=sandbox_pb2.SANDBOX_STATE_FAILED, message=f"{type(e).__name__}: {e}"
            )
        rules = [Rule(r.host, r.port) for r in config.allow]
        self.gateway.register(sid, handle.extra.get("egress_token", ""), rules)
        with self.table.lock:
            if self.table.known is not None:
                self.table.known.add(sid)
            self.table.namespace[sid] = namespace
            self.table.sockets[sid] = str(handle.rocklet_socket)
            self.table.granted[sid] = config.limits
        self._on_started(sid, str(handle.rocklet_socket))
        return worker_pb2.StartSandboxResponse(state=sandbox_pb2.SANDBOX_STATE_RUNNING)

    def StopSandbox(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        self._check_id(context, request.sandbox_id)
        grace = (request.grace_period_ms or 5000) / 1000
        # Marked first: while its processes die, heartbeats and the crash reaper must see a stop,
        # not a crash (the Admin would record FAILED for a sandbox its client stopped).
        with self.table.lock:
            self.table.stopped.add(request.sandbox_id)
        try:
            self.backend.stop(request.sandbox_id, min(grace, 600.0))
        except BaseException:
            with self.table.lock:
                self.table.stopped.discard(request.sandbox_id)
            raise
        return worker_pb2.WorkerServiceStopSandboxResponse()

    def RemoveSandbox(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        self._check_id(context, request.sandbox_id, must_exist=False)
        self.remove(request.sandbox_id)
        return worker_pb2.RemoveSandboxResponse()

    def ListWorkerSandboxes(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        return worker_pb2.ListWorkerSandboxesResponse(sandboxes=self.statuses())

    def CommitSandbox(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        self._check_id(context, request.sandbox_id)
        if request.format == sandbox_pb2.COMMIT_FORMAT_IMAGE and self.backend.name == "local":
            _invalid(context, "format", "the local backend commits archives only")
        if not request.name or len(request.name) > 200 or "\0" in request.name:
            _invalid(context, "name", "a name of 1..200 characters")
        image, size, digest = self.backend.commit(request.sandbox_id, request.name)
        return worker_pb2.WorkerServiceCommitSandboxResponse(image=image, size_bytes=size, digest=digest)

    def GetSandboxStats(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        self._check_id(context, request.sandbox_id)
        u = self.backend.usage(request.sandbox_id)
        count, events = self.gateway.safety.get(request.sandbox_id)
        now = timestamp_pb2.Timestamp()
        now.GetCurrentTime()
        stats = sandbox_pb2.SandboxStats(
            cpu_seconds=u.cpu_seconds,
            memory_bytes=u.memory_bytes,
            memory_peak_bytes=u.memory_peak_bytes,
            pids=u.pids,
            disk_bytes=u.disk_bytes,
            safety_event_count=count,
            time=now,
        )
        for e in events:
            ts = timestamp_pb2.Timestamp()
            ts.FromNanoseconds(int(e.time * 1e9))
            stats.recent_safety_events.add(
                kind=common_pb2.SafetyEvent.KIND_EGRESS_BLOCKED, time=ts, command=e.command, detail=e.detail
            )
        return worker_pb2.WorkerServiceGetSandboxStatsResponse(stats=stats)

    def SetNetworkPolicy(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        self._check_id(context, request.sandbox_id)
        self.gateway.set_policy(request.sandbox_id, self.rules_of(request.policy, context, "policy.allow"))
        return worker_pb2.WorkerServiceSetNetworkPolicyResponse()
