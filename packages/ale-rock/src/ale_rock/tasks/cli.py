"""``ale-rock tasks``: list, validate, run, generate, export and import task instances (ALE
``task.yaml``, Harbor ``task.toml`` and Terminal-Bench ``task.yaml`` directories alike)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from ale_rock.tasks.loader import TaskFormatError, builtin_suite_dir, iter_task_dirs, load_suite, write_task
from ale_rock.tasks.models import Domain, Split, Task

if TYPE_CHECKING:
    from ale_rock.tasks.runner import TaskRunner

app = typer.Typer(help="Task instances: list, validate, run, generate, export, import.", no_args_is_help=True)
_console = Console()


@app.command("list")
def list_tasks(
    root: Path = typer.Argument(None, help="Directory of tasks (default: the built-in suite)."),
    domain: Domain | None = typer.Option(None, help="Only this domain."),
    split: Split | None = typer.Option(None, help="Only this split."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON lines instead of a table."),
) -> None:
    """List tasks with their domain, split and difficulty."""
    try:
        tasks = load_suite(root)
    except TaskFormatError as e:
        _console.print(str(e), style="red", markup=False)
        raise typer.Exit(2) from None
    tasks = [t for t in tasks if (domain is None or t.spec.domain == domain) and (split is None or t.spec.split == split)]
    if as_json:
        for t in tasks:
            s = t.spec
            typer.echo(json.dumps({"id": s.id, "domain": s.domain.value, "split": s.split.value,
                                   "difficulty": s.difficulty.value, "title": s.title, "path": str(t.path),
                                   "format": t.format.value, "steps": [st.name for st in t.steps]}))
        return
    rows = [(t.spec.id, t.format.value, t.spec.domain.value, t.spec.split.value, t.spec.difficulty.value, t.spec.title) for t in tasks]
    header = ("id", "format", "domain", "split", "difficulty", "title")
    if not _console.is_terminal:
        # Piped (grep, cut, a script): a table sized for 80 columns would cut ids short, so print
        # tab-separated full values; the count goes to stderr to keep stdout one row per task.
        for row in [header, *rows]:
            typer.echo("\t".join(row))
        typer.echo(f"{len(tasks)} tasks", err=True)
        return
    table = Table(*header)
    # Ids are what users copy into other commands: never cut them; titles wrap instead.
    table.columns[0].no_wrap = True
    table.columns[0].min_width = max((len(r[0]) for r in rows), default=2)
    for row in rows:
        table.add_row(*row)
    _console.print(table)
    _console.print(f"{len(tasks)} tasks")


@app.command()
def validate(
    paths: list[Path] = typer.Argument(None, help="Task dirs or dirs of tasks (default: the built-in suite)."),
    jobs: int = typer.Option(0, "--jobs", "-j", help="Parallel validations (0: 2 x CPUs)."),
    runs: int = typer.Option(3, help="Reference runs for the determinism check."),
    address: str | None = typer.Option(
        None, help="Admin address: validate inside real sandboxes (default: local temp dirs, no isolation)."
    ),
    api_key: str | None = typer.Option(None, help="API key for --address (default: the SDK's usual lookup)."),
    backend: str = typer.Option("", help="Sandbox backend with --address (local, docker; '' = the server's default)."),
    cpu: float = typer.Option(0.5, help="CPUs per sandbox with --address (unless the task sets cpus)."),
    memory_mib: int = typer.Option(512, help="Memory per sandbox (MiB) with --address (unless the task sets it)."),
) -> None:
    """Prove tasks: the reference solution passes, an empty solution fails, tests are deterministic."""
    from ale_rock.tasks.runner import LocalDirRunner
    from ale_rock.tasks.validate import validate_many

    runner_for: Callable[[Task], TaskRunner] | None = None
    if address is not None:
        from ale_rock.sdk import Client
        from ale_rock.tasks.sandbox_runner import runner_factory_for

        runner_for = runner_factory_for(Client(address, api_key), backend=backend, cpu=cpu, memory_mib=memory_mib)

    dirs = [d for p in (paths or [builtin_suite_dir()]) for d in iter_task_dirs(p)]
    if not dirs:
        _console.print("no task.yaml (ALE, Terminal-Bench) or task.toml (Harbor) found", style="red")
        raise typer.Exit(2)
    start = time.monotonic()
    # Validation is mostly waiting on subprocesses, so a few more threads than cores pays off.
    workers = jobs or 2 * (os.cpu_count() or 1)
    reports = validate_many(
        dirs, LocalDirRunner, jobs=workers, runs=runs, on_done=lambda r: _console.print(r.summary(), markup=False),
        runner_for=runner_for,
    )  # fmt: skip
    bad = [r for r in reports if not r.ok]
    took = time.monotonic() - start
    _console.print(f"{len(reports) - len(bad)}/{len(reports)} tasks valid in {took:.1f}s")
    if bad:
        raise typer.Exit(1)


@app.command()
def generate(
    out: Path = typer.Argument(..., help="Directory to write the task dirs into."),
    seeds: int = typer.Option(10, help="How many seeds (tasks)."),
    start: int = typer.Option(0, help="First seed."),
    family: str | None = typer.Option(None, help="Only this family (default: cycle through all)."),
) -> None:
    """Write parametric easy tasks, deterministically from seeds."""
    from ale_rock.tasks.generator import generate_task

    for seed in range(start, start + seeds):
        task = generate_task(seed, family=family)
        write_task(task, out / task.id)
    typer.echo(f"wrote {seeds} tasks to {out}")


@contextmanager
def _runner_source(address: str | None, api_key: str | None, backend: str, cpu: float, memory_mib: int
                   ) -> Iterator[Callable[[Task], TaskRunner]]:  # fmt: skip
    """Sandboxes on ``address``; or, with ``--backend`` alone, on a one-worker cluster started for
    this command; or else local temp dirs (no isolation, no network policy)."""
    from ale_rock.tasks.runner import LocalDirRunner

    if address is None and not backend:
        yield lambda task: LocalDirRunner()
        return
    from ale_rock.sdk import Client
    from ale_rock.tasks.sandbox_runner import runner_factory_for

    if address is not None:
        yield runner_factory_for(Client(address, api_key), backend=backend, cpu=cpu, memory_mib=memory_mib)
        return
    from ale_rock.local_cluster import LocalCluster, real_worker_argv

    with LocalCluster(workers=0, worker_argv=real_worker_argv({"backend": backend}), start_timeout_s=120) as c:
        c.start_worker("tasks-run")
        yield runner_factory_for(c.client(timeout=120), backend=backend, cpu=cpu, memory_mib=memory_mib)


@app.command()
def run(
    paths: list[Path] = typer.Argument(..., help="Task dirs or dirs of tasks (Harbor, Terminal-Bench or ALE)."),
    solution: bool = typer.Option(False, "--solution", help="Apply the reference solution instead of an agent."),
    agent: str | None = typer.Option(
        None, help="Shell command run in the work dir per step, with the instruction in $ALE_INSTRUCTION."
    ),
    address: str | None = typer.Option(None, help="Admin address: run in its sandboxes."),
    api_key: str | None = typer.Option(None, help="API key for --address."),
    backend: str = typer.Option(
        "", help="local or docker: sandboxes of this backend (without --address, a one-worker cluster is started)."
    ),
    cpu: float = typer.Option(0.5, help="CPUs per sandbox (unless the task sets cpus)."),
    memory_mib: int = typer.Option(512, help="Memory per sandbox in MiB (unless the task sets it)."),
    jobs: int = typer.Option(2, "--jobs", "-j", help="Tasks run in parallel."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON line per task."),
) -> None:
    """Run tasks end to end: setup, the agent (or --solution, or nothing), then the verifier; print
    each reward (fractional and per metric). Exits 1 when any task errored (not on low rewards)."""
    from dataclasses import asdict

    from ale_rock.tasks.runs import run_many

    dirs: list[Path | Task] = [d for p in paths for d in iter_task_dirs(p)]
    if not dirs:
        _console.print("no task.yaml (ALE, Terminal-Bench) or task.toml (Harbor) found", style="red")
        raise typer.Exit(2)

    def show(r: object) -> None:
        from ale_rock.tasks.runs import RunResult

        assert isinstance(r, RunResult)
        typer.echo(json.dumps(asdict(r)) if as_json else r.line())

    with _runner_source(address, api_key, backend, cpu, memory_mib) as runner_for:
        results = run_many(dirs, runner_for, solution=solution, agent=agent, jobs=jobs, on_done=show)
    errors = sum(1 for r in results if r.error)
    if not as_json:
        mean = sum(r.reward for r in results) / len(results)
        typer.echo(f"{len(results)} tasks: {sum(r.passed for r in results)} passed, "
                   f"{len(results) - errors - sum(r.passed for r in results)} failed, {errors} errors; mean reward {mean:.3f}")  # fmt: skip
    if errors:
        raise typer.Exit(1)


@app.command()
def export(
    out: Path = typer.Argument(..., help="Directory to write the exported tasks into (<domain>/<id>/)."),
    root: Path = typer.Option(None, help="Directory of ALE tasks (default: the built-in suite)."),
    fmt: str = typer.Option("harbor", "--format", help="Only 'harbor'."),
    base_image: str | None = typer.Option(None, help="FROM image of the Dockerfiles (default: ALE's base image)."),
) -> None:
    """Write ALE tasks in Harbor's layout (task.toml, instruction.md, environment/, tests/, solution/)."""
    from ale_rock.tasks.export import export_suite

    if fmt != "harbor":
        _console.print(f"--format {fmt!r}: only 'harbor' is supported", style="red", markup=False)
        raise typer.Exit(2)
    written = export_suite(load_suite(root), out, base_image=base_image)
    typer.echo(f"wrote {len(written)} Harbor tasks to {out}")


@app.command("import-swe")
def import_swe_cmd(
    jsonl: Path = typer.Argument(..., help="SWE-bench-style JSONL (instance_id, repo, base_commit, patch, ...)."),
    repo_dir: Path = typer.Option(..., help="A git checkout of the repo, or a dir of them (owner__name or name)."),
    out: Path = typer.Option(..., help="Directory to write the Harbor tasks into."),
    base_image: str | None = typer.Option(None, help="FROM image of the Dockerfiles (default: ALE's base image)."),
) -> None:
    """Import SWE-bench-style instances as Harbor tasks against a local checkout."""
    from ale_rock.tasks.swe import SweImportError, import_swe

    try:
        written = import_swe(jsonl, repo_dir, out, base_image=base_image)
    except SweImportError as e:
        _console.print(str(e), style="red", markup=False)
        raise typer.Exit(2) from None
    typer.echo(f"imported {len(written)} instances to {out}")
