"""The EnvHub core (plain Python): register / get / list / delete specs, and cached builds.

A build is keyed by (spec hash, backend). ``build`` yields log events; a build whose record is
READY and whose artifact still exists is served from the cache (``cached=True``) without touching
the engine beyond one existence check. Concurrent builds of one hash wait on each other, so the
second finds the first's result in the cache.
"""

from __future__ import annotations

import builtins
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from ale_proto.errors import AleError

from ale_rock.backends.base import EgressRuleModel, Limits, SandboxConfig
from ale_rock.envhub.registry import BuildStatus, Registry, StoredSpec
from ale_rock.envhub.spec import EnvSpecModel

LOCAL_UNSUPPORTED = (
    "local builds need local-backend support: the bubblewrap backend accepts only its default root "
    "(a custom rootfs is refused as INVALID_ARGUMENT spec.image), so there is nothing to cache a "
    "build into yet; build for the docker backend"
)


HubError = AleError
"""A request the hub refuses: ``HubError("NOT_FOUND", message, field=...)`` is the one hierarchy's
class of that code (see :class:`ale_proto.errors.AleError`)."""


class Builder(Protocol):
    """Builds specs for one backend into an artifact a sandbox of that backend can start from."""

    backend: str

    def artifact(self, spec: EnvSpecModel, spec_hash: str) -> str:
        """The artifact name a build of this spec produces."""
        ...

    def exists(self, artifact: str) -> bool:
        """Whether the artifact is still there (images can be removed behind our back)."""
        ...

    def build(self, spec: EnvSpecModel, spec_hash: str, log: Callable[[str], None]) -> str:
        """Build; return the artifact. Raises (``BuildFailed`` with a ``field`` where known)."""
        ...

    def remove(self, artifact: str) -> None:
        """Drop the artifact (best effort)."""
        ...


@dataclass(frozen=True)
class BuildEvent:
    """One message of a build's stream."""

    line: str
    state: BuildStatus
    cached: bool = False
    artifact: str = ""


@dataclass
class _HashLocks:
    lock: threading.Lock = field(default_factory=threading.Lock)
    locks: dict[str, threading.Lock] = field(default_factory=dict)

    def of(self, key: str) -> threading.Lock:
        with self.lock:
            return self.locks.setdefault(key, threading.Lock())


