"""Build a task's environment Dockerfile through EnvHub (docker backend), when its ``FROM`` image
is available locally.

The Dockerfile becomes an EnvHub spec: ``base.docker_image`` is the ``FROM`` image, ``setup`` the
``WORKDIR``/``ENV``/``COPY``/``RUN`` steps as shell commands (the ``COPY`` sources embedded, so no
build context is needed), ``env`` the ``ENV`` values and ``workdir`` the task's. EnvHub caches the
build by the spec's hash. When the ``FROM`` image is not local (nothing can be pulled here) the
task is returned unchanged and runs by substitution (:mod:`ale_rock.tasks.environment`).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import shlex
import subprocess
import threading
from dataclasses import replace
from typing import TYPE_CHECKING

from ale_rock.tasks.dockerfile import expand, parse_copy, parse_env, run_command, stage_count
from ale_rock.tasks.models import Task

if TYPE_CHECKING:
    from ale_rock.sdk import Client

log = logging.getLogger("ale_rock.tasks")
SANDBOX_UID = 1000
_built: dict[tuple[str, str, str], str] = {}
"""(admin address, task id, Dockerfile digest) -> the image EnvHub built, in this process."""
_building: dict[tuple[str, str, str], threading.Lock] = {}
_guard = threading.Lock()


def needs_build(task: Task, backend: str) -> bool:
    """Whether ``task``'s sandboxes on ``backend`` start from an EnvHub build of its Dockerfile (the
    docker backend, a Dockerfile, no image built yet); whether its ``FROM`` is local is checked later."""
    e = task.environment
    return backend == "docker" and bool(e.dockerfile) and not e.built_image


def prepare_task(task: Task, client: Client, backend: str) -> Task:
    """The task as its sandboxes on ``backend`` start it: on docker, its Dockerfile built through
    EnvHub when the ``FROM`` image is local (:func:`build_if_local`), else unchanged (substitution).

    The one path of ``ale-rock tasks run`` and of the episode runner behind ``ale eval`` and training.
    Built once per task and process: concurrent episodes of a task wait for the one build, later
    ones reuse its image (EnvHub itself also caches by the spec's digest)."""
    if not needs_build(task, backend):
        return task
    key = (client.settings.address, task.id, _digest(task))
    with _guard:
        lock = _building.setdefault(key, threading.Lock())
    with lock:
        image = _built.get(key)
        if image is None:  # (an EnvHub reference, name:version, that the Admin resolves)
            built = build_if_local(task, client)
            if not built.environment.built_image:
                return built  # FROM not local (nothing cached: it may be loaded later)
            image = _built[key] = built.environment.built_image
    return replace(task, environment=replace(task.environment, built_image=image))


def _digest(task: Task) -> str:
    e = task.environment
    return hashlib.sha256((e.dockerfile or "").encode() + repr(sorted(e.context.items())).encode()).hexdigest()[:12]


def image_exists(image: str) -> bool:
    """``docker image inspect`` succeeds (no pull is ever tried)."""
    try:
        return subprocess.run(["docker", "image", "inspect", image], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def setup_commands(task: Task) -> list[str]:
    """The Dockerfile's steps as EnvHub setup commands (run as root at build time, ``set -e``)."""
    e = task.environment
    values: dict[str, str] = {}
    cwd = "/"
    cmds: list[str] = []
    for s in e.dockerfile_steps:
        if s.op in ("ARG", "ENV"):
            for k, v in parse_env(s.args).items():
                values[k] = expand(v, values)
        elif s.op == "WORKDIR":
            path = expand(s.args.strip(), values)
            cwd = path if path.startswith("/") else f"{cwd.rstrip('/')}/{path}"
            cmds.append(f"mkdir -p {shlex.quote(cwd)}")
        elif s.op in ("COPY", "ADD"):
            sources, dest, _ = parse_copy(expand(s.args, values))
            target = dest if dest.startswith("/") else f"{cwd.rstrip('/')}/{dest}"
            for src in sources:
                rel = src.strip("/").removeprefix("./")
                matched = {k: v for k, v in e.context.items() if rel in ("", ".") or k == rel or k.startswith(rel + "/")}
                for k, data in sorted(matched.items()):
                    if k == rel and not (dest.endswith("/") or len(sources) > 1):
                        out = target
                    else:
                        out = f"{target.rstrip('/')}/{k[len(rel) + 1:] if k.startswith(rel + '/') else k.rsplit('/', 1)[-1]}"
                    b64 = base64.b64encode(data).decode()
                    cmds.append(f"mkdir -p \"$(dirname {shlex.quote(out)})\" && echo {b64} | base64 -d > {shlex.quote(out)}")
        elif s.op == "RUN":
            env = " ".join(f"{k}={shlex.quote(v)}" for k, v in values.items())
            cmds.append(f"cd {shlex.quote(cwd)} && {('env ' + env + ' ') if env else ''}bash -ec {shlex.quote(run_command(s.args))}")
    wd = e.workdir or "/workspace"
    # The sandbox runs as uid 1000: its work dir (and what was copied there) must be its own.
    cmds.append(f"mkdir -p {shlex.quote(wd)} && chown -R {SANDBOX_UID}:{SANDBOX_UID} {shlex.quote(wd)}")
    return cmds


def build_if_local(task: Task, client: Client) -> Task:
    """The task with ``environment.built_image`` set to an EnvHub build of its Dockerfile, or the
    task unchanged when the ``FROM`` image is not available locally or the Dockerfile is multi-stage."""
    from ale_rock.envhub.client import EnvHubClient
    from ale_rock.envhub.spec import BaseSource, EnvSpecModel

    e = task.environment
    base = e.from_image
    if not base or stage_count(e.dockerfile_steps) > 1 or not image_exists(base):
        return task
    digest = _digest(task)
    name = f"task-{task.id}"[:100].replace("_", "-")
    spec = EnvSpecModel(name=name, version=digest, description=f"environment/Dockerfile of task {task.id}",
                        base=BaseSource(docker_image=base), setup=setup_commands(task), env=dict(e.env),
                        workdir=e.workdir or "/workspace")  # fmt: skip
    hub = EnvHubClient(client.settings.address, client.settings.api_key, timeout_s=60)
    try:
        hub.register(spec)
        last = ""
        for line, state, _cached in hub.build(name, digest, backend="docker", timeout_s=e.build_timeout_s):
            last = line or last
            if state == "FAILED":
                raise RuntimeError(f"EnvHub build of {task.id}'s Dockerfile failed: {last}")
    finally:
        hub.close()
    log.info("task %s: environment/Dockerfile built through EnvHub as %s:%s", task.id, name, digest)
    return replace(task, environment=replace(e, built_image=f"{name}:{digest}"))
