"""`ale up`: start the stack as separate processes, wait for health, run the job, report, tear down.

The run directory holds everything: `stack.json` (the services), `logs/`, the admin's SQLite
store, the worker's state, and `report.json`. `ale down` stops whatever `stack.json` lists.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from ale_proto.config import write_private
from ale_proto.serving import free_port

from ale.config import ConfigError, UpConfig, load_config
from ale.interrupts import sigterm_interrupts
from ale.supervisor import HealthTimeout, ServiceSpec, Stack, Watchdog

T = TypeVar("T")

SYSTEM_REQUIREMENTS = {"bwrap": "bubblewrap (apt-get install -y bubblewrap)"}


def missing_system_pieces() -> list[str]:
    """What the embedded default needs from the OS and does not find, with how to install it."""
    return [how for binary, how in SYSTEM_REQUIREMENTS.items() if shutil.which(binary) is None]


def new_run_dir(runs_root: Path) -> Path:
    """A fresh run directory under runs_root, with runs_root/latest pointing at it."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    run_dir = runs_root / f"{stamp}-{secrets.token_hex(2)}"
    run_dir.mkdir(parents=True)
    latest = runs_root / "latest"
    tmp = runs_root / f".latest-{secrets.token_hex(4)}"
    tmp.symlink_to(run_dir.name)
    tmp.replace(latest)
    return run_dir


SECRETS_DIR = "secrets"
"""Under the run dir (mode 0700): the services' secret config files and ``client.env``, each 0600."""
CLIENT_ENV = "client.env"
"""``KEY=value`` lines a client of the kept stack needs (``ale env`` prints them as exports)."""


def plan_services(run_dir: Path, cfg: UpConfig, model_dir: Path | None = None) -> tuple[list[ServiceSpec], dict[str, str]]:
    """The services of the stack, on free local ports, and how to reach them.

    Always: the Admin (sandboxes, EnvHub, its EnvService) and a Worker (local bubblewrap backend;
    it also serves the EnvService the RL rollouts use). With a model (``ale up`` always has one):
    the InferenceService on that model, the ModelProxy in front of it, and the TrainerService.
    The API key, join token and EnvService key go to the admin and worker in 0600 config files
    under ``<run_dir>/secrets/``; ``client.env`` there holds what a client needs (``ale env``).
    """
    bin_dir = Path(sys.executable).parent
    api_key, join_token, env_key = secrets.token_hex(16), secrets.token_hex(16), secrets.token_hex(16)
    admin_port, worker_port = free_port(), free_port()
    private = run_dir / SECRETS_DIR
    admin_cfg = write_private(private / "admin.yaml", json.dumps({"api_keys": {api_key: "default"},
                                                                  "join_token": join_token}) + "\n")
    worker_cfg = write_private(private / "worker.yaml", json.dumps({"join_token": join_token,
                                                                    "env_api_key": env_key}) + "\n")
    admin = ServiceSpec(
        "admin",
        [str(bin_dir / "ale-rock"), "admin", "--port", str(admin_port), "--db", str(run_dir / "admin.db"),
         "--config", str(admin_cfg)],
        admin_port,
        "ale.v1.SandboxService",
    )
    worker = ServiceSpec(
        "worker",
        [str(bin_dir / "ale-rock"), "worker", "--config", str(worker_cfg),
         "--set", f"address=127.0.0.1:{worker_port}",
         "--set", f"admin_address=127.0.0.1:{admin_port}",
         "--set", f"state_dir={run_dir / 'worker'}",
         "--set", "worker_id=local",
         "--set", f"pool_size={cfg.services.worker_pool_size}",
         "--set", f"max_sandboxes={cfg.services.max_sandboxes}",
         "--set", "heartbeat_interval_s=1",
         "--set", "serve_envs=true"],
        worker_port,
        "ale.v1.WorkerService",
    )
    endpoints = {"admin_address": f"127.0.0.1:{admin_port}", "api_key": api_key,
                 "env_address": f"127.0.0.1:{worker_port}", "env_api_key": env_key}
    specs = [admin, worker]
    client_env = {"ALE_ROCK_ADDRESS": endpoints["admin_address"], "ALE_ROCK_API_KEY": api_key}
    if model_dir is not None:
        inf_port, trainer_port, proxy_port, proxy_http = free_port(), free_port(), free_port(), free_port()
        specs.append(ServiceSpec(
            "inference", [str(bin_dir / "ale-roll"), "serve-inference", "--model", str(model_dir),
                          "--port", str(inf_port)], inf_port, "ale.v1.InferenceService",
            # One intra-op thread: the engine runs on the micro-batcher's thread, where a second OMP
            # pool spins against the first (measured 0.36 s vs 0.055 s per 64-prompt batch here).
            env={"OMP_NUM_THREADS": "1"}))
        specs.append(ServiceSpec(
            "model-proxy", [str(bin_dir / "ale-rock"), "proxy", "--grpc-port", str(proxy_port),
                            "--http-port", str(proxy_http), "--inference-address", f"127.0.0.1:{inf_port}"],
            proxy_port, "ale.v1.ModelProxyService"))
        specs.append(ServiceSpec(
            "trainer", [str(bin_dir / "ale-roll"), "serve", "--port", str(trainer_port)], trainer_port,
            "ale.v1.TrainerService", env={"OMP_NUM_THREADS": "1"}))
        endpoints.update({"inference_address": f"127.0.0.1:{inf_port}", "trainer_address": f"127.0.0.1:{trainer_port}",
                          "proxy_address": f"127.0.0.1:{proxy_port}", "proxy_http": f"http://127.0.0.1:{proxy_http}/v1"})
        client_env["ALE_PROXY_ADDRESS"] = f"127.0.0.1:{proxy_port}"
    write_private(private / CLIENT_ENV, "".join(f"{k}={v}\n" for k, v in client_env.items()))
    return specs, endpoints