class EnvHub:
    """Specs in a :class:`Registry`, builds by backend name through :class:`Builder` s."""

    def __init__(self, registry: Registry, builders: dict[str, Callable[[], Builder]]) -> None:
        self.registry = registry
        self._factories = builders
        self._builders: dict[str, Builder] = {}
        self._locks = _HashLocks()
        self._init_lock = threading.Lock()

    def builder(self, backend: str) -> Builder:
        """The builder of ``backend`` (created on first use: the docker SDK is imported lazily)."""
        if backend == "local" and backend not in self._factories:
            raise HubError("FAILED_PRECONDITION", LOCAL_UNSUPPORTED, field="backend")
        if backend not in self._factories:
            raise HubError("INVALID_ARGUMENT", f"no builder for backend {backend!r}", field="backend")
        with self._init_lock:
            if backend not in self._builders:
                try:
                    self._builders[backend] = self._factories[backend]()
                except Exception as e:  # noqa: BLE001 - e.g. no engine: the caller gets why
                    raise HubError("UNAVAILABLE", f"{backend} builder unavailable: {e}", field="backend") from e
            return self._builders[backend]

    # -- specs ------------------------------------------------------------------------------------

    def register(self, spec: EnvSpecModel) -> StoredSpec:
        """Register or replace ``name:version``."""
        return self.registry.put(spec)

    def get(self, name: str, version: str = "") -> StoredSpec:
        """One spec, or NOT_FOUND naming ``name`` (or ``version``)."""
        if not name:
            raise HubError("INVALID_ARGUMENT", "name is required", field="name")
        stored = self.registry.get(name, version)
        if stored is None:
            if version and self.registry.get(name) is not None:
                raise HubError("NOT_FOUND", f"env spec {name} has no version {version!r}", field="version")
            raise HubError("NOT_FOUND", f"env spec {name!r} not found", field="name")
        return stored

    def list(self, offset: int = 0, limit: int = 100) -> tuple[builtins.list[StoredSpec], int]:
        """One page of specs and the total."""
        return self.registry.list(offset, limit)

    def delete(self, name: str, version: str = "") -> builtins.list[StoredSpec]:
        """Delete specs; their builds are dropped (and images removed) unless another spec shares
        the same hash."""
        self.get(name, version)  # NOT_FOUND when there is nothing to delete
        gone = self.registry.delete(name, version)
        for stored in gone:
            if self.registry.hash_in_use(stored.spec_hash):
                continue
            for record in self.registry.drop_builds(stored.spec_hash):
                if record.artifact and record.backend in self._factories:
                    try:
                        self.builder(record.backend).remove(record.artifact)
                    except HubError:
                        pass  # the engine is gone: nothing of ours is left on it to remove
        return gone

    def builds(self, stored: StoredSpec) -> dict[str, BuildStatus]:
        """Build state per backend."""
        return self.registry.builds_of(stored.spec_hash)

    # -- builds -----------------------------------------------------------------------------------

    def build(self, name: str, version: str = "", backend: str = "docker", force: bool = False) -> Iterator[BuildEvent]:
        """Build (or find cached) and yield log events; the last one carries the final state.

        Validation errors (unknown spec, unsupported backend) raise before the first event.
        """
        stored = self.get(name, version)
        builder = self.builder(backend)
        events: queue.Queue[BuildEvent | None] = queue.Queue()
        thread = threading.Thread(
            target=self._build_into, args=(stored, builder, force, events), name=f"envhub-build-{name}", daemon=True
        )
        thread.start()
        while True:
            event = events.get()
            if event is None:
                break
            yield event
        thread.join()

    def _build_into(self, stored: StoredSpec, builder: Builder, force: bool, out: queue.Queue[BuildEvent | None]) -> None:
        try:
            with self._locks.of(f"{stored.spec_hash}/{builder.backend}"):
                self._build_locked(stored, builder, force, out)
        except Exception as e:  # noqa: BLE001 - reported as a FAILED event, never lost in a thread
            out.put(BuildEvent(f"error: {e}", BuildStatus.FAILED))
        finally:
            out.put(None)

    def _build_locked(self, stored: StoredSpec, builder: Builder, force: bool, out: queue.Queue[BuildEvent | None]) -> None:
        h, backend = stored.spec_hash, builder.backend
        record = self.registry.build(h, backend)
        if not force and record is not None and record.state is BuildStatus.READY and builder.exists(record.artifact):
            out.put(BuildEvent(f"cached: {record.artifact} (spec hash {h[:12]})", BuildStatus.READY, True, record.artifact))
            return
        artifact = builder.artifact(stored.spec, h)
        if not force and builder.exists(artifact):
            # Built before this registry knew (e.g. a fresh database on the same engine).
            self.registry.set_build(h, backend, BuildStatus.READY, artifact, "found on the engine")
            out.put(BuildEvent(f"cached: {artifact} (spec hash {h[:12]})", BuildStatus.READY, True, artifact))
            return
        log: list[str] = []

        def emit(line: str) -> None:
            log.append(line)
            out.put(BuildEvent(line, BuildStatus.BUILDING))

        self.registry.set_build(h, backend, BuildStatus.BUILDING, artifact)
        emit(f"building {stored.spec.ref} for {backend} (spec hash {h[:12]}) -> {artifact}")
        try:
            artifact = builder.build(stored.spec, h, emit)
        except Exception as e:
            where = getattr(e, "field", "")
            line = f"build failed: {where + ': ' if where else ''}{e}"
            log.append(line)
            self.registry.set_build(h, backend, BuildStatus.FAILED, "", "\n".join(log))
            out.put(BuildEvent(line, BuildStatus.FAILED))
            return
        log.append(f"ready: {artifact}")
        self.registry.set_build(h, backend, BuildStatus.READY, artifact, "\n".join(log))
        out.put(BuildEvent(f"ready: {artifact}", BuildStatus.READY, False, artifact))

    def resolve_image(self, image: str, backend: str = "docker") -> str | None:
        """The built artifact of a ``SandboxSpec.image`` that names a spec (``name`` or
        ``name:version``), or ``None`` when it names no registered spec (then it is a plain image
        reference). FAILED_PRECONDITION when the spec exists but is not built for ``backend``."""
        name, _, version = image.partition(":")
        if not name or self.registry.get(name, version) is None:
            return None
        return self.sandbox_config(name, version, backend).image

    def sandbox_config(self, name: str, version: str = "", backend: str = "docker") -> SandboxConfig:
        """What a backend needs to start a sandbox of a built spec (FAILED_PRECONDITION when it is
        not built: sandboxes start from cached builds only, never build on the hot path)."""
        stored = self.get(name, version)
        record = self.registry.build(stored.spec_hash, backend)
        if record is None or record.state is not BuildStatus.READY:
            raise HubError("FAILED_PRECONDITION", f"{stored.spec.ref} is not built for {backend}; "
                           f"run `ale-rock envhub build {stored.spec.name}` first", field="name")
        spec = stored.spec
        defaults = Limits()
        res = spec.resources
        limits = Limits(
            cpu_millis=res.cpu_millis or defaults.cpu_millis,
            memory_bytes=res.memory_bytes or defaults.memory_bytes,
            disk_bytes=res.disk_bytes or defaults.disk_bytes,
            max_pids=res.max_pids or defaults.max_pids,
            max_open_files=res.max_open_files or defaults.max_open_files,
        )
        allow = [EgressRuleModel(host=r.host, port=r.port) for r in spec.network.allow]
        return SandboxConfig(image=record.artifact, limits=limits, allow=allow, env=dict(spec.env), workdir=spec.workdir)
