"""The Docker backend: each sandbox is a locked-down container whose main process is the Rocklet.

Every container is created unprivileged with all capabilities dropped, ``no-new-privileges``,
``--network none`` (loopback only: the Rocklet's egress goes through the worker's gateway over a
bound-in Unix socket), a non-root uid, memory (no swap), CPU and pids limits, file-size/open-file
ulimits, and optionally a read-only root. The sandbox's host dir (``<root_dir>/<id>``) holds the
socket dir bound at ``/run/ale``, the Rocklet's settings bound read-only at ``/run/ale-conf`` and,
with a read-only root, the work dir. The Rocklet's Python dependencies come from the worker's own
venv, bound read-only (see ``docker_runtime.py``), so any image with Debian's python3.11 works.

The engine is the source of truth: every container carries the labels ``ale.backend`` and
``ale.worker`` (plus ``ale.sandbox_id`` for cold starts; a warm-pool container cannot be relabelled
when claimed) and is named ``ale-<worker>-<sandbox_id>``, so a restarted worker finds (``list``,
``handle``) and reaps (``reap_orphans``) what it left, and workers sharing an engine never touch
each other's containers. A warm pool (``pool_size``) hides the Rocklet's start-up time.

The docker SDK is an optional dependency (``pip install ale-rock[docker]``), imported lazily.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import socket
import threading
import uuid
from pathlib import Path
from typing import Any, Literal

from ale_proto.errors import InternalError, SandboxNotFound
from pydantic import BaseModel, ConfigDict, Field

from ale_rock.backends.base import Limits, SandboxConfig, SandboxHandle, Usage
from ale_rock.backends.docker_disk import DiskQuotaUnsupported, layer_size, probe_quota, seal, unmount_under
from ale_rock.backends.docker_pool import POOL_PREFIX, WarmPools
from ale_rock.backends.docker_probe import wait_for_rocklet
from ale_rock.backends.docker_runtime import (
    CONF_DIR,
    ROCKLET_SOCKET_NAME,
    SETTINGS_NAME,
    SOCKET_DIR,
    RockletRuntime,
    default_base_image,
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
from ale_rock.backends.docker_workdir import commit_with_workdir

LABEL_BACKEND = "ale.backend"
LABEL_WORKER = "ale.worker"
LABEL_SANDBOX = "ale.sandbox_id"
LABEL_POOL = "ale.pool"
LABEL_USER_PREFIX = "ale.label."
log = logging.getLogger(__name__)
_MAX_UNIX_PATH = 107  # sun_path holds 108 bytes including the terminating NUL
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class DockerBackendError(InternalError, RuntimeError):
    """The engine refused or failed an operation (the message carries the engine's reason)."""


def _docker() -> Any:
    try:
        import docker
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError("the docker backend needs the docker SDK: pip install 'ale-rock[docker]'") from e
    return docker


def _default_worker() -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname()) or "worker"
    return name[:63]


