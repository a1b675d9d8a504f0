"""`ale-flow`: run the agent from a terminal (one task with -p, or an interactive session)."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import typer
from ale_proto.config import ConfigError, deep_merge, parse_overrides
from rich.console import Console
from rich.markup import escape

from ale_flow import events as ev
from ale_flow.agent import Agent
from ale_flow.models.script_file import SCHEME as SCRIPTED_SCHEME
from ale_flow.models.script_file import ScriptError, scripted_model
from ale_flow.settings import Settings, SettingsError, load_settings, set_dotted
from ale_flow.types import AgentStopReason, ToolCall
from ale_flow.workspace import SANDBOX_SCHEME, open_workspace

app = typer.Typer(add_completion=False, help="ale-flow: an agent that works in a directory through tools.")
console = Console(stderr=True)


def _cli_overrides(
    base_url: str | None, model: str | None, api_key: str | None, mode: str | None, yolo: bool, max_steps: int | None, text_tools: bool, config: list[str]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, val in [("model.base_url", base_url), ("model.name", model), ("model.api_key", api_key), ("mode", mode), ("limits.max_steps", max_steps)]:
        if val is not None:
            set_dotted(out, key, val)
    if yolo:
        out["mode"] = "yolo"
    if text_tools:
        set_dotted(out, "model.native_tools", False)
    try:
        return deep_merge(out, parse_overrides(config))  # -c wins over the flags above, as before
    except ConfigError as e:
        raise SettingsError(f"-c: {e}") from None


def _render(event: ev.Event, as_json: bool) -> None:
    if as_json:
        print(json.dumps(ev.event_to_dict(event), default=str), flush=True)
        return
    if isinstance(event, ev.AssistantMessage) and event.content:
        console.print(f"[bold cyan]assistant[/] {escape(event.content)}")
    elif isinstance(event, ev.ToolStarted) and event.call is not None:
        console.print(f"[yellow]→ {event.call.name}[/] {escape(json.dumps(event.call.arguments)[:300])}")
    elif isinstance(event, ev.ToolFinished) and event.result is not None:
        style = "red" if event.result.is_error else "dim"
        text = event.result.content
        console.print(f"[{style}]{escape(text[:1500])}{' …' if len(text) > 1500 else ''}[/]")
    elif isinstance(event, (ev.Reminder, ev.Intervention)):
        console.print(f"[magenta]{event.kind}[/] {escape(event.text)}")
    elif isinstance(event, ev.Compressed):
        console.print(f"[magenta]compressed[/] {event.before_tokens} → {event.after_tokens} tokens (lossy={event.lossy})")
    elif isinstance(event, ev.HookFailed):
        status = f"exited with {event.exit_code}" if event.exit_code is not None else "failed"
        first = f": {event.error.strip().splitlines()[0][:200]}" if event.error.strip() else ""
        # One line even on a narrow or piped stderr: it is a warning, not a report.
        console.print(f"[yellow]warning:[/] {event.hook_event} hook {escape(repr(event.command))} {status}{escape(first)}", soft_wrap=True)
    elif isinstance(event, ev.MalformedToolCall):
        console.print(f"[red]malformed tool call[/] {escape('; '.join(event.problems))}")
    elif isinstance(event, ev.Stopped):
        console.print(f"[bold]stopped[/]: {event.reason.value} after {event.steps} steps, {event.usage.total_tokens} tokens {escape(event.detail)}")
        if event.final_message:
            print(event.final_message, flush=True)


def _ask(call: ToolCall) -> bool:
    if not sys.stdin.isatty():
        return False
    return typer.confirm(f"Allow {call.name} {json.dumps(call.arguments)[:200]}?", default=False)


def _build_model(settings: Settings) -> Any:
    from ale_flow.models.openai import OpenAIConfig, OpenAIModel

    m = settings.model
    if m.name and m.name.startswith(SCRIPTED_SCHEME):
        try:
            return scripted_model(m.name, context_window=m.context_window)
        except ScriptError as e:
            raise SettingsError(f"--model {m.name}: {e}") from None
    if not m.base_url or not m.name:
        raise SettingsError("no model configured: pass --base-url and --model (or set model.base_url / model.name in settings)")
    return OpenAIModel(
        OpenAIConfig(
            base_url=m.base_url,
            model=m.name,
            api_key=m.api_key,
            native_tools=m.native_tools,
            temperature=m.temperature,
            max_tokens=m.max_tokens,
            context_window=m.context_window,
            max_retries=m.max_retries,
        )
    )


def _run_one(agent: Agent, task: str, as_json: bool) -> ev.Stopped:
    # Ctrl-C interrupts the current step (the shell command is killed) instead of killing the CLI.
    previous = signal.signal(signal.SIGINT, lambda *_: agent.interrupt())
    try:
        last: ev.Event | None = None
        for last in agent.run(task):  # noqa: B007
            _render(last, as_json)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert isinstance(last, ev.Stopped)
    agent.cancel.clear()
    return last


@app.command()
def run(
    prompt: str | None = typer.Option(None, "-p", "--prompt", help="Run this task non-interactively and exit."),
    base_url: str | None = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint (…/v1)."),
    task: str | None = typer.Argument(None, help="The task (same as -p): run it and exit."),
    model: str | None = typer.Option(
        None, "--model", "-m", help="Model name, or scripted:FILE to replay a script of replies (YAML or JSONL; no server needed)."
    ),
    api_key: str | None = typer.Option(None, "--api-key", envvar="OPENAI_API_KEY", help="Bearer token."),
    workspace: str = typer.Option(".", "--workspace", "-w", help="Directory to work in (or sandbox://ID); must exist unless --create."),
    create: bool = typer.Option(False, "--create", help="Create the --workspace directory if it does not exist."),
    mode: str | None = typer.Option(None, "--mode", help="default | accept-edits | plan | yolo."),
    yolo: bool = typer.Option(False, "--yolo", help="Approve every tool call."),
    max_steps: int | None = typer.Option(None, "--max-steps", help="Stop after this many model calls."),
    text_tools: bool = typer.Option(False, "--text-tools", help="Use the <tool_call> text format instead of native tool calling."),
    config: list[str] = typer.Option([], "-c", "--config", help="Setting override key=value (repeatable)."),
    trajectory: Path | None = typer.Option(None, "--trajectory", help="Trajectory JSONL path."),
    as_json: bool = typer.Option(False, "--json", help="Print events as JSON lines on stdout."),
) -> None:
    """Run a task (-p or TASK) or start an interactive session."""
    if task is not None and prompt is not None:
        console.print("[red]error:[/] give the task once: either -p TEXT or TASK, not both")
        raise typer.Exit(2)
    prompt = task if prompt is None else prompt
    try:
        overrides = _cli_overrides(base_url, model, api_key, mode, yolo, max_steps, text_tools, config)
        if prompt is not None and "mode" not in overrides:
            # Nobody is there to approve edits in a one-shot run; shell still needs --yolo.
            overrides.setdefault("mode", "accept-edits")
        remote = workspace.startswith(SANDBOX_SCHEME)
        settings = load_settings(None if remote else workspace, overrides)
        llm = _build_model(settings)
    except SettingsError as e:
        typer.echo(f"error: {e}", err=True)  # one line, never wrapped (ale_proto.config's convention)
        raise typer.Exit(2) from None
    if not workspace.startswith(SANDBOX_SCHEME) and not create and not Path(workspace).is_dir():
        # A typo must not become a fresh empty workspace the agent then works in.
        what = "is not a directory" if Path(workspace).exists() else "does not exist (pass --create to make it)"
        console.print(f"[red]workspace {escape(workspace)} {what}[/]", soft_wrap=True)
        raise typer.Exit(2)
    try:
        ws = open_workspace(workspace)
    except Exception as e:  # the SDK's connection errors are not ours to enumerate
        console.print(f"[red]cannot open workspace {escape(workspace)}:[/] {type(e).__name__}: {escape(str(e))}")
        raise typer.Exit(2) from None
    agent = Agent(llm, ws, settings, confirm=_ask, trajectory_path=trajectory)
    for warning in agent.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}")
    try:
        _session(agent, prompt, as_json)
    finally:
        agent.close()


def _session(agent: Agent, prompt: str | None, as_json: bool) -> None:
    if prompt is not None:
        stopped = _run_one(agent, prompt, as_json)
        console.print(f"[dim]trajectory: {agent.trajectory_path}[/]")
        raise typer.Exit(0 if stopped.reason == AgentStopReason.COMPLETED else 1)
    console.print("[bold]ale-flow[/] interactive — empty line or Ctrl-D to quit; Ctrl-C interrupts a step.")
    while True:
        try:
            task = console.input("[bold green]> [/]")
        except (EOFError, KeyboardInterrupt):
            break
        if not task.strip():
            break
        _run_one(agent, task, as_json)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
