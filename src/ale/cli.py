"""The `ale` command: bring the whole stack up on one machine, run the job, report, tear down.

Imports are lazy so that `ale --help` loads nothing heavy.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, help="ALE: the Agentic Learning Ecosystem.")

RunDir = Annotated[
    Path | None,
    typer.Option("--run-dir", help="Run directory (default: the latest under ./runs, or a new one for `up`)."),
]


def _runs_root() -> Path:
    return Path(os.environ.get("ALE_RUNS", "runs")).resolve()


def _latest_run_dir() -> Path | None:
    latest = _runs_root() / "latest"
    return latest.resolve() if latest.exists() else None


@app.command()
def up(
    config: Annotated[Path | None, typer.Option("-c", "--config", help="YAML config of the job.")] = None,
    overrides: Annotated[list[str] | None, typer.Argument(help="Dotted overrides: key=value.")] = None,
    run_dir: RunDir = None,
    keep: Annotated[bool, typer.Option(help="Leave the services running after the job.")] = False,
) -> None:
    """Start every service, wait for health, run the job on the embedded default, report."""
    from ale.up import run_up

    code = run_up(config=config, overrides=overrides or [], run_dir=run_dir, runs_root=_runs_root(), keep=keep)
    raise typer.Exit(code)


@app.command()
def down(run_dir: RunDir = None) -> None:
    """Stop every service that `ale up` started and leave nothing running."""
    from ale.supervisor import Stack

    target = run_dir or _latest_run_dir()
    if target is None:
        typer.echo("no run to stop")
        return
    stopped = Stack(target).stop_all()
    typer.echo(f"stopped {len(stopped)} service(s): {', '.join(stopped) or '-'} ({target})")


@app.command()
def status(run_dir: RunDir = None) -> None:
    """Show the services of the latest run and whether each is healthy."""
    from rich.console import Console
    from rich.table import Table

    from ale.supervisor import Stack

    target = run_dir or _latest_run_dir()
    if target is None:
        typer.echo("no run yet: `ale up` starts one")
        raise typer.Exit(1)
    table = Table(title=f"ALE services — {target}")
    for col in ("service", "pid", "port", "alive", "healthy"):
        table.add_column(col)
    rows = Stack(target).status()
    for r in rows:
        table.add_row(str(r["name"]), str(r["pid"]), str(r["port"]), str(r["alive"]), str(r["healthy"]))
    Console().print(table)
    if not rows:
        typer.echo("no services running")


def main() -> None:
    """Entry point of the `ale` console script."""
    app()


if __name__ == "__main__":
    main()
