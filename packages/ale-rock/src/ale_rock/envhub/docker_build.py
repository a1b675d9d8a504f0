"""Docker builds of EnvHub specs: one image per spec hash, tagged ``ale-env/<name>:<hash12>``.

* ``base.dockerfile`` is built with ``docker build`` (no network: builds are as closed as
  sandboxes unless :attr:`DockerBuildConfig.network` says otherwise);
* ``base.docker_image`` (or the Dockerfile's result) then gets the setup commands run once in a
  container as root, with ``set -e``, and the container is committed; without setup commands the
  base is only tagged;
* afterwards the work dir is handed to the image's ``sandbox`` user when it has one, so files the
  setup made there stay writable by the sandbox (the docker backend runs commands as uid 1000).

The image carries the spec hash as a label; a later build finds the tag and is a no-op.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import uuid
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ale_rock.envhub.spec import EnvSpecModel

LABEL_HASH = "ale.envhub.spec_hash"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
LABEL_NAME = "ale.envhub.name"


class BuildFailed(RuntimeError):
    """The build did not produce an image; ``field`` names the spec field at fault, if any."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


class DockerBuildConfig(BaseModel):
    """Settings of the docker builder."""

    model_config = ConfigDict(extra="forbid")

    docker_host: str = ""
    """Engine address; "" = ``DOCKER_HOST`` or the default socket."""
    network: str = "none"
    """Network of build containers (``none``: setup commands cannot reach anything)."""
    timeout_s: float = Field(default=1800.0, gt=0)
    """Limit for one build (the Dockerfile build and the setup commands each)."""
    repository_prefix: str = "ale-env"
    """Images are ``<prefix>/<name>:<hash12>``."""


def image_tag(spec: EnvSpecModel, spec_hash: str, prefix: str = "ale-env") -> str:
    """The image tag of a spec: Docker repository names allow fewer characters than spec names."""
    name = re.sub(r"[^a-z0-9]+", "-", spec.name).strip("-") or "env"
    return f"{prefix}/{name}:{spec_hash[:12]}"