def client_env(run_dir: Path) -> dict[str, str]:
    """What a client of the run's stack needs (address, API key), from its 0600 ``client.env``."""
    text = (run_dir / SECRETS_DIR / CLIENT_ENV).read_text()
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def smoke(endpoints: dict[str, str], cfg: UpConfig) -> dict[str, Any]:
    """Create sandboxes through the admin, run a command and a file round trip in each, delete them."""
    from ale_rock import Client, Sandbox

    started = time.monotonic()
    ok = 0
    with Client(endpoints["admin_address"], endpoints["api_key"], timeout=60) as client:
        # Wait until the worker has registered: the first create may otherwise find no capacity.
        deadline = time.monotonic() + 30
        while True:
            try:
                probe = Sandbox.create(client=client, ttl=120)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        probe.delete()
        for i in range(cfg.smoke.sandboxes):
            with Sandbox.create(client=client, ttl=120, labels={"ale-up": "smoke"}) as sb:
                sb.write("/workspace/hello.txt", f"hello {i}\n")
                res = sb.exec("cat /workspace/hello.txt && id -u", timeout=30)
                if res.exit_code == 0 and res.stdout.startswith(f"hello {i}"):
                    ok += 1
    return {"sandboxes": cfg.smoke.sandboxes, "ok": ok, "seconds": round(time.monotonic() - started, 3)}


class LiveProgress:
    """The live display of the job: the stage, a bar with ETA, and the latest reward/success."""

    def __init__(self, console: Any) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.console = console
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TextColumn("ETA"),
                            TimeRemainingColumn(), console=console, transient=False)
        self.task: Any = None

    def __enter__(self) -> LiveProgress:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def stage(self, name: str, total: int | None = None) -> None:
        if self.task is not None:
            self.bar.update(self.task, completed=self.bar.tasks[-1].total or self.bar.tasks[-1].completed)
        self.task = self.bar.add_task(name, total=total, info="")

    def update(self, done: int, **fields: Any) -> None:
        info = " ".join(f"{k}={v:.3f}" for k, v in fields.items() if isinstance(v, float))
        self.bar.update(self.task, completed=done, info=info)

    def log(self, text: str) -> None:
        self.console.log(text)


