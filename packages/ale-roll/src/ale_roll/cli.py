"""`ale-roll train|sft|recipe|eval|serve -c cfg.yaml key=value ...`; `ale-roll serve-inference --model DIR`."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

import typer

from ale_roll.config import ConfigError, RunConfig, load_config

app = typer.Typer(add_completion=False, no_args_is_help=True, help="ale-roll: agentic RL trainer.")

ConfigOpt = Annotated[str, typer.Option("--config", "-c", help="YAML run config.")]
OverridesArg = Annotated[list[str] | None, typer.Argument(help="Dotted overrides, e.g. rollout.batch_size=16.")]


def _load_quiet() -> None:
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # the rich bar is ours; the JSON summary stays one clean line
    except ImportError:
        pass


def _load(config: str, overrides: list[str] | None) -> RunConfig:
    _load_quiet()
    try:
        return load_config(config, overrides or [])
    except ConfigError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None


def _progress(total: int, enabled: bool) -> tuple[Any, Any]:
    """A rich progress bar and its on_step callback (no-ops when disabled)."""
    if not enabled:
        return None, None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), TextColumn("{task.fields[info]}"))
    task = progress.add_task("train", total=total, info="")

    def on_step(step: int, m: dict[str, Any]) -> None:
        info = " ".join(f"{k.split('/')[0][:7]}={m[k]:.3f}" for k in ("reward/mean", "train/loss") if k in m)
        progress.update(task, completed=step, info=info)

    return progress, on_step


@app.command()
def train(config: ConfigOpt, overrides: OverridesArg = None) -> None:
    """Train with RL (resumes from the newest checkpoint in output_dir); cluster.mode=ray places the roles on Ray."""
    cfg = _load(config, overrides)
    from ale_roll.trainer.controller import placed_controller

    progress, on_step = _progress(cfg.iterations, cfg.metrics.progress)
    with placed_controller(cfg, on_step=on_step) as ctl:
        if progress is not None:
            progress.update(progress.task_ids[0], completed=ctl.step)
            with progress:
                summary = ctl.run()
        else:
            summary = ctl.run()
    typer.echo(json.dumps(summary, default=str))


@app.command()
def sft(config: ConfigOpt, overrides: OverridesArg = None) -> None:
    """Masked SFT on `sft.data` for `sft.steps` steps."""
    cfg = _load(config, overrides)
    from ale_roll.trainer.sft import run_sft

    progress, on_step = _progress(cfg.sft.steps, cfg.metrics.progress)
    if progress is not None:
        with progress:
            summary = run_sft(cfg, on_step=on_step)
    else:
        summary = run_sft(cfg)
    typer.echo(json.dumps(summary, default=str))


@app.command()
def recipe(config: ConfigOpt, overrides: OverridesArg = None) -> None:
    """ROME's recipe from one config: CPT → SFT stage 1 → SFT stage 2 → IPA RL → eval (resumes at the unfinished stage)."""
    from ale_roll.recipe import format_table, load_recipe_config, run_recipe

    _load_quiet()
    try:
        cfg = load_recipe_config(config, overrides or [])
    except ConfigError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    summary = run_recipe(cfg, log=lambda msg: typer.echo(msg, err=True))
    typer.echo(format_table(summary))
    typer.echo(f"wrote {cfg.output_dir}/recipe.json")


@app.command("eval")
def evaluate(config: ConfigOpt, overrides: OverridesArg = None) -> None:
    """Greedy evaluation of the newest checkpoint (or the initial model) on held-out seeds."""
    cfg = _load(config, overrides)
    from ale_roll.trainer.controller import placed_controller

    with placed_controller(cfg) as ctl:
        ctl.resume()
        result: dict[str, Any] = {"step": ctl.step, **asyncio.run(ctl.evaluate_only())}
    typer.echo(json.dumps(result))


@app.command()
def serve(port: Annotated[int, typer.Option(help="Port (0 = any free one).")] = 50080,
          host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1") -> None:
    """Serve the TrainerService (submit/get/list/watch/stop training jobs)."""
    from ale_roll.service import serve_trainer_service

    server = serve_trainer_service(host=host, port=port)
    typer.echo(f"TrainerService listening on {server.address}")
    server.wait()


@app.command("serve-inference")
def serve_inference(
    model: Annotated[str, typer.Option(help="Model directory (safetensors + tokenizer), .gguf file or package.")],
    engine: Annotated[str, typer.Option(help="Backend: hf or vllm.")] = "hf",
    port: Annotated[int, typer.Option(help="Port (0 = any free one; the bound port is printed).")] = 0,
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port_file: Annotated[str | None, typer.Option(help="Also write the bound port to this file.")] = None,
    max_model_len: Annotated[int, typer.Option(help="Context length (0 = the model's).")] = 0,
    token: Annotated[str | None, typer.Option(envvar="ALE_INFERENCE_TOKEN", help="Bearer token clients must send.")] = None,
) -> None:
    """Serve the InferenceService (health + reflection) on one model until SIGTERM."""
    from pydantic import ValidationError

    from ale_roll.engines.serve_process import InferenceServeConfig, run_inference_server

    try:
        cfg = InferenceServeConfig(model=model, engine=engine, port=port, host=host, port_file=port_file,  # type: ignore[arg-type]
                                   max_model_len=max_model_len, token=token)
    except ValidationError as e:
        from ale_proto.config import format_validation_error

        typer.echo(f"error: {format_validation_error(InferenceServeConfig, e, [], 'options')}", err=True)
        raise typer.Exit(2) from None
    run_inference_server(cfg, log=typer.echo)


def main() -> None:
    """Console entry point."""
    app()


if __name__ == "__main__":
    main()
