"""``ale-rock tasks``: list, validate and generate task instances."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from ale_rock.tasks.loader import TaskFormatError, builtin_suite_dir, iter_task_dirs, load_suite, write_task
from ale_rock.tasks.models import Domain, Split

app = typer.Typer(help="Task instances: list, validate, generate.", no_args_is_help=True)
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
                                   "difficulty": s.difficulty.value, "title": s.title, "path": str(t.path)}))
        return
    table = Table("id", "domain", "split", "difficulty", "title")
    for t in tasks:
        s = t.spec
        table.add_row(s.id, s.domain.value, s.split.value, s.difficulty.value, s.title)
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
    cpu: float = typer.Option(0.5, help="CPUs per sandbox with --address."),
    memory_mib: int = typer.Option(512, help="Memory per sandbox (MiB) with --address."),
) -> None:
    """Prove tasks: the reference solution passes, an empty solution fails, tests are deterministic."""
    from ale_rock.tasks.runner import LocalDirRunner, TaskRunner
    from ale_rock.tasks.validate import validate_many

    factory: Callable[[], TaskRunner] = LocalDirRunner
    if address is not None:
        from ale_rock.sdk import Client
        from ale_rock.tasks.sandbox_runner import SandboxRunner

        client = Client(address, api_key)
        factory = lambda: SandboxRunner.create(client, cpu=cpu, memory=memory_mib * 2**20)  # noqa: E731

    dirs = [d for p in (paths or [builtin_suite_dir()]) for d in iter_task_dirs(p)]
    if not dirs:
        _console.print("no task.yaml found", style="red")
        raise typer.Exit(2)
    start = time.monotonic()
    # Validation is mostly waiting on subprocesses, so a few more threads than cores pays off.
    workers = jobs or 2 * (os.cpu_count() or 1)
    reports = validate_many(
        dirs, factory, jobs=workers, runs=runs, on_done=lambda r: _console.print(r.summary(), markup=False)
    )
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