class DockerBuilder:
    """Builds specs into images on a Docker engine."""

    backend = "docker"

    def __init__(self, config: DockerBuildConfig | None = None) -> None:
        self.config = config or DockerBuildConfig()
        try:
            import docker
        except ImportError as e:  # pragma: no cover - depends on the install
            raise ImportError("docker builds need the docker SDK: pip install 'ale-rock[docker]'") from e
        self._errors = docker.errors
        kwargs: dict[str, Any] = {"timeout": int(self.config.timeout_s)}
        self._api = (
            docker.APIClient(base_url=self.config.docker_host, **kwargs)
            if self.config.docker_host
            else docker.from_env(**kwargs).api
        )

    def artifact(self, spec: EnvSpecModel, spec_hash: str) -> str:
        """The tag a build of this spec produces."""
        return image_tag(spec, spec_hash, self.config.repository_prefix)

    def exists(self, artifact: str) -> bool:
        """Whether the image is on the engine."""
        try:
            self._api.inspect_image(artifact)
            return True
        except self._errors.ImageNotFound:
            return False

    def remove(self, artifact: str) -> None:
        """Remove the image (best effort: an image used by a container stays)."""
        with contextlib.suppress(Exception):
            self._api.remove_image(artifact)

    def build(self, spec: EnvSpecModel, spec_hash: str, log: Callable[[str], None]) -> str:
        """Build and tag the image; return its tag. Raises :class:`BuildFailed`."""
        tag = self.artifact(spec, spec_hash)
        repo, _, version = tag.rpartition(":")
        base = spec.base
        if base.rootfs is not None:
            raise BuildFailed("a rootfs base is for the local backend; the docker backend needs "
                              "base.docker_image or base.dockerfile", field="base.rootfs")
        temporary: list[str] = []
        try:
            if base.dockerfile is not None:
                start = f"{repo}:{version}-base-{uuid.uuid4().hex[:8]}"
                self._build_dockerfile(base.dockerfile, start, log)
                temporary.append(start)
            else:
                start = str(base.docker_image)
                if not self.exists(start):
                    raise BuildFailed(f"image {start!r} is not on the engine (there is no registry to pull "
                                      "from: build or import it first)", field="base.docker_image")
            labels = {LABEL_HASH: spec_hash, LABEL_NAME: spec.name}
            if spec.setup:
                self._run_setup(start, spec, tag, labels, log)
            elif base.dockerfile is not None:
                self._run_setup(start, spec.model_copy(update={"setup": ["true"]}), tag, labels, log)
            else:
                # Nothing to run: the base itself is the environment, under the spec's stable tag.
                self._api.tag(start, repo, version)
                log(f"tagged {start} as {tag}")
            return tag
        finally:
            for t in temporary:
                with contextlib.suppress(Exception):
                    self._api.remove_image(t)

    def _build_dockerfile(self, text: str, tag: str, log: Callable[[str], None]) -> None:
        log("docker build (base.dockerfile)")
        try:
            stream = self._api.build(
                fileobj=io.BytesIO(text.encode()), tag=tag, rm=True, forcerm=True, decode=True,
                network_mode=self.config.network, timeout=int(self.config.timeout_s),
            )
            for chunk in stream:
                if "error" in chunk:
                    raise BuildFailed(f"docker build failed: {str(chunk['error']).strip()}", field="base.dockerfile")
                line = _ANSI.sub("", str(chunk.get("stream", ""))).rstrip("\n")
                if line.strip():
                    log(line)
        except self._errors.APIError as e:
            raise BuildFailed(f"docker build failed: {e.explanation or e}", field="base.dockerfile") from e

    def _run_setup(
        self, start: str, spec: EnvSpecModel, tag: str, labels: dict[str, str], log: Callable[[str], None]
    ) -> None:
        base_cfg = self._api.inspect_image(start).get("Config") or {}
        workdir = shlex.quote(spec.workdir)
        lines = ["set -e", f"mkdir -p {workdir}", f"cd {workdir}"]
        for cmd in spec.setup:
            lines.append(f"echo {shlex.quote('+ ' + cmd)}")
            lines.append(cmd)
        lines.append(f"if id sandbox >/dev/null 2>&1; then chown -R sandbox: {workdir}; fi")
        host_config = self._api.create_host_config(network_mode=self.config.network)
        container = self._api.create_container(
            start, command=["/bin/sh", "-c", "\n".join(lines)], user="0:0",
            environment=spec.env, host_config=host_config, labels={"ale.transient": "envhub-build"},
        )["Id"]
        try:
            self._api.start(container)
            for chunk in self._api.logs(container, stream=True, follow=True):
                for line in chunk.decode(errors="replace").splitlines():
                    log(line)
            status = self._api.wait(container, timeout=int(self.config.timeout_s))
            code = int(status.get("StatusCode", -1))
            if code != 0:
                raise BuildFailed(f"a setup command failed (exit code {code})", field="setup")
            changes = [f"WORKDIR {spec.workdir}", f"USER {base_cfg.get('User') or 'root'}"]
            changes.append("CMD " + json.dumps(base_cfg.get("Cmd") or ["/bin/sh"]))
            changes += [f"ENV {k}={json.dumps(v)}" for k, v in sorted(spec.env.items())]
            changes += [f"LABEL {k}={json.dumps(v)}" for k, v in labels.items()]
            repo, _, version = tag.rpartition(":")
            self._api.commit(container, repository=repo, tag=version, changes=changes)
            log(f"committed {tag}")
        except self._errors.APIError as e:
            raise BuildFailed(f"docker engine error during setup: {e.explanation or e}") from e
        finally:
            with contextlib.suppress(Exception):
                self._api.remove_container(container, v=True, force=True)
