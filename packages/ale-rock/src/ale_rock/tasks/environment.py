"""A task's environment on a runner: the sandbox to ask for, and the Dockerfile substitution.

No registry is reachable here, so a Dockerfile whose ``FROM`` image is not available locally
cannot be built. Its task then runs on ALE's base image with the Dockerfile's steps applied in the
sandbox at setup, in order: ``WORKDIR`` (created), ``ENV``/``ARG`` (exported to every later step
and to the task's commands), ``COPY``/``ADD`` from ``environment/`` and ``RUN``. It is logged
(``ale_rock.tasks``, warning) and documented in docs/tasks.md. A ``RUN`` that needs the network in
a no-network task fails before it runs, with an error naming its line; any failing step is named.
"""

from __future__ import annotations

import logging
import posixpath
import shlex

from ale_rock.envs.sandbox_spec import EgressRule, SandboxSpec
from ale_rock.tasks.dockerfile import expand, needs_network, parse_copy, parse_env, run_command, stage_count
from ale_rock.tasks.models import SETUP_DIR, DockerStep, NetworkMode, Task, TaskEnvironment
from ale_rock.tasks.runner import CommandResult, TaskRunner

log = logging.getLogger("ale_rock.tasks")

_STEP_MARK = "@@ALE_DOCKER_STEP@@"
CONTEXT_DIR = f"{SETUP_DIR}/context"
_logged: set[str] = set()


class TaskEnvironmentError(RuntimeError):
    """The environment could not be prepared; the message names the Dockerfile step."""


def dockerfile_env(env: TaskEnvironment) -> dict[str, str]:
    """The ``ENV`` values of the Dockerfile, in order, ``$VAR`` expanded (what every command sees)."""
    values: dict[str, str] = {}
    out: dict[str, str] = {}
    for s in env.dockerfile_steps:
        if s.op in ("ARG", "ENV"):
            for k, v in parse_env(s.args).items():
                v = expand(v, values)
                values[k] = v
                if s.op == "ENV":
                    out[k] = v
    return out


def exports(task: Task, extra: dict[str, str] | None = None) -> str:
    """``export K=V; ...`` for the task's environment variables (plus ``extra``); "" when none.

    Prefixed to every command the harness runs, so a runner that cannot set a sandbox's env (the
    local one) sees the same variables as a sandbox created with them."""
    env = {**task.environment.env, **(extra or {})}
    if not env:
        return ""
    return "export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + "; "


def sandbox_spec(task: Task) -> SandboxSpec:
    """The sandbox ``task`` asks for: image (a built or ready one; "" = the base image), work dir,
    env, CPUs, memory and the egress allow-list. ``network_mode`` other than ``allowlist`` asks for
    no egress at all. The one translation of ``[environment]`` every runner uses (``tasks run``,
    the episode runner behind ``ale eval`` and training); the operator's ``SandboxPolicy`` bounds it."""
    e = task.environment
    allow: tuple[EgressRule, ...] = ()
    if e.network_mode == NetworkMode.ALLOWLIST and e.allowed_hosts:
        allow = tuple(_host_port(h) for h in e.allowed_hosts)
    return SandboxSpec(
        image=e.built_image or (e.docker_image if not e.dockerfile else "") or "",
        workdir=e.workdir or "",
        env=dict(e.env),
        cpu=e.cpus,
        memory_bytes=e.memory_mb * 2**20 if e.memory_mb else None,
        allow=allow,
    )


def _host_port(entry: str) -> EgressRule:
    host, sep, port = entry.rpartition(":")
    if sep and port.isdigit() and host and "]" not in port:
        return (host.strip("[]"), int(port))
    return entry


def needs_substitution(task: Task) -> bool:
    """The task has Dockerfile steps that the harness applies at setup (no built image)."""
    e = task.environment
    return bool(e.dockerfile_steps) and not e.built_image


def apply_environment(task: Task, runner: TaskRunner) -> None:
    """Apply the Dockerfile's steps in the (empty) work dir: one upload, one command."""
    e = task.environment
    if not needs_substitution(task):
        return
    if stage_count(e.dockerfile_steps) > 1:
        raise TaskEnvironmentError("Dockerfile: multi-stage builds cannot be substituted; build the image and set docker_image")
    # Once per image and process: a generated family shares one FROM over hundreds of tasks.
    image = e.from_image or ""
    if image not in _logged:
        _logged.add(image)
        log.warning("FROM %s not built (first in task %s): its tasks run on ALE's base image with their "
                    "Dockerfile's steps applied at setup", e.from_image, task.id)  # fmt: skip
    script, steps = substitution_script(task)
    files = {f"{CONTEXT_DIR}/{k}": v for k, v in e.context.items()}
    if files:
        runner.upload(files)
    res = runner.run(f"{script}\nrc=$?; rm -rf {SETUP_DIR}; exit $rc", task.spec.limits.setup_s)
    if res.exit_code != 0 or res.timed_out:
        raise TaskEnvironmentError(_failure(res, steps))


