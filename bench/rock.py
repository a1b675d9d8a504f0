"""ale-rock through its SDK: an Admin and a Worker on free local ports, measured end to end.

    python bench/rock.py --json [--concurrent 100] [--iterations 50] [--docker-runs 10] [--backend local]
                         [--pool-size N]

Every figure comes from this run, baselines included (a bare local spawn of the same command, and
``docker run --rm`` when an engine and an image are available). The result is one JSON object.
With ``--backend docker`` and no ``--pool-size`` it runs twice through an Admin and a Worker: with
the worker's warm pools off (``create_cold_*``: every create starts a container) and with them on,
each create timed once the pools have refilled (``create_warm_*``, also ``create_*``: a warm claim;
``create_warm_rpc_*`` and ``create_warm_first_exec_*`` split it). One ``docker run --rm`` of the
sandboxes' image is timed before every create of both runs (``docker_run_p50_ms``), so the ratios
(``create_cold_vs_docker_run``, ``create_warm_vs_docker_run``) compare samples taken under the same
load; the load average is part of the result. Docker defaults: ``--concurrent 0 --iterations 10``,
with the backend's default limits (about a minute on a quiet 2-core machine).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

COMMAND = ["true"]


class BenchConfig(BaseModel):
    """What to measure."""

    model_config = ConfigDict(extra="forbid")

    concurrent: int = Field(default=100, ge=0)
    """Sandboxes held alive at once."""
    iterations: int = Field(default=50, ge=1)
    """Samples of create→first exec, exec round trip and local spawn."""
    docker_runs: int = Field(default=10, ge=0)
    """Samples of ``docker run --rm`` (0 skips it)."""
    docker_image: str = ""
    """Image for the docker baseline; "" picks a local image whose name contains "ale"."""
    backend: str = "local"
    """Backend of the sandboxes."""
    cpu: float = 0.1
    """CPU cores each sandbox asks for."""
    memory: str = "128Mi"
    """Memory each sandbox asks for."""
    create_concurrency: int = Field(default=4, ge=1)
    """Creates in flight at once for the concurrent workload."""
    pool_size: int | None = None
    """The worker's ``pool_size`` (None = its default; 0 turns warm pools off)."""
    wait_for_pool: bool = False
    """Docker: time each create only once the worker's warm pools have settled (every slot
    started), so the figure is a warm claim and not a race with the refill."""
    exec_rtt: bool = True
    """Measure the exec round trip (the docker cold run skips it: the warm run measures it)."""
    interleave_docker_run: bool = False
    """Time one ``docker run --rm`` before each create (instead of ``docker_runs`` after them), so
    the baseline and the creates share the load of the moment."""


def _pct(samples: list[float], q: float) -> float | None:
    if not samples:
        return None
    s = sorted(samples)
    return round(s[min(len(s) - 1, int(q * len(s)))] * 1000, 3)


