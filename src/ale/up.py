"""`ale up`: start the stack as separate processes, wait for health, run the job, report, tear down.

The run directory holds everything: `stack.json` (the services), `logs/`, the admin's SQLite
store, the worker's state, and `report.json`. `ale down` stops whatever `stack.json` lists.
"""

from __future__ import annotations

import json
import secrets
import shutil
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ale.config import ConfigError, UpConfig, load_config
from ale.supervisor import HealthTimeout, ServiceSpec, Stack, free_port

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


def plan_services(run_dir: Path, cfg: UpConfig) -> tuple[list[ServiceSpec], dict[str, str]]:
    """The services of the embedded default, on free local ports, and how to reach them."""
    bin_dir = Path(sys.executable).parent
    api_key, join_token = secrets.token_hex(16), secrets.token_hex(16)
    admin_port, worker_port = free_port(), free_port()
    admin = ServiceSpec(
        "admin",
        [str(bin_dir / "ale-rock"), "admin", "--port", str(admin_port), "--db", str(run_dir / "admin.db"),
         "--api-key", f"{api_key}=default", "--join-token", join_token],
        admin_port,
        "ale.v1.SandboxService",
    )
    worker = ServiceSpec(
        "worker",
        [str(bin_dir / "ale-rock"), "worker",
         "--set", f"address=127.0.0.1:{worker_port}",
         "--set", f"admin_address=127.0.0.1:{admin_port}",
         "--set", f"join_token={join_token}",
         "--set", f"state_dir={run_dir / 'worker'}",
         "--set", "worker_id=local",
         "--set", f"pool_size={cfg.services.worker_pool_size}",
         "--set", f"max_sandboxes={cfg.services.max_sandboxes}",
         "--set", "heartbeat_interval_s=1"],
        worker_port,
        "ale.v1.WorkerService",
    )
    return [admin, worker], {"admin_address": f"127.0.0.1:{admin_port}", "api_key": api_key}


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


def run_up(*, config: Path | None, overrides: list[str], run_dir: Path | None, runs_root: Path, keep: bool) -> int:
    """The body of `ale up`; returns the process exit code."""
    from rich.console import Console

    console = Console()
    try:
        cfg = load_config(config, overrides)
    except ConfigError as e:
        console.print(f"[red]config error:[/red] {e}")
        return 2
    missing = missing_system_pieces()
    if missing:
        console.print("[red]missing system pieces:[/red] " + "; ".join(missing))
        return 3
    run_dir = run_dir or new_run_dir(runs_root)
    run_dir.mkdir(parents=True, exist_ok=True)
    console.print(f"[bold]ALE run directory:[/bold] {run_dir}")
    started = time.monotonic()
    stack = Stack(run_dir)
    report: dict[str, Any] = {"run_dir": str(run_dir), "services": {}}
    code = 0
    try:
        specs, endpoints = plan_services(run_dir, cfg)
        for spec in specs:
            t0 = time.monotonic()
            with console.status(f"starting {spec.name} on 127.0.0.1:{spec.port}"):
                stack.start(spec)
                stack.wait_healthy(spec.name, cfg.services.health_timeout_s)
            report["services"][spec.name] = {"port": spec.port, "start_s": round(time.monotonic() - t0, 3)}
            console.print(f"  [green]✓[/green] {spec.name} healthy on 127.0.0.1:{spec.port}")
        with console.status("stack check: sandboxes through admin → worker → rocklet"):
            report["smoke"] = smoke(endpoints, cfg)
        s = report["smoke"]
        console.print(f"  [green]✓[/green] stack check: {s['ok']}/{s['sandboxes']} sandboxes ok in {s['seconds']} s")
        if s["ok"] != s["sandboxes"]:
            code = 1
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
        report["wall_s"] = round(time.monotonic() - started, 3)
        (run_dir / "report.json").write_text(json.dumps(report, indent=2))
        if not keep:
            stack.stop_all()
    console.print(f"report: {run_dir / 'report.json'}")
    return code