def quietly(fn: Callable[[], T], log: Path) -> T:
    """``fn()`` with what the libraries print (DeepSpeed's accelerator notice, progress bars) in
    ``log`` instead of between `ale up`'s own lines; a failure names the log."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as f, contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
        try:
            return fn()
        except Exception as e:
            raise RuntimeError(f"{type(e).__name__}: {e} (library output: {log})") from e


def run_up(*, config: Path | None, overrides: list[str], run_dir: Path | None, runs_root: Path, keep: bool) -> int:
    """The body of `ale up`; returns the process exit code."""
    from rich.console import Console

    console = Console(file=sys.stdout)  # bound now: `quietly` moves sys.stdout for library output only
    # No library progress bars (model loads) between the live display's lines; read at import.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        cfg = load_config(config, overrides)
    except ConfigError as e:  # before any run directory exists: `runs/latest` is left alone
        print(f"error: {e}", file=sys.stderr)
        return 2
    missing = missing_system_pieces()
    if missing:
        console.print("[red]missing system pieces:[/red] " + "; ".join(missing))
        return 3
    run_dir = run_dir or new_run_dir(runs_root)
    run_dir.mkdir(parents=True, exist_ok=True)
    run_dir = run_dir.resolve()
    console.print(f"[bold]ALE run directory:[/bold] {run_dir}")
    started = time.monotonic()
    stack = Stack(run_dir)
    report: dict[str, Any] = {"run_dir": str(run_dir), "services": {}}
    with sigterm_interrupts():
        return _run_stack(run_dir, cfg, stack, report, console, started, keep)


def _run_stack(run_dir: Path, cfg: UpConfig, stack: Stack, report: dict[str, Any], console: Any, started: float,
               keep: bool) -> int:
    """Start the services, check them, run the job; stop what was started unless ``keep``."""
    watchdog: Watchdog | None = None
    code = 0
    try:
        # Every service of the stack runs with or without the job (`job.enabled=false` is the stack
        # alone): the InferenceService serves the job's initial model either way.
        from ale.job.pipeline import prepare_model

        with console.status("building the initial model"):
            model_dir = quietly(lambda: prepare_model(run_dir, cfg.job), run_dir / "logs" / "model.log")
        specs, endpoints = plan_services(run_dir, cfg, model_dir)
        # All at once, then each waited for in order: none needs another to start (the worker
        # retries the admin until it registers; the proxy serves before the InferenceService does),
        # so the stack is up in the time of the slowest service rather than the sum of them.
        t0 = time.monotonic()
        for spec in specs:
            stack.start(spec)
        for spec in specs:
            with console.status(f"starting {spec.name} on 127.0.0.1:{spec.port}"):
                stack.wait_healthy(spec.name, cfg.services.health_timeout_s)
            report["services"][spec.name] = {"port": spec.port, "start_s": round(time.monotonic() - t0, 3)}
            console.print(f"  [green]✓[/green] {spec.name} healthy on 127.0.0.1:{spec.port}")
        watchdog = Watchdog(stack, [s.name for s in specs]).start()
        with console.status("stack check: sandboxes through admin → worker → rocklet"):
            report["smoke"] = smoke(endpoints, cfg)
        s = report["smoke"]
        console.print(f"  [green]✓[/green] stack check: {s['ok']}/{s['sandboxes']} sandboxes ok in {s['seconds']} s")
        if s["ok"] != s["sandboxes"]:
            code = 1
        if cfg.job.enabled and code == 0:
            from ale.job.agent_native import AgentNativeJob
            from ale.job.pipeline import DefaultJob, Endpoints
            from ale.job.report import render_funnel, render_table, render_verdict

            ep = Endpoints(endpoints["admin_address"], endpoints["api_key"], endpoints["env_address"],
                           endpoints["env_api_key"], endpoints["inference_address"], endpoints["trainer_address"],
                           endpoints["proxy_address"])
            job_class = AgentNativeJob if cfg.job.mode == "agent_native" else DefaultJob
            with LiveProgress(console) as progress:
                job = job_class(run_dir, cfg.job, ep, model_dir, progress).run()
            report.update(job)
            report["restarts"] = dict(watchdog.restarts)
            console.print(render_funnel(job["filter"]))
            console.print(render_table(report))
            if "agent_native" in job:
                an = job["agent_native"]
                console.print(f"agent-native RL: {an['episodes']} episodes in sandboxes at {an['episodes_per_s']}/s, "
                              f"{an['tool_calls']} tool calls ({an['tool_call_overhead_p50_ms']} ms over a local "
                              f"subprocess, p50), {an['errors']} errors, {an['resampled']} resampled")
            if "stack_vs_inprocess" in job:
                console.print(f"RL episodes/s through the stack vs in one process: {job['stack_vs_inprocess']}")
            console.print(render_verdict(job))
            if job.get("curves_png"):
                console.print(f"curves: {job['curves_png']}")
    except HealthTimeout as e:
        console.print(f"[red]service failed to start:[/red] {e}")
        code = 1
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/yellow]")
        code = 130
    except Exception as e:  # report any stage failure cleanly; the services still get stopped
        console.print(f"[red]{type(e).__name__}:[/red] {e}")
        report["error"] = f"{type(e).__name__}: {e}"
        code = 1
    finally:
        if watchdog is not None:
            watchdog.stop()
            report["restarts"] = dict(watchdog.restarts)
        report["wall_s"] = round(time.monotonic() - started, 3)
        (run_dir / "report.json").write_text(json.dumps(report, indent=2))
        if not keep:
            stack.stop_all()
    console.print(f"report: {run_dir / 'report.json'}")
    if keep and stack.services:
        # The API key is in a 0600 file, not on the screen or any command line: `ale env` prints it.
        console.print('services left running: [bold]eval "$(ale env)"[/bold] sets ALE_ROCK_ADDRESS and '
                      "ALE_ROCK_API_KEY for clients (ale-rock sandbox ls, …); [bold]ale down[/bold] stops them",
                      soft_wrap=True)
    return code