def _timed(fn: Callable[[], Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _docker_image(wanted: str) -> str | None:
    if shutil.which("docker") is None:
        return None
    try:
        if subprocess.run(["docker", "info"], capture_output=True, timeout=10).returncode != 0:
            return None
        if wanted:
            return wanted
        names = subprocess.run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"], capture_output=True,
                               text=True, timeout=10).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return None
    preferred = [n for n in names if "ale" in n] or names
    return preferred[0] if preferred else None


def _containers(worker_id: str) -> int:
    """Containers the bench's worker left on the Docker engine (labelled by the docker backend)."""
    if shutil.which("docker") is None:
        return 0
    try:
        out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=ale.worker={worker_id}"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return len(out.stdout.split()) if out.returncode == 0 else 0


def _leftovers(marker: str) -> dict[str, int]:
    procs = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    procs += 1
            except OSError:
                continue
    try:
        mounts = sum(marker in line for line in Path("/proc/self/mounts").read_text().splitlines())
    except OSError:
        mounts = 0
    return {"processes": procs, "mounts": mounts}


def run_bench(cfg: BenchConfig, progress: bool = True) -> dict[str, Any]:
    """Run every workload and return the figures."""
    from ale_rock.local_cluster import LocalCluster, real_worker_argv
    from ale_rock.sdk.sandbox import Sandbox

    def say(msg: str) -> None:
        if progress:
            print(f"[bench] {msg}", file=sys.stderr, flush=True)

    failures: list[str] = []
    result: dict[str, Any] = {"backend": cfg.backend, "command": " ".join(COMMAND)}
    say("local spawn baseline")
    result["subprocess_p50_ms"] = _pct(_timed(lambda: subprocess.run(COMMAND, check=True), cfg.iterations), 0.5)

    n = max(cfg.concurrent, 1) + 16
    worker_extra: dict[str, Any] = {
        "backend": cfg.backend, "max_sandboxes": n,
        # Explicit overcommit for the benchmark: the worker advertises room for every sandbox's request.
        "cpu_millis": int(n * cfg.cpu * 1000) + 1000, "memory_bytes": n * 2**30,
    }
    if cfg.pool_size is not None:
        worker_extra["pool_size"] = cfg.pool_size
    cluster = LocalCluster(
        workers=0, worker_argv=real_worker_argv(worker_extra),
        admin_config={"max_concurrent_sandboxes": n + 10, "start_timeout_s": 120},
    )
    t_start = time.perf_counter()
    with cluster:
        say("starting admin and worker")
        cluster.start_worker("bench")
        result["cluster_start_s"] = round(time.perf_counter() - t_start, 3)
        marker = str(cluster.worker_state_dir("bench")) + "/"
        client = cluster.client(timeout=120)
        kw = {"cpu": cfg.cpu, "memory": cfg.memory, "backend": cfg.backend}

        wanted = cfg.docker_image
        if not wanted and cfg.backend == "docker":  # the baseline runs the image the sandboxes run
            from ale_rock.backends.docker_runtime import default_base_image

            wanted = default_base_image()
        image = _docker_image(wanted) if cfg.docker_runs else None
        runs: list[float] = []

        say(f"create → first exec × {cfg.iterations}")
        create: list[float] = []
        rpc: list[float] = []
        for _ in range(cfg.iterations):
            if cfg.interleave_docker_run and image:
                runs += _timed(lambda: _docker_run(image), 1)
            if cfg.wait_for_pool:
                _settle_pools(cluster.worker_state_dir("bench") / "docker")
            try:
                t0 = time.perf_counter()
                sb = Sandbox.create(client=client, **kw)  # type: ignore[arg-type]
                t1 = time.perf_counter()
                sb.exec(COMMAND)
                create.append(time.perf_counter() - t0)
                rpc.append(t1 - t0)
                sb.delete()
            except Exception as e:  # counted, not fatal: the benchmark reports failures
                failures.append(f"create: {e}")
        result["create_p50_ms"], result["create_p99_ms"] = _pct(create, 0.5), _pct(create, 0.99)
        result["create_rpc_p50_ms"] = _pct(rpc, 0.5)
        result["first_exec_p50_ms"] = _pct([c - r for c, r in zip(create, rpc, strict=True)], 0.5)

        result["exec_rtt_p50_ms"] = result["exec_rtt_p99_ms"] = None
        if cfg.exec_rtt:
            say(f"exec round trip × {cfg.iterations * 4}")
            try:
                with Sandbox.create(client=client, **kw) as sb:  # type: ignore[arg-type]
                    sb.exec(COMMAND)
                    rtt = _timed(lambda: sb.exec(COMMAND), cfg.iterations * 4)
                    direct = _direct_worker_rtt(cluster, sb.id, cfg.iterations * 4)
                result["exec_rtt_p50_ms"], result["exec_rtt_p99_ms"] = _pct(rtt, 0.5), _pct(rtt, 0.99)
                # the same exec sent straight to the worker's Rocklet proxy: the Admin hop is the difference
                result["worker_direct_exec_p50_ms"] = _pct(direct, 0.5)
            except Exception as e:
                failures.append(f"exec: {e}")

        say(f"{cfg.concurrent} sandboxes held at once")
        result["concurrent"] = 0
        if cfg.concurrent:
            result.update(asyncio.run(_concurrent(cluster, cfg, kw, failures)))
        client.close()

        result["docker_image"] = image
        if image and not cfg.interleave_docker_run:
            say(f"docker run --rm × {cfg.docker_runs} ({image})")
            runs = _timed(lambda: _docker_run(image), cfg.docker_runs)
        result["docker_run_p50_ms"] = _pct(runs, 0.5)
        result["docker_run_samples"] = [round(r * 1000, 1) for r in runs]
        say("stopping (the worker reaps every sandbox)")
    # after a graceful stop nothing of the worker's sandboxes may remain
    deadline = time.monotonic() + 10
    left = _leftovers(marker)
    while sum(left.values()) and time.monotonic() < deadline:
        time.sleep(0.2)
        left = _leftovers(marker)
    if cfg.backend == "docker":
        left["containers"] = _containers("bench")
    result["leaked"] = sum(left.values())
    result["leaked_detail"] = left
    result["failures"] = len(failures)
    result["failure_samples"] = failures[:5]
    if result.get("create_p50_ms") and result.get("docker_run_p50_ms"):
        result["docker_over_create_p50"] = round(result["docker_run_p50_ms"] / result["create_p50_ms"], 2)
    return result


def _docker_run(image: str) -> None:
    subprocess.run(["docker", "run", "--rm", "--network", "none", image, *COMMAND], capture_output=True, timeout=60)


SETTLED_S = 0.4
"""How long the warm slots must stay the same to count as settled: longer than the pools' refill
delay after a claim (``pool_refill_delay_s``, 0.25 s), so a held-back refill is not missed."""


def _settle_pools(root: Path, timeout_s: float = 120.0) -> None:
    """Wait until the docker worker's warm slots (``_pool-*`` dirs) are all ready: a ready slot's
    socket dir is sealed (0755, no longer the sandbox's), and the set stays the same for
    ``SETTLED_S``."""

    def slots() -> tuple[frozenset[str], bool]:
        names: set[str] = set()
        ready = True
        for d in root.glob("_pool-*"):
            names.add(d.name)
            try:
                st = (d / "sock").stat()
                sealed = st.st_uid == 0 if os.getuid() == 0 else (st.st_mode & 0o777) == 0o755
                ready = ready and sealed and (d / "sock" / "rocklet.sock").exists()
            except OSError:
                ready = False
        return frozenset(names), ready and bool(names)

    deadline = time.monotonic() + timeout_s
    last: frozenset[str] | None = None
    since = time.monotonic()
    while time.monotonic() < deadline:
        names, ready = slots()
        if not ready or names != last:
            last, since = (names if ready else None), time.monotonic()
        elif time.monotonic() - since >= SETTLED_S:
            return
        time.sleep(0.05)


def _direct_worker_rtt(cluster: Any, sandbox_id: str, n: int) -> list[float]:
    import sqlite3

    from ale_proto.v1 import rocklet_pb2, rocklet_pb2_grpc, sandbox_pb2
    from ale_rock.grpc_options import channel_options
    from ale_rock.worker.auth import worker_channel

    with sqlite3.connect(str(cluster.dir / "admin.db")) as db:
        info = db.execute("SELECT info FROM workers").fetchone()[0]
    worker = json.loads(info)  # the worker's credential is in the admin's store (0600)
    channel = worker_channel(worker["address"], worker.get("secret", ""), options=channel_options())
    stub = rocklet_pb2_grpc.RockletServiceStub(channel)
    req = rocklet_pb2.RockletServiceExecRequest(spec=sandbox_pb2.ExecSpec(argv=COMMAND))
    md = (("ale-sandbox-id", sandbox_id),)
    try:
        return _timed(lambda: stub.Exec(req, metadata=md, timeout=30), n)
    finally:
        channel.close()


async def _concurrent(cluster: Any, cfg: BenchConfig, kw: dict[str, Any], failures: list[str]) -> dict[str, Any]:
    """Create ``cfg.concurrent`` sandboxes (bounded concurrency), exec in each while all are alive,
    then delete them. Every failure is counted; the survivors still count as held."""
    from ale_rock.sdk.async_sandbox import AsyncSandbox

    client = cluster.async_client(timeout=300)
    gate = asyncio.Semaphore(cfg.create_concurrency)

    async def one() -> AsyncSandbox:
        async with gate:
            return await AsyncSandbox.create(client=client, **kw)

    t0 = time.perf_counter()
    made = await asyncio.gather(*(one() for _ in range(cfg.concurrent)), return_exceptions=True)
    created_s = time.perf_counter() - t0
    boxes = [m for m in made if isinstance(m, AsyncSandbox)]
    failures.extend(f"concurrent create: {m}" for m in made if isinstance(m, BaseException))
    results = await asyncio.gather(*(sb.exec(COMMAND) for sb in boxes), return_exceptions=True)
    alive = sum(1 for r in results if not isinstance(r, BaseException) and r.ok)
    failures.extend(f"concurrent exec: {r}" for r in results if isinstance(r, BaseException))

    async def drop(sb: AsyncSandbox) -> None:
        async with gate:
            await sb.delete()

    dropped = await asyncio.gather(*(drop(sb) for sb in boxes), return_exceptions=True)
    failures.extend(f"concurrent delete: {d}" for d in dropped if isinstance(d, BaseException))
    await client.close()
    return {"concurrent": alive, "concurrent_create_s": round(created_s, 3)}


DOCKER_DEFAULTS: dict[str, Any] = {"concurrent": 0, "iterations": 10, "docker_runs": 10, "cpu": 1.0, "memory": "512Mi"}
"""``--backend docker``'s defaults: a minute or so on a quiet machine (each sample is a container).
The sandboxes get the backend's default limits (1 CPU, 512 MiB; ``docker run`` has none): under a
0.1-CPU quota the Rocklet's ~150 ms of start-up CPU alone takes 1.5 s, which is the quota, not
the backend."""
LOCAL_DEFAULTS: dict[str, Any] = {"concurrent": 100, "iterations": 50, "docker_runs": 10, "cpu": 0.1, "memory": "128Mi"}


def main(argv: list[str] | None = None) -> None:
    """Print the figures as one JSON object (progress goes to stderr unless ``--json``)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true", help="print only the JSON object")
    p.add_argument("--concurrent", type=int, default=None, help="sandboxes held alive at once (100; docker 0)")
    p.add_argument("--iterations", type=int, default=None, help="create→first-exec samples (50; docker 10)")
    p.add_argument("--docker-runs", type=int, default=None, help="docker run --rm samples (10; 0 = skip)")
    p.add_argument("--backend", default="local", help="backend of the sandboxes")
    p.add_argument("--pool-size", type=int, default=None, help="the worker's warm pool floor (0 = pools off)")
    args = p.parse_args(argv)
    defaults = DOCKER_DEFAULTS if args.backend == "docker" else LOCAL_DEFAULTS
    given = {k: getattr(args, k) for k in defaults if getattr(args, k, None) is not None}
    try:
        cfg = BenchConfig(**{**defaults, **given}, backend=args.backend, pool_size=args.pool_size)
    except ValidationError as e:
        first = e.errors()[0]
        print(f"error: --{str(first['loc'][0]).replace('_', '-')}: {first['msg']}", file=sys.stderr)
        raise SystemExit(2) from None
    load_before, cleaner_before = os.getloadavg(), btrfs_cleaner_cpu_s()
    if cfg.backend == "docker" and cfg.pool_size is None:
        result = docker_cold_and_warm(cfg, progress=not args.json)
    else:
        result = run_bench(cfg, progress=not args.json)
    result["loadavg_before"] = [round(x, 2) for x in load_before]
    result["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    if cfg.backend == "docker":
        # The engine's file system deleting removed containers: on btrfs with classic qgroups this
        # kernel thread took a core for minutes under churn and every first command waited on it.
        result["btrfs_cleaner_cpu_s"] = round(btrfs_cleaner_cpu_s() - cleaner_before, 2)
    print(json.dumps(result))


def btrfs_cleaner_cpu_s() -> float:
    """CPU seconds used so far by every ``btrfs-cleaner`` kernel thread on this host (0 if none)."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            text = stat.read_text()
            if "(btrfs-cleaner)" in text:
                fields = text.rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / os.sysconf("SC_CLK_TCK")


def docker_cold_and_warm(cfg: BenchConfig, progress: bool = True) -> dict[str, Any]:
    """Two runs of the docker backend through Admin + Worker: warm pools off (every create starts a
    container: ``create_cold_*``), then on with each create timed after the pools refilled
    (``create_warm_*`` = ``create_*``). Each run times a ``docker run --rm`` before every create;
    ``docker_run_p50_ms`` is the median of all of them, the baseline of both ratios."""
    both = {"interleave_docker_run": True}
    cold = run_bench(cfg.model_copy(update={**both, "pool_size": 0, "concurrent": 0, "exec_rtt": False}), progress)
    warm = run_bench(cfg.model_copy(update={**both, "pool_size": 2, "wait_for_pool": True}), progress)
    out = dict(warm)
    out["create_warm_p50_ms"], out["create_warm_p99_ms"] = warm.get("create_p50_ms"), warm.get("create_p99_ms")
    out["create_warm_rpc_p50_ms"] = warm.get("create_rpc_p50_ms")
    out["create_warm_first_exec_p50_ms"] = warm.get("first_exec_p50_ms")
    out["create_cold_p50_ms"], out["create_cold_p99_ms"] = cold.get("create_p50_ms"), cold.get("create_p99_ms")
    runs = cold["docker_run_samples"] + warm["docker_run_samples"]
    out["docker_run_samples"] = runs
    out["docker_run_p50_ms"] = round(statistics.median(runs), 3) if runs else None
    out["failures"] = warm["failures"] + cold["failures"]
    out["failure_samples"] = (cold["failure_samples"] + warm["failure_samples"])[:5]
    out["leaked"] = warm["leaked"] + cold["leaked"]
    run = out["docker_run_p50_ms"]
    for phase in ("cold", "warm"):
        mine = out[f"create_{phase}_p50_ms"]
        out[f"create_{phase}_vs_docker_run"] = round(mine / run, 3) if run and mine else None
    out.pop("docker_over_create_p50", None)  # the warm run's own ratio, superseded by the two above
    return out


if __name__ == "__main__":
    main()