def substitution_script(task: Task) -> tuple[str, list[DockerStep]]:
    """The bash script applying the steps (each announced by a marker line) and the steps run."""
    e = task.environment
    wd = e.workdir or ""
    values: dict[str, str] = {}
    cwd = "$W"
    lines = ["set -e", 'W="$(pwd)"', f'C="$W/{CONTEXT_DIR}"']
    run: list[DockerStep] = []
    for s in e.dockerfile_steps:
        if s.op in ("ARG", "ENV"):
            for k, v in parse_env(s.args).items():
                values[k] = expand(v, values)
                lines.append(f"export {k}={shlex.quote(values[k])}")
            continue
        if s.op not in ("WORKDIR", "COPY", "ADD", "RUN"):
            continue  # FROM is the base image; metadata instructions change nothing here
        lines.append(f"echo {_STEP_MARK} {len(run)}")
        run.append(s)
        if s.op == "WORKDIR":
            cwd = _place(expand(s.args.strip(), values), wd, cwd)
            lines.append(f'mkdir -p "{cwd}" && cd "{cwd}"')
        elif s.op in ("COPY", "ADD"):
            lines += _copy_lines(s, expand(s.args, values), wd, cwd)
        else:
            cmd = run_command(s.args)
            net = needs_network(cmd)
            if net and e.network_mode != NetworkMode.ALLOWLIST:
                raise TaskEnvironmentError(
                    f"{s.describe()}: needs the network ({net}), and this sandbox has none (no registry or "
                    "mirror is reachable); build the image elsewhere and set docker_image, or drop the step"
                )
            lines.append(f'(cd "{cwd}" && bash -ec {shlex.quote(cmd)})')
    lines.append('cd "$W"')
    return "\n".join(lines), run


def _place(path: str, wd: str, cwd: str) -> str:
    """A Dockerfile path in the sandbox: the task's work dir maps to the runner's (``$W``)."""
    if not path.startswith("/"):
        return posixpath.join(cwd, path) if path not in ("", ".") else cwd
    if wd and (path == wd or path.startswith(wd.rstrip("/") + "/")):
        return "$W" + path[len(wd.rstrip("/")) :]
    return path


def _copy_lines(s: DockerStep, args: str, wd: str, cwd: str) -> list[str]:
    try:
        sources, dest, _flags = parse_copy(args)
    except ValueError as err:
        raise TaskEnvironmentError(f"{s.describe()}: {err}") from None
    if any("://" in src for src in sources):
        raise TaskEnvironmentError(f"{s.describe()}: a URL source needs the network, which this sandbox does not have")
    target = _place(dest, wd, cwd)
    into_dir = dest.endswith("/") or len(sources) > 1
    out = []
    for src in sources:
        rel = posixpath.normpath(src.lstrip("/"))
        if rel.startswith(".."):
            raise TaskEnvironmentError(f"{s.describe()}: source {src!r} is outside environment/")
        origin = '"$C"' if rel == "." else f'"$C"/{_glob_quote(rel)}'
        # A directory's contents are copied (Docker's rule); a file goes into a dir dest or is renamed.
        out.append(
            f'for f in {origin}; do if [ -d "$f" ]; then mkdir -p "{target}" && cp -a "$f"/. "{target}"/; '
            f'elif [ -e "$f" ]; then ' + (f'mkdir -p "{target}" && cp -a "$f" "{target}"/; ' if into_dir else
                                          f'mkdir -p "$(dirname "{target}")" && cp -a "$f" "{target}"; ')
            + f'else echo "no such file in environment/: {rel}" >&2; exit 1; fi; done'
        )  # fmt: skip
    return out


def _glob_quote(rel: str) -> str:
    """Quote a path but keep ``*``/``?`` as globs (Docker's COPY sources are patterns)."""
    return "".join(c if c in "*?" else shlex.quote(c) if not c.isalnum() and c not in "/._-" else c for c in rel)


def _failure(res: CommandResult, steps: list[DockerStep]) -> str:
    marks = [line for line in res.output.splitlines() if line.startswith(_STEP_MARK)]
    tail = "\n".join(line for line in res.output.splitlines()[-30:] if not line.startswith(_STEP_MARK))
    why = "timed out" if res.timed_out else f"exited {res.exit_code}"
    if marks:
        idx = int(marks[-1].split()[-1])
        return f"{steps[idx].describe()} failed ({why}) while applying the Dockerfile on ALE's base image:\n{tail}"
    return f"applying the Dockerfile {why}:\n{tail}"
