"""A task runner over a real ale-rock sandbox (SDK), so validation and rewards run isolated."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ale_rock.tasks.runner import MAX_OUTPUT_CHARS, CommandResult, check_relative

if TYPE_CHECKING:
    from ale_rock.sdk import Client, Sandbox

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

    @classmethod
    def create(cls, client: Client, *, image: str = "", workdir: str = "/workspace", **create_kwargs: Any) -> SandboxRunner:
        """Start a sandbox (no network unless ``allow=`` says otherwise) and wrap it."""
        from ale_rock.sdk import Sandbox

        sb = Sandbox.create(image, client=client, workdir=workdir, **create_kwargs)
        return cls(sb, workdir, owns=True)

    def reset(self) -> None:
        wd = shlex.quote(self.workdir)
        # chmod first: a task may have taken away write permission on its own directories
        res = self.run(f"chmod -R u+rwx {wd} 2>/dev/null; find {wd} -mindepth 1 -delete", timeout_s=60)
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
