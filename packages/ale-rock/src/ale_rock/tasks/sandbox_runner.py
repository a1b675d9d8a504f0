"""A task runner over a real ale-rock sandbox (SDK), so validation and rewards run isolated."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ale_rock.tasks.runner import MAX_OUTPUT_CHARS, CommandResult, check_relative

if TYPE_CHECKING:
    from ale_rock.envs.sandbox_spec import SandboxPolicy
    from ale_rock.sdk import Client, Sandbox
    from ale_rock.tasks.models import Task

_TIMED_OUT = ("timeout", "idle_timeout")


class SandboxRunner:
    """:class:`~ale_rock.tasks.runner.TaskRunner` on one SDK sandbox; ``reset`` empties its work dir.

    Build one with :meth:`create` (it then owns and deletes the sandbox) or wrap an existing
    ``Sandbox``.
    """

    def __init__(self, sandbox: Sandbox, workdir: str = "/workspace", *, owns: bool = False) -> None:
        self.sandbox = sandbox
        self.workdir = workdir.rstrip("/") or "/"
        self._owns = owns
        self.task: Task | None = None
        self.keep_image_workdir = False
        """The image's work dir has the task's files (a built or ready image): the first reset
        keeps a pristine copy in /tmp and later resets restore it, instead of emptying the dir."""

    @classmethod
    def create(cls, client: Client, *, image: str = "", workdir: str = "/workspace", **create_kwargs: Any) -> SandboxRunner:
        """Start a sandbox (no network unless ``allow=`` says otherwise) and wrap it."""
        from ale_rock.sdk import Sandbox

        sb = Sandbox.create(image, client=client, workdir=workdir, **create_kwargs)
        return cls(sb, workdir, owns=True)

    def reset(self) -> None:
        wd = shlex.quote(self.workdir)
        # chmod first: a task may have taken away write permission on its own directories
        cmd = f"chmod -R u+rwx {wd} 2>/dev/null; find {wd} -mindepth 1 -delete"
        if self.keep_image_workdir:
            p = "/tmp/.ale-pristine"
            cmd = f"if [ -d {p} ]; then {cmd} && cp -a {p}/. {wd}/; else mkdir -p {p} && cp -a {wd}/. {p}/; fi"
        res = self.run(cmd, timeout_s=60)
        if res.exit_code != 0:
            raise RuntimeError(f"could not empty {self.workdir}: {res.output[-500:]}")

    def upload(self, files: Mapping[str, bytes]) -> None:
        for rel, data in files.items():
            self.sandbox.write(f"{self.workdir}/{check_relative(rel)}", data)

    def run(self, command: str, timeout_s: float) -> CommandResult:
        r = self.sandbox.exec(["bash", "-c", command], cwd=self.workdir, timeout=timeout_s)
        timed_out = r.end_reason in _TIMED_OUT
        text = r.stdout + r.stderr
        if len(text) > MAX_OUTPUT_CHARS:
            text = text[:MAX_OUTPUT_CHARS] + "\n[output truncated]"
        return CommandResult(
            exit_code=124 if timed_out else r.exit_code,
            output=text,
            timed_out=timed_out,
            duration_s=r.duration_s,
        )

    def stop_processes(self) -> None:
        self.sandbox.kill_all()

    def close(self) -> None:
        if self._owns:
            try:
                self.sandbox.delete()
            except Exception:  # already gone: deleting is best effort
                pass
            self._owns = False

    def __enter__(self) -> SandboxRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def runner_factory_for(
    client: Client, *, backend: str = "", cpu: float = 0.5, memory_mib: int = 512, envhub: bool = True,
    policy: SandboxPolicy | None = None,
) -> Callable[[Task], SandboxRunner]:
    """Make a sandbox per task as the task asks: its image (or ALE's base image with its
    Dockerfile's steps applied), work dir, env, CPUs, memory and egress allow-list (none unless
    ``allowlist``), within ``policy`` (default: ``cpu``/``memory_mib`` for tasks that set none, no
    maximum but the server's); a task beyond the policy is refused (``SandboxSpecRefused``).

    On the docker backend a Dockerfile whose ``FROM`` image exists locally is built through EnvHub
    (``envhub=True``); the local backend runs only on ALE's base environment, so a task that
    names a ready ``docker_image`` is refused there with an error saying so."""
    from ale_rock.envs.sandbox_spec import SandboxPolicy
    from ale_rock.tasks.environment import sandbox_spec

    policy = policy or SandboxPolicy(default_cpu=cpu, default_memory_bytes=memory_mib * 2**20)

    def make(task: Task) -> SandboxRunner:
        e = task.environment
        if e.docker_image and not e.dockerfile and backend != "docker":
            raise RuntimeError(
                f"{task.id}: [environment].docker_image {e.docker_image!r} needs the docker backend (--backend docker); "
                "the local backend has only ALE's base environment"
            )
        if envhub:
            from ale_rock.tasks.envhub_build import prepare_task

            task = prepare_task(task, client, backend)
        kw = policy.admit(sandbox_spec(task)).for_backend(backend).create_kwargs()
        from_image = bool(kw["image"])
        runner = SandboxRunner.create(client, backend=backend, **kw)
        runner.task = task  # the (possibly built) task this sandbox was made for
        runner.keep_image_workdir = from_image
        return runner

    return make