class DockerBackendConfig(BaseModel):
    """Settings of the Docker backend (one per worker)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["docker"] = "docker"
    """Discriminator for the backend union."""
    worker: str = Field(default_factory=_default_worker, pattern=_NAME_RE.pattern)
    """This worker's name: the ``ale.worker`` label, so workers sharing an engine never reap
    each other's containers."""
    base_image: str = Field(default_factory=default_base_image)
    """Image used when a sandbox asks for "" (built by ``scripts/build_base_image.sh``)."""
    root_dir: Path | None = None
    """Host dir for per-sandbox state; default ``/tmp/ale-docker/<worker>``."""
    docker_host: str = ""
    """Engine address (``unix:///var/run/docker.sock``); "" = ``DOCKER_HOST`` or the default."""
    user: str = ""
    """``uid:gid`` inside; "" = 1000:1000 for a root worker, else the worker's own uid:gid (so
    the worker can always reach the Rocklet's socket)."""
    rocklet_module: str = "ale_rock.rocklet"
    """Module run with ``python3 -m`` as the container's main process."""
    egress_socket: Path | None = None
    """The worker's EgressService socket; its directory is bound read-only at
    ``/run/ale-egress`` (a directory, so a restarted gateway's new socket is seen)."""
    start_timeout_s: float = Field(default=60.0, gt=0)
    """How long ``start`` waits for the Rocklet to answer."""
    tmp_size_bytes: int = Field(default=256 * 2**20, gt=0)
    """Size of the ``/tmp`` tmpfs when the root is read-only."""
    init: bool = True
    """Run Docker's init (tini) as pid 1, so orphaned processes are reaped and signals forwarded."""
    pool_size: int = Field(default=2, ge=0, le=32)
    """Pre-started sandboxes always kept warm for the default shape (base image, ``pool_limits``);
    0 turns every warm pool off. A request is served from the pool of its shape (image, limits)
    when it asks for the default work dir and a writable root; env and labels may differ. Claimed
    sandboxes keep the container's ``ale.sandbox_id`` label empty (labels are immutable): the
    container name is the identity."""
    pool_limits: Limits = Field(default_factory=Limits)
    """Limits of the default shape's pooled sandboxes."""
    pool_max: int = Field(default=8, ge=0, le=64)
    """Most warm sandboxes of one shape: every shape (the default included) keeps as many as it
    was asked for in the last ``pool_window_s``, up to this."""
    pool_max_total: int = Field(default=16, ge=0, le=256)
    """Most warm sandboxes over all shapes (they hold memory while idle)."""
    pool_window_s: float = Field(default=30.0, gt=0)
    """How far back demand is counted; a surplus slot idle this long is discarded."""
    pool_refillers: int = Field(default=2, ge=1, le=16)
    """Warm sandboxes started in parallel, so back-to-back creates do not outrun the refill."""
    disk_quota: Literal["require", "per_file"] = "require"
    """How ``disk_bytes`` binds. ``require``: the container's layer gets ``--storage-opt size=``
    (btrfs, zfs, overlay2 on xfs+pquota: ``scripts/docker_engine.sh`` starts such an engine); an
    engine that cannot do it makes every start fail with :class:`DiskQuotaUnsupported`.
    ``per_file``: an explicit opt-in to the weak fallback on such engines, an ``fsize`` ulimit
    only (a sandbox can fill the engine's disk with many files); logged at every start."""

    def resolved_root(self) -> Path:
        """The per-worker host dir."""
        return self.root_dir or Path("/tmp/ale-docker") / self.worker

    def resolved_user(self) -> tuple[int, int]:
        """(uid, gid) of the sandbox's processes."""
        if self.user:
            uid, _, gid = self.user.partition(":")
            return int(uid), int(gid or uid)
        if os.getuid() == 0:
            return 1000, 1000
        return os.getuid(), os.getgid()


