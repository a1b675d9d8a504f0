"""The Docker backend's warm pools wired to its containers: shapes, warm launches and claims.

``docker_pool.WarmPools`` knows slot keys and shapes only; this mixin of ``DockerBackend`` says what
a shape is (the image name, the id it names now, the limits), starts a slot's container and turns a
claimed slot into a sandbox. A claim makes no engine call (that is the point of a warm pool):

- the shape's image id comes from the backend's :class:`ImageCache` (exact while subscribed to the
  engine's image events, see ``docker_images.py``), so a re-tagged image is never served from
  containers of its old content;
- the container keeps its slot name; the backend's map (``docker_index.py``), persisted in the host
  dir, says which container the sandbox is, so a restarted worker still finds and reaps it;
- the sandbox's settings (env, egress token) reach the already-running Rocklet through its settings
  file, which it re-reads when it changes: the first command already sees the sandbox's env;
- a slot has run one ``true`` before it is ready (``warm_up_rocklet``), so its claimer's first
  command does not pay for reading the shell from the container's fresh snapshot.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from ale_rock.backends.base import Limits, SandboxConfig, SandboxHandle
from ale_rock.backends.docker_config import _with_defaults
from ale_rock.backends.docker_index import Entry, SandboxIndex, _read_settings, _write_namespace, read_entry
from ale_rock.backends.docker_pool import WarmPools
from ale_rock.backends.docker_probe import warm_up_rocklet
from ale_rock.backends.docker_runtime import ROCKLET_SOCKET_NAME, SETTINGS_NAME, write_settings

if TYPE_CHECKING:
    from ale_rock.backends.docker_config import DockerBackendConfig
    from ale_rock.backends.docker_images import ImageCache

LABEL_SANDBOX = "ale.sandbox_id"
LABEL_POOL = "ale.pool"

Shape = tuple[str, str, str]
"""(image name, the image id it names now, limits as JSON)."""


class WarmPoolMixin:
    """Warm pool wiring of ``DockerBackend`` (which provides the attributes declared here)."""

    config: DockerBackendConfig
    _api: Any
    _errors: Any
    _pool: WarmPools
    _images: ImageCache
    _index: SandboxIndex

    if TYPE_CHECKING:  # provided by DockerBackend

        def _launch(self, key: str, config: SandboxConfig, labels: dict[str, str]) -> Entry: ...
        def _cleanup(self, key: str) -> None: ...
        def _host_dir(self, key: str) -> Path: ...
        def handle(self, sandbox_id: str) -> SandboxHandle: ...
        def _settings(self, config: SandboxConfig, token: str) -> dict[str, Any]: ...

    def _make_pool(self) -> WarmPools:
        c = self.config
        return WarmPools(
            self._launch_warm,
            self._cleanup,
            floors={shape: c.pool_size} if (shape := self._floor_shape()) else {},
            max_per_shape=max(c.pool_max, c.pool_size),
            max_total=max(c.pool_max_total, c.pool_size),
            window_s=c.pool_window_s,
            refillers=c.pool_refillers,
            enabled=c.pool_size > 0,
            refill_delay_s=c.pool_refill_delay_s,
        )

    def _poolable(self, config: SandboxConfig) -> bool:
        # Env, labels and namespace are applied at claim time; everything fixed at container
        # creation (image, limits, work dir binding, read-only root) is the shape or excluded.
        return self.config.pool_size > 0 and config.workdir == SandboxConfig().workdir and not config.read_only_root

    def _pool_shape(self) -> SandboxConfig:
        return SandboxConfig(image=self.config.base_image, limits=_with_defaults(self.config.pool_limits))

    def _shape(self, config: SandboxConfig) -> Shape | None:
        """The pool key of a (defaulted) config: image name, the image id it names now, limits.

        The id is part of the key so a re-tagged image (a snapshot committed again under the same
        name) is never served from containers of its previous content. None: no such image.
        """
        image = config.image or self.config.base_image
        try:
            image_id = self._images.get(image).id
        except self._errors.APIError:
            return None
        return (image, image_id, config.limits.model_dump_json())

    def _floor_shape(self) -> Shape | None:
        """The default shape, or None when the engine cannot tell yet (no image, engine down):
        then it is pooled on demand only, like any other shape."""
        if self.config.pool_size == 0:
            return None
        try:
            return self._shape(self._pool_shape())
        except Exception:  # noqa: BLE001 - a backend must construct without a reachable engine
            return None

    def _launch_warm(self, key: str, shape: object) -> None:
        from ale_rock.backends.docker import DockerBackendError

        assert isinstance(shape, tuple)
        image, image_id, limits = (str(x) for x in shape)
        config = SandboxConfig(image=image, limits=Limits.model_validate_json(limits))
        entry = self._launch(key, config, {LABEL_SANDBOX: "", LABEL_POOL: "1"})
        # Started by name (so it reports the same image as a fresh sandbox): the name must still
        # have meant the shape's image, else the slot would serve other content.
        if self._api.inspect_container(entry.container_id).get("Image") != image_id:
            raise DockerBackendError(f"image {image!r} changed while warm slot {key} started")
        try:
            warm_up_rocklet(self._host_dir(key) / "sock" / ROCKLET_SOCKET_NAME, self.config.start_timeout_s)
        except (grpc.RpcError, RuntimeError) as e:
            raise DockerBackendError(f"warm slot {key} did not run its warm-up command: {e}") from e

    def _claim_warm(self, sandbox_id: str, config: SandboxConfig) -> SandboxHandle | None:
        """A warm sandbox of ``config``'s shape turned into ``sandbox_id``, or None (start cold)."""
        shape = self._shape(config) if self._poolable(config) else None
        if shape is None:
            return None
        key = self._pool.claim(shape)
        if key is None:
            return None
        try:
            return self._adopt(key, sandbox_id, config)
        except Exception:  # noqa: BLE001 - a broken warm sandbox: fall back to a cold start
            self._cleanup(key)
            self._cleanup(sandbox_id)
            self._index.pop(sandbox_id)
            self._index.reserve(sandbox_id)  # still this start's
            return None
        finally:
            self._pool.release(key)

    def _adopt(self, key: str, sandbox_id: str, config: SandboxConfig) -> SandboxHandle:
        """Turn warm slot ``key`` into ``sandbox_id``: new settings, its host dir renamed."""
        src = self._host_dir(key)
        entry = read_entry(src)
        if entry.key != key or not entry.container_id:
            raise FileNotFoundError(f"warm slot {key} has no container record")
        # A slot whose Rocklet died while idle is not handed out: a connect(2) tells, in µs.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(1.0)
            probe.connect(str(src / "sock" / ROCKLET_SOCKET_NAME))
        token = _read_settings(src).get("egress_token", "") or uuid.uuid4().hex
        # The Rocklet re-reads its settings on the next call: the sandbox's env applies from the
        # very first command.
        write_settings(src / "conf" / SETTINGS_NAME, self._settings(config, token))
        (src / "labels.json").write_text(json.dumps(config.labels))
        _write_namespace(src, config.namespace)
        # The container's bind mounts follow the directory, whatever its host path becomes; from
        # this rename on, a restarted worker finds the sandbox by its dir (and its container.json).
        os.rename(src, self._host_dir(sandbox_id))
        self._index.put(sandbox_id, entry)
        return self.handle(sandbox_id)
