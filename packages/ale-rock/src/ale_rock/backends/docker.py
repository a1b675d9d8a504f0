"""The Docker backend: each sandbox is a locked-down container whose main process is the Rocklet.

Every container is created unprivileged with all capabilities dropped, ``no-new-privileges``,
``--network none`` (loopback only: the Rocklet's egress goes through the worker's gateway over a
bound-in Unix socket), a non-root uid, memory (no swap), CPU and pids limits, file-size/open-file
ulimits, and optionally a read-only root. The sandbox's host dir (``<root_dir>/<id>``) holds the
socket dir bound at ``/run/ale``, the Rocklet's settings bound read-only at ``/run/ale-conf`` and,
with a read-only root, the work dir. The Rocklet's Python dependencies come from the worker's own
venv, bound read-only (see ``docker_runtime.py``), so any image with Debian's python3.11 works.

Every container carries the labels ``ale.backend`` and ``ale.worker`` (plus ``ale.sandbox_id`` for
cold starts; a warm-pool container cannot be relabelled when claimed), so workers sharing an engine
never touch each other's containers. A cold start's container is named ``ale-<worker>-<sandbox_id>``;
a claimed warm slot keeps its slot name, and the backend's sandbox -> container map, persisted in
each host dir (``docker_index.py``), says which is which, so a restarted worker finds (``list``,
``handle``) and reaps (``reap_orphans``) what it left. Warm pools (``pool_size``, wired in
``docker_warm.py``) hide the Rocklet's start-up time; a claim makes no engine call.

The docker SDK is an optional dependency (``pip install ale-rock[docker]``), imported lazily.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import uuid
from pathlib import Path
from typing import Any

from ale_proto.errors import InternalError, SandboxNotFound

from ale_rock.backends.base import SandboxConfig, SandboxHandle, Usage
from ale_rock.backends.docker_config import DockerBackendConfig, _check_id, _check_workdir, _with_defaults
from ale_rock.backends.docker_disk import DiskQuotaUnsupported, layer_size, probe_quota, seal, unmount_under
from ale_rock.backends.docker_images import ImageCache
from ale_rock.backends.docker_index import (
    Entry,
    SandboxIndex,
    _dir_size,
    _read_namespace,
    _read_settings,
    _write_namespace,
    write_entry,
)
from ale_rock.backends.docker_pool import POOL_PREFIX
from ale_rock.backends.docker_probe import wait_for_rocklet
from ale_rock.backends.docker_runtime import (
    CONF_DIR,
    ROCKLET_SOCKET_NAME,
    SETTINGS_NAME,
    SOCKET_DIR,
    RockletRuntime,
    discover_runtime,
    write_settings,
)
from ale_rock.backends.docker_snap import (
    LABEL_SNAP_NAMESPACE,
    ImageNotFoundError,
    foreign_snapshot,
    snapshot_ref,
)
from ale_rock.backends.docker_spec import EGRESS_DIR, container_kwargs, prepare_host_dir
from ale_rock.backends.docker_warm import LABEL_SANDBOX, WarmPoolMixin
from ale_rock.backends.docker_workdir import commit_with_workdir

__all__ = ["DockerBackend", "DockerBackendConfig", "DockerBackendError", "SandboxNotFound"]

LABEL_BACKEND = "ale.backend"
LABEL_WORKER = "ale.worker"
LABEL_USER_PREFIX = "ale.label."
log = logging.getLogger(__name__)
_MAX_UNIX_PATH = 107  # sun_path holds 108 bytes including the terminating NUL


class DockerBackendError(InternalError, RuntimeError):
    """The engine refused or failed an operation (the message carries the engine's reason)."""


def _docker() -> Any:
    try:
        import docker
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError("the docker backend needs the docker SDK: pip install 'ale-rock[docker]'") from e
    return docker


class DockerBackend(WarmPoolMixin):
    """Sandboxes as Docker containers (see the module docstring for the isolation guarantees)."""

    name = "docker"

    def __init__(self, config: DockerBackendConfig | None = None) -> None:
        self.config = config or DockerBackendConfig()
        docker = _docker()
        kwargs: dict[str, Any] = {"max_pool_size": 64}
        if self.config.docker_host:
            self._client = docker.DockerClient(base_url=self.config.docker_host, **kwargs)
        else:
            self._client = docker.from_env(**kwargs)
        self._api = self._client.api
        self._errors = docker.errors
        self._types = docker.types
        self._runtime: RockletRuntime = discover_runtime()
        self.root = self.config.resolved_root()
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o711)
        self._quota_lock = threading.Lock()
        self._quota: tuple[str, bool] | None = None  # (storage driver, size opt works), probed once
        # Image ids from memory while subscribed to the engine's image events (warm claims only:
        # a cold start costs the engine far more than one inspect).
        self._images = ImageCache(self._api, enabled=self.config.pool_size > 0)
        self._images.start()
        self._index = SandboxIndex(self.root)  # sandbox id -> container, from the host dirs
        self._pool = self._make_pool()
        self._pool.start()

    # -- naming -----------------------------------------------------------------------------------

    def _container_name(self, key: str) -> str:
        return f"ale-{self.config.worker}-{key}"

    def _host_dir(self, key: str) -> Path:
        return self.root / key

    def _labels(self) -> dict[str, str]:
        return {LABEL_BACKEND: "docker", LABEL_WORKER: self.config.worker}

    def _ref(self, sandbox_id: str) -> str:
        """The engine's name for the sandbox's container: its id when known, else its cold name."""
        entry = self._index.get(sandbox_id)
        if entry is not None and not entry.starting:
            return entry.container_id or self._container_name(entry.key)
        return self._container_name(sandbox_id)

    def _inspect(self, sandbox_id: str) -> dict[str, Any] | None:
        _check_id(sandbox_id)
        try:
            info: dict[str, Any] = self._api.inspect_container(self._ref(sandbox_id))
        except self._errors.NotFound:
            return None
        return info

    def _require(self, sandbox_id: str) -> dict[str, Any]:
        info = self._inspect(sandbox_id)
        if info is None:
            raise SandboxNotFound(f"sandbox {sandbox_id} not found on docker worker {self.config.worker}")
        return info

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self, sandbox_id: str, config: SandboxConfig) -> SandboxHandle:
        """Claim a warm sandbox or create one; return once its Rocklet answers on the socket."""
        _check_id(sandbox_id)
        if len(str(self._host_dir(sandbox_id) / "sock" / ROCKLET_SOCKET_NAME)) > _MAX_UNIX_PATH:
            raise ValueError(
                f"sandbox_id: {sandbox_id!r} is too long for a Unix socket path under {self.root}"
            )
        _check_workdir(config.workdir)
        config = config.model_copy(update={"limits": _with_defaults(config.limits)})
        self._check_image(config.image, config.namespace)
        self._reserve(sandbox_id)
        try:
            shutil.rmtree(self._host_dir(sandbox_id), ignore_errors=True)  # debris of a crashed start
            handle = self._claim_warm(sandbox_id, config)
            if handle is not None:
                return handle
            labels = {LABEL_SANDBOX: sandbox_id}
            labels.update({LABEL_USER_PREFIX + k: v for k, v in config.labels.items()})
            self._index.put(sandbox_id, self._launch(sandbox_id, config, labels))
            return self.handle(sandbox_id)
        except BaseException:
            entry = self._index.get(sandbox_id)
            if entry is not None and entry.starting:
                self._index.pop(sandbox_id)
            raise

    def _reserve(self, sandbox_id: str) -> None:
        """Mark ``sandbox_id`` as starting (from memory: the map knows every sandbox of this worker);
        FileExistsError when it exists. Only a known id asks the engine (debris of a crash?)."""
        if self._index.reserve(sandbox_id):
            return
        entry = self._index.get(sandbox_id)
        if entry is None or entry.starting or self._inspect(sandbox_id) is not None:
            raise FileExistsError(f"sandbox {sandbox_id} exists")
        self._index.pop(sandbox_id)  # its container is gone: what is left is debris
        if not self._index.reserve(sandbox_id):
            raise FileExistsError(f"sandbox {sandbox_id} exists")

    def _check_image(self, image: str, namespace: str) -> None:
        """Another namespace's snapshot does not exist for this one (by tag, id or digest)."""
        if not image:
            return
        if foreign_snapshot(image, namespace):
            raise ImageNotFoundError(f"image: unknown image {image!r}")
        try:
            labels = self._images.get(image).labels
        except self._errors.NotFound:
            return  # _launch reports the unknown image
        owner = labels.get(LABEL_SNAP_NAMESPACE)
        if owner is not None and owner != namespace:
            raise ImageNotFoundError(f"image: unknown image {image!r}")

    def _layer_bytes(self, image: str, disk_bytes: int) -> int | None:
        """The container's ``size`` storage option, or None (fallback) where the engine has none."""
        with self._quota_lock:
            if self._quota is None:
                self._quota = probe_quota(self._api, self._errors, image)
        driver, supported = self._quota
        if not supported:
            if self.config.disk_quota == "require":
                raise DiskQuotaUnsupported(
                    f"the Docker engine's storage driver {driver!r} cannot cap a container's disk "
                    "(--storage-opt size=), so disk_bytes would not bind: run the engine with "
                    "scripts/docker_engine.sh (btrfs), or set disk_quota='per_file' to accept a "
                    "per-file cap only"
                )
            log.warning("storage driver %s: disk_bytes caps each file only (disk_quota=per_file)", driver)
            return None
        return layer_size(driver, self._images.get(image).size, disk_bytes)

    def _launch(self, key: str, config: SandboxConfig, labels: dict[str, str]) -> Entry:
        """Create and start container ``ale-<worker>-<key>``, record it in its host dir
        (``container.json``) and wait for its Rocklet; return its :class:`Entry`."""
        image = config.image or self.config.base_image
        host_dir = self._host_dir(key)
        uid, gid = self.config.resolved_user()
        try:
            layer_bytes = self._layer_bytes(image, config.limits.disk_bytes)
        except self._errors.ImageNotFound as e:
            raise ValueError(f"image: unknown image {image!r} ({_reason(e)})") from e
        try:
            binds = prepare_host_dir(host_dir, config, uid, gid)
        except OSError as e:
            self._cleanup(key)
            raise DockerBackendError(f"cannot prepare sandbox {key}'s host dir: {e}") from e
        sock = host_dir / "sock" / ROCKLET_SOCKET_NAME
        with contextlib.suppress(FileNotFoundError):
            sock.unlink()
        _write_namespace(host_dir, config.namespace)
        write_settings(host_dir / "conf" / SETTINGS_NAME, self._settings(config, uuid.uuid4().hex))
        kwargs = container_kwargs(
            self._api,
            self._types,
            self._runtime,
            name=self._container_name(key),
            image=image,
            command=self._runtime.argv(self.config.rocklet_module, self._rocklet_args()),
            config=config,
            binds=binds,
            egress_socket=self.config.egress_socket,
            labels={**self._labels(), **labels},
            uid=uid,
            gid=gid,
            init=self.config.init,
            tmp_size_bytes=self.config.tmp_size_bytes,
            layer_bytes=layer_bytes,
        )
        try:
            container = str(self._api.create_container(**kwargs)["Id"])
            entry = Entry(key=key, container_id=container, image=image)
            write_entry(host_dir, entry)  # before start: a restarted worker must find it
            self._api.start(container)
        except self._errors.ImageNotFound as e:
            self._cleanup(key)
            raise ValueError(f"image: unknown image {image!r} ({_reason(e)})") from e
        except (self._errors.APIError, OSError) as e:
            self._cleanup(key)
            raise DockerBackendError(f"cannot start sandbox {key}: {_reason(e)}") from e
        try:
            wait_for_rocklet(sock, self.config.start_timeout_s, alive=lambda: self._alive(container))
        except Exception as e:
            logs = self._logs(container)
            self._cleanup(key)
            raise DockerBackendError(f"sandbox {key}: the Rocklet did not come up: {e}\n{logs}") from e
        # From here on the sandbox cannot add, swap or remove entries of its socket dir.
        seal(host_dir / "sock")
        return entry

    def handle(self, sandbox_id: str) -> SandboxHandle:
        """The handle of an existing sandbox (also after a worker restart: the host dirs are the
        map). From memory for a known sandbox; the engine is asked only about an unknown id."""
        _check_id(sandbox_id)
        entry = self._index.get(sandbox_id)
        if entry is None or entry.starting or not entry.container_id:
            info = self._require(sandbox_id)
            entry = Entry(key=entry.key if entry else sandbox_id, container_id=str(info["Id"]),
                          image=str(info["Config"].get("Image", "")))
        host_dir = self._host_dir(sandbox_id)
        return SandboxHandle(
            sandbox_id=sandbox_id,
            rocklet_socket=host_dir / "sock" / ROCKLET_SOCKET_NAME,
            host_dir=host_dir,
            extra={
                "container_id": entry.container_id,
                "image": entry.image,
                "egress_token": str(_read_settings(host_dir).get("egress_token", "")),
            },
        )

    def _rocklet_args(self) -> list[str]:
        return [
            "--socket",
            f"{SOCKET_DIR}/{ROCKLET_SOCKET_NAME}",
            "--settings",
            f"{CONF_DIR}/{SETTINGS_NAME}",
        ]

    def _settings(self, config: SandboxConfig, token: str) -> dict[str, Any]:
        egress = ""
        if self.config.egress_socket is not None:
            egress = f"{EGRESS_DIR}/{self.config.egress_socket.name}"
        return {
            "workdir": config.workdir,
            "env": dict(config.env),
            "egress_socket": egress,
            "egress_token": token,
            "own_sandbox": True,  # the container's own pid namespace
        }

    def settings_path(self, sandbox_id: str) -> Path:
        """Host path of the Rocklet's settings file (the Rocklet re-reads it when it changes)."""
        _check_id(sandbox_id)
        return self._host_dir(sandbox_id) / "conf" / SETTINGS_NAME

    def _alive(self, container_id: str) -> bool:
        try:
            state = self._api.inspect_container(container_id)["State"]
        except self._errors.NotFound:
            return False
        return bool(state.get("Running"))

    def _logs(self, container_id: str) -> str:
        try:
            out = self._api.logs(container_id, tail=40)
        except self._errors.APIError:
            return ""
        return out.decode(errors="replace") if isinstance(out, bytes) else str(out)

    def stop(self, sandbox_id: str, grace_s: float = 5.0) -> None:
        """SIGTERM the container's processes, SIGKILL after ``grace_s``; keep its files."""
        info = self._require(sandbox_id)
        if info["State"].get("Running"):
            with contextlib.suppress(self._errors.NotFound):
                self._api.stop(info["Id"], timeout=max(0, int(round(grace_s))))

    def remove(self, sandbox_id: str) -> None:
        """Force-remove the container (and its anonymous volumes) and the host dir. Idempotent."""
        _check_id(sandbox_id)
        ref = self._ref(sandbox_id)
        self._remove_container(ref, sandbox_id)
        self._remove_dir(sandbox_id)
        self._index.pop(sandbox_id)

    def _cleanup(self, key: str) -> None:
        """Remove container ``ale-<worker>-<key>`` and host dir ``<root>/<key>`` (a warm slot, or a
        start that failed before it was a sandbox)."""
        self._remove_container(self._container_name(key), key)
        self._remove_dir(key)

    def _remove_container(self, ref: str, what: str) -> None:
        try:
            self._api.remove_container(ref, v=True, force=True)
        except self._errors.NotFound:
            pass
        except self._errors.APIError as e:
            # 409 Conflict: with force=True the one conflict is "removal already in progress".
            if e.status_code != 409:
                raise DockerBackendError(f"cannot remove sandbox {what}: {_reason(e)}") from e

    def _remove_dir(self, name: str) -> None:
        host_dir = self._host_dir(name)
        unmount_under(host_dir)  # the socket tmpfs, a read-only root's work dir
        shutil.rmtree(host_dir, ignore_errors=True)

    def _list_containers(self) -> dict[str, str]:
        """key -> container id for every container of this worker (pool slots included)."""
        return {key: cid for key, (cid, _, _) in self._containers_running().items()}

    def _containers_running(self) -> dict[str, tuple[str, bool, str]]:
        """key -> (container id, running, engine state) for every container of this worker: one
        engine call."""
        filters = {"label": [f"{k}={v}" for k, v in self._labels().items()]}
        prefix = "/" + self._container_name("")
        out: dict[str, tuple[str, bool, str]] = {}
        for c in self._api.containers(all=True, filters=filters):
            state = str(c.get("State", ""))
            for name in c.get("Names") or []:
                if name.startswith(prefix):
                    out[name[len(prefix) :]] = (c["Id"], state == "running", state)
        return out

    def is_running(self, sandbox_id: str) -> bool:
        """True while the container runs."""
        info = self._inspect(sandbox_id)
        return bool(info and info["State"].get("Running"))

    def usage(self, sandbox_id: str) -> Usage:
        """CPU, memory, pids from the engine's stats; disk = the container's writable layer."""
        info = self._require(sandbox_id)
        usage = Usage()
        if info["State"].get("Running"):
            stats = self._api.stats(info["Id"], stream=False, one_shot=True)
            cpu = stats.get("cpu_stats", {}).get("cpu_usage", {})
            mem = stats.get("memory_stats", {})
            usage.cpu_seconds = cpu.get("total_usage", 0) / 1e9
            usage.memory_bytes = int(mem.get("usage", 0))
            usage.memory_peak_bytes = int(mem.get("max_usage", 0)) or usage.memory_bytes
            usage.pids = int(stats.get("pids_stats", {}).get("current", 0))
        rows = self._api.containers(all=True, size=True, filters={"id": info["Id"]})
        usage.disk_bytes = int(rows[0].get("SizeRw", 0)) if rows else 0
        work = self._host_dir(sandbox_id) / "work"
        if work.is_dir():
            usage.disk_bytes += _dir_size(work)
        return usage

    def commit(self, sandbox_id: str, name: str) -> tuple[str, int, str]:
        """``docker commit`` the container (plus a bound work dir) as the sandbox namespace's
        snapshot ``ale-snap/<namespace>/<name>:<tag>``; returns (image, size, id).

        Never tags anything outside ``ale-snap/`` (the base image and other tags are safe) nor
        over another namespace's snapshot.
        """
        info = self._require(sandbox_id)
        namespace = _read_namespace(self._host_dir(sandbox_id))
        ref = snapshot_ref(namespace, name)
        repo, _, tag = ref.rpartition(":")
        try:
            owner = (self._api.inspect_image(ref)["Config"].get("Labels") or {}).get(LABEL_SNAP_NAMESPACE)
        except self._errors.NotFound:
            owner = None
        if owner is not None and owner != namespace:
            raise DockerBackendError(f"cannot commit sandbox {sandbox_id}: {ref} belongs to another namespace")
        # The image must not inherit this sandbox's identity labels.
        labels = {k: "" for k in (info["Config"].get("Labels") or {})}
        conf = {"Labels": {**labels, "ale.committed_from": sandbox_id, LABEL_SNAP_NAMESPACE: namespace}}
        work = self._host_dir(sandbox_id) / "work"
        try:
            if work.is_dir():
                base = self._api.commit(info["Id"], conf=conf)["Id"]  # untagged: a step, not a result
                workdir = info["Config"].get("WorkingDir") or "/workspace"
                image_id = commit_with_workdir(self._api, base, ref, work, workdir, conf)
            else:
                image_id = self._api.commit(info["Id"], repository=repo, tag=tag, conf=conf)["Id"]
            image = self._api.inspect_image(image_id)
        except self._errors.APIError as e:
            raise DockerBackendError(f"cannot commit sandbox {sandbox_id}: {_reason(e)}") from e
        finally:
            # Before returning: the next create of ``ref`` must see the new id, whenever the
            # engine's tag event arrives.
            self._images.invalidate()
        return ref, int(image.get("Size", 0)), str(image["Id"])

    def reap_orphans(self, keep: set[str]) -> list[str]:
        """Remove this worker's containers and host dirs whose sandbox is not in ``keep``.

        Warm pool slots of this backend object are kept; those of a previous process are reaped.
        Returns the sandbox ids removed (pool slots are not sandboxes and are not listed).
        """
        pool = self._pool.keys()
        kept = {sid: e for sid, e in self._index.items() if sid in keep}
        # Containers by their name key (a kept sandbox's is its slot's or its own id); host dirs
        # by sandbox id. A dir is never removed for a container's sake or the other way round.
        live_keys = pool | keep | {e.key for e in kept.values() if not e.starting}
        doomed_containers = {key for key in self._list_containers() if key not in live_keys}
        doomed_dirs: set[str] = set()
        if self.root.is_dir():
            doomed_dirs = {p.name for p in self.root.iterdir() if p.name not in pool | keep}
        for key in sorted(doomed_containers):
            self._remove_container(self._container_name(key), key)
        for name in sorted(doomed_dirs):
            self._remove_dir(name)
            self._index.pop(name)
        doomed = doomed_dirs | doomed_containers
        return sorted(k for k in doomed if not k.startswith(POOL_PREFIX))

    def close(self) -> None:
        """Discard the warm pool and close the engine connection (sandboxes keep running)."""
        self._pool.close(self.config.start_timeout_s)
        self._images.close()
        self._client.close()

    # Last in the class body: below this point `list` names the method, not the builtin.
    def running_states(self) -> dict[str, bool]:
        """Each of this worker's sandboxes (as :meth:`list`) -> whether its container runs, from
        one engine call: what a heartbeat needs, instead of an ``inspect`` per sandbox."""
        # A container the engine is removing is gone for the worker: after a slow removal returns
        # it can stay listed for seconds, and heartbeats would report it to an Admin that deleted it.
        present = {k: v for k, v in self._containers_running().items() if v[2] != "removing"}
        entries = [(sid, e) for sid, e in self._index.items() if not e.starting]
        out = {sid: present[e.key][1] for sid, e in entries if e.key in present}
        mapped = {e.key for _, e in entries}
        out.update({k: run for k, (_, run, _) in present.items() if k not in mapped and not k.startswith(POOL_PREFIX)})
        return out

    def list(self) -> list[str]:
        """Ids of this worker's sandboxes (running or stopped; warm pool slots are not listed):
        the engine's containers of this worker, each named by the map (a claimed slot by its
        sandbox id) or, unknown to the map, by its container name."""
        return sorted(self.running_states())


def _reason(e: Exception) -> str:
    return str(getattr(e, "explanation", None) or e)