class DockerBackend:
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
        self._pool = WarmPools(
            self._launch_warm,
            self._cleanup,
            floors={shape: self.config.pool_size} if (shape := self._floor_shape()) else {},
            max_per_shape=max(self.config.pool_max, self.config.pool_size),
            max_total=max(self.config.pool_max_total, self.config.pool_size),
            window_s=self.config.pool_window_s,
            refillers=self.config.pool_refillers,
            enabled=self.config.pool_size > 0,
        )
        self._pool.start()

    # -- naming -----------------------------------------------------------------------------------

    def _container_name(self, key: str) -> str:
        return f"ale-{self.config.worker}-{key}"

    def _host_dir(self, key: str) -> Path:
        return self.root / key

    def _labels(self) -> dict[str, str]:
        return {LABEL_BACKEND: "docker", LABEL_WORKER: self.config.worker}

    def _inspect(self, sandbox_id: str) -> dict[str, Any] | None:
        _check_id(sandbox_id)
        try:
            info: dict[str, Any] = self._api.inspect_container(self._container_name(sandbox_id))
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
        if self._inspect(sandbox_id) is not None:
            raise FileExistsError(f"sandbox {sandbox_id} exists")
        shutil.rmtree(self._host_dir(sandbox_id), ignore_errors=True)  # debris of a crashed start
        shape = self._shape(config) if self._poolable(config) else None
        if shape is not None:
            key = self._pool.claim(shape)
            if key is not None:
                try:
                    return self._adopt(key, sandbox_id, config)
                except Exception:  # noqa: BLE001 - a broken warm sandbox: fall back to a cold start
                    self._cleanup(key)
                    self._cleanup(sandbox_id)
                finally:
                    self._pool.release(key)
        labels = {LABEL_SANDBOX: sandbox_id}
        labels.update({LABEL_USER_PREFIX + k: v for k, v in config.labels.items()})
        self._launch(sandbox_id, config, labels)
        return self.handle(sandbox_id)

    def _check_image(self, image: str, namespace: str) -> None:
        """Another namespace's snapshot does not exist for this one (by tag, id or digest)."""
        if not image:
            return
        if foreign_snapshot(image, namespace):
            raise ImageNotFoundError(f"image: unknown image {image!r}")
        try:
            labels = self._api.inspect_image(image)["Config"].get("Labels") or {}
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
        image_size = int(self._api.inspect_image(image).get("Size", 0))
        return layer_size(driver, image_size, disk_bytes)

    def _poolable(self, config: SandboxConfig) -> bool:
        # Env, labels and namespace are applied at claim time; everything fixed at container
        # creation (image, limits, work dir binding, read-only root) is the shape or excluded.
        return self.config.pool_size > 0 and config.workdir == SandboxConfig().workdir and not config.read_only_root

    def _pool_shape(self) -> SandboxConfig:
        return SandboxConfig(image=self.config.base_image, limits=_with_defaults(self.config.pool_limits))

    def _shape(self, config: SandboxConfig) -> tuple[str, str, str] | None:
        """The pool key of a (defaulted) config: image name, the image id it names now, limits.

        The id is part of the key so a re-tagged image (a snapshot committed again under the same
        name) is never served from containers of its previous content. None: no such image.
        """
        image = config.image or self.config.base_image
        try:
            image_id = str(self._api.inspect_image(image)["Id"])
        except self._errors.APIError:
            return None
        return (image, image_id, config.limits.model_dump_json())

    def _floor_shape(self) -> tuple[str, str, str] | None:
        """The default shape, or None when the engine cannot tell yet (no image, engine down):
        then it is pooled on demand only, like any other shape."""
        if self.config.pool_size == 0:
            return None
        try:
            return self._shape(self._pool_shape())
        except Exception:  # noqa: BLE001 - a backend must construct without a reachable engine
            log.warning("warm pool: cannot resolve the base image %s yet", self.config.base_image)
            return None

    def _launch_warm(self, key: str, shape: object) -> None:
        assert isinstance(shape, tuple)
        image, image_id, limits = (str(x) for x in shape)
        config = SandboxConfig(image=image, limits=Limits.model_validate_json(limits))
        self._launch(key, config, {LABEL_SANDBOX: "", LABEL_POOL: "1"})
        # Started by name (so it reports the same image as a fresh sandbox): the name must still
        # have meant the shape's image, else the slot would serve other content.
        if self._api.inspect_container(self._container_name(key)).get("Image") != image_id:
            raise DockerBackendError(f"image {image!r} changed while warm slot {key} started")

    def _launch(self, key: str, config: SandboxConfig, labels: dict[str, str]) -> None:
        """Create and start container ``ale-<worker>-<key>`` and wait for its Rocklet."""
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
            container = self._api.create_container(**kwargs)["Id"]
            self._api.start(container)
        except self._errors.ImageNotFound as e:
            self._cleanup(key)
            raise ValueError(f"image: unknown image {image!r} ({_reason(e)})") from e
        except self._errors.APIError as e:
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

    def _adopt(self, key: str, sandbox_id: str, config: SandboxConfig) -> SandboxHandle:
        """Turn warm slot ``key`` into ``sandbox_id``: new settings, container name and host dir."""
        src = self._host_dir(key)
        token = _read_settings(src).get("egress_token", "") or uuid.uuid4().hex
        # The Rocklet re-reads its settings on the next call: the sandbox's env applies from the
        # very first command.
        write_settings(src / "conf" / SETTINGS_NAME, self._settings(config, token))
        (src / "labels.json").write_text(json.dumps(config.labels))
        _write_namespace(src, config.namespace)
        self._api.rename(self._container_name(key), self._container_name(sandbox_id))
        # The container's bind mounts follow the directory, whatever its host path becomes.
        os.rename(src, self._host_dir(sandbox_id))
        return self.handle(sandbox_id)

    def handle(self, sandbox_id: str) -> SandboxHandle:
        """The handle of an existing sandbox (also after a worker restart: the engine is the state)."""
        info = self._require(sandbox_id)
        host_dir = self._host_dir(sandbox_id)
        return SandboxHandle(
            sandbox_id=sandbox_id,
            rocklet_socket=host_dir / "sock" / ROCKLET_SOCKET_NAME,
            host_dir=host_dir,
            extra={
                "container_id": str(info["Id"]),
                "image": str(info["Config"].get("Image", "")),
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
        self._cleanup(sandbox_id)

    def _cleanup(self, sandbox_id: str) -> None:
        host_dir = self._host_dir(sandbox_id)
        try:
            self._api.remove_container(self._container_name(sandbox_id), v=True, force=True)
        except self._errors.NotFound:
            pass
        except self._errors.APIError as e:
            # 409 Conflict: with force=True the one conflict is "removal already in progress".
            if e.status_code != 409:
                raise DockerBackendError(f"cannot remove sandbox {sandbox_id}: {_reason(e)}") from e
        unmount_under(host_dir)  # the socket tmpfs, a read-only root's work dir
        shutil.rmtree(host_dir, ignore_errors=True)

    def _list_containers(self) -> dict[str, str]:
        """key -> container id for every container of this worker (pool slots included)."""
        filters = {"label": [f"{k}={v}" for k, v in self._labels().items()]}
        prefix = "/" + self._container_name("")
        out: dict[str, str] = {}
        for c in self._api.containers(all=True, filters=filters):
            for name in c.get("Names") or []:
                if name.startswith(prefix):
                    out[name[len(prefix) :]] = c["Id"]
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
        return ref, int(image.get("Size", 0)), str(image["Id"])

    def reap_orphans(self, keep: set[str]) -> list[str]:
        """Remove this worker's containers and host dirs whose sandbox is not in ``keep``.

        Warm pool slots of this backend object are kept; those of a previous process are reaped.
        Returns the sandbox ids removed (pool slots are not sandboxes and are not listed).
        """
        live = self._pool.keys() | keep
        doomed = {key for key in self._list_containers() if key not in live}
        if self.root.is_dir():
            doomed |= {p.name for p in self.root.iterdir() if p.name not in live}
        for key in sorted(doomed):
            self._cleanup(key)
        return sorted(k for k in doomed if not k.startswith(POOL_PREFIX))

    def close(self) -> None:
        """Discard the warm pool and close the engine connection (sandboxes keep running)."""
        self._pool.close(self.config.start_timeout_s)
        self._client.close()

    # Last in the class body: below this point `list` names the method, not the builtin.
    def list(self) -> list[str]:
        """Ids of this worker's sandboxes (running or stopped; warm pool slots are not listed)."""
        return sorted(k for k in self._list_containers() if not k.startswith(POOL_PREFIX))


def _check_id(sandbox_id: str) -> None:
    if not _NAME_RE.match(sandbox_id):
        raise ValueError(f"sandbox_id: {sandbox_id!r} is not [A-Za-z0-9][A-Za-z0-9_.-]{{0,127}}")


_SYSTEM_DIRS = ("/proc", "/sys", "/dev", "/run/ale", "/opt/ale", "/etc", "/usr", "/bin", "/sbin", "/lib")


def _check_workdir(workdir: str) -> None:
    path = os.path.normpath(workdir)
    if (
        not workdir.startswith("/")
        or path == "/"
        or any(path == d or path.startswith(d + "/") or path.startswith(d + "-") for d in _SYSTEM_DIRS)
    ):
        raise ValueError(f"workdir: {workdir!r} must be an absolute path outside system dirs")


def _with_defaults(limits: Limits) -> Limits:
    """Zero fields mean "the backend's default" (see ``Limits``): the defaults of ``Limits``."""
    defaults = Limits()
    return Limits(**{k: v or getattr(defaults, k) for k, v in limits.model_dump().items()})


_NAMESPACE_FILE = "namespace"
"""In the sandbox's host dir (not bound into it): the owning namespace, for commits."""


def _write_namespace(host_dir: Path, namespace: str) -> None:
    (host_dir / _NAMESPACE_FILE).write_text(namespace)


def _read_namespace(host_dir: Path) -> str:
    try:
        return (host_dir / _NAMESPACE_FILE).read_text()
    except OSError:
        return ""


def _read_settings(host_dir: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((host_dir / "conf" / SETTINGS_NAME).read_text())
    except (OSError, ValueError):
        return {}
    return data


def _reason(e: Exception) -> str:
    return str(getattr(e, "explanation", None) or e)


def _dir_size(path: Path) -> int:
    total = 0
    for p in path.rglob("*"):
        with contextlib.suppress(OSError):
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
    return total
