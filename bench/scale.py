"""The control plane at scale: one real Admin, many simulated workers, thousands of creates in flight.

    python bench/scale.py --json [--levels 1000,4000,16000] [--workers 100] [--watchers 8] [--quick]
                                 [--profile DIR] [--baseline-src DIR]

For each level a fresh Admin (a subprocess: ``ale_rock.admin.server.serve_admin``, as ``ale-rock
admin`` runs it, so its CPU and peak RSS are its own) and a fresh process of simulated workers
start; the workers speak the real worker protocol — RegisterWorker with the join token and their
credential, Heartbeat at the interval the Admin asks with every sandbox they hold, and a real
WorkerService gRPC server each, on its own port, that checks the credential and answers
StartSandbox/StopSandbox/RemoveSandbox at once without starting anything. Then ``level`` creates
(``wait=true``: the latency is until the sandbox is RUNNING) go out together through the real
CreateSandbox RPC, spread over ``--namespaces`` API keys, and every one is timed from the moment
all were issued; meanwhile ``--watchers`` WatchSandboxes streams take every change of their
namespace (the fan-out), and the bench checks each got all of them.

Figures per level: create p50/p99/max (ms), creates/s (level / wall time of the burst), the
Admin's CPU seconds during the burst and its peak RSS, state-store commits (counted by the Store)
per second and per create, and the CPU the simulated workers and this client used (the machine is
shared between all three: their sum bounds creates/s). ``uptime`` is recorded beside.
``--profile DIR`` writes a cProfile of each level's Admin. ``--baseline-src DIR`` runs each level
first against the Admin of another ``ale_rock`` source tree and reports ``vs_baseline`` ratios
(> 1 is better: baseline/now for latencies and CPU, now/baseline for creates/s).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

HERE = Path(__file__).resolve()
JOIN_TOKEN = "scale-bench-join-token"


# -- the Admin, wrapped so the bench can read its commit count ------------------------------------
def run_admin(config_path: Path, ready: Path, stats: Path, profile: Path | None) -> None:
    """The Admin as ``ale-rock admin`` runs it, plus a thread that writes its Store's commit count."""
    from ale_rock.admin import server
    from ale_rock.admin.config import AdminConfig
    from ale_rock.admin.logs import configure
    from ale_rock.admin.store import Store

    stores: list[Any] = []  # CountedStore instances

    class CountedStore(Store):
        """Counts its own write transactions, so the same bench measures an Admin from before
        ``Store.commits`` existed (a baseline checkout on PYTHONPATH)."""

        def __init__(self, *a: Any, **kw: Any) -> None:
            self.counted = 0
            super().__init__(*a, **kw)
            stores.append(self)

        def _write(self, sql: str, args: Any = ()) -> int:
            self.counted += 1
            return super()._write(sql, args)

    server.Store = CountedStore  # type: ignore[misc]

    def report(*_: Any) -> None:
        # On demand (SIGUSR1), not on a timer: the count costs the measured Admin nothing meanwhile.
        tmp = stats.with_suffix(".tmp")
        tmp.write_text(json.dumps({"commits": sum(s.counted for s in stores), "at": time.monotonic_ns()}))
        tmp.replace(stats)

    signal.signal(signal.SIGUSR1, report)
    cfg = AdminConfig.load(config_path)
    configure("INFO")

    def on_ready(port: int) -> None:
        tmp = ready.with_suffix(".tmp")
        tmp.write_text(str(port))
        tmp.replace(ready)

    if profile is None:
        server.serve_admin(cfg, on_ready)
        return
    import cProfile

    prof = cProfile.Profile()
    prof.enable()
    try:
        server.serve_admin(cfg, on_ready)
    finally:
        prof.disable()
        prof.dump_stats(str(profile))


# -- simulated workers ------------------------------------------------------------------------------
async def run_workers(admin: str, count: int, ready: Path) -> None:
    """``count`` worker identities in one process, each with its own WorkerService port and secret."""
    import grpc
    from ale_proto.v1 import common_pb2, sandbox_pb2, worker_pb2, worker_pb2_grpc
    from ale_rock.worker.auth import WORKER_SECRET_METADATA, new_secret, secret_of

    running = sandbox_pb2.SANDBOX_STATE_RUNNING

    class SimWorker(worker_pb2_grpc.WorkerServiceServicer):
        def __init__(self, wid: str) -> None:
            self.wid = wid
            self.secret = new_secret()
            self.sandboxes: dict[str, Any] = {}  # id → SandboxState
            self.calls = 0

        async def _check(self, context: Any) -> None:
            # As the real worker's interceptor: only the Admin, which learnt the secret, gets in.
            if secret_of(context.invocation_metadata()) != self.secret:
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, "wrong worker credential")

        async def StartSandbox(self, request: Any, context: Any) -> Any:
            await self._check(context)
            self.calls += 1
            self.sandboxes[request.sandbox_id] = running
            return worker_pb2.StartSandboxResponse(state=running)

        async def StopSandbox(self, request: Any, context: Any) -> Any:
            await self._check(context)
            if request.sandbox_id in self.sandboxes:
                self.sandboxes[request.sandbox_id] = sandbox_pb2.SANDBOX_STATE_STOPPED
            return worker_pb2.WorkerServiceStopSandboxResponse()

        async def RemoveSandbox(self, request: Any, context: Any) -> Any:
            await self._check(context)
            self.sandboxes.pop(request.sandbox_id, None)
            return worker_pb2.RemoveSandboxResponse()

    channel = grpc.aio.insecure_channel(admin)
    registry = worker_pb2_grpc.WorkerRegistryServiceStub(channel)
    auth = (("authorization", f"Bearer {JOIN_TOKEN}"),)
    sims = [SimWorker(f"sim-{i:04d}") for i in range(count)]
    servers = []
    for sim in sims:
        srv = grpc.aio.server()
        worker_pb2_grpc.add_WorkerServiceServicer_to_server(sim, srv)
        port = srv.add_insecure_port("127.0.0.1:0")
        await srv.start()
        servers.append((sim, srv, port))

    async def register(sim: SimWorker, port: int) -> int:
        info = worker_pb2.WorkerInfo(
            worker_id=sim.wid, address=f"127.0.0.1:{port}",
            capacity=common_pb2.Resources(cpu_millis=10**9, memory_bytes=2**50),
            backends=[sandbox_pb2.SANDBOX_BACKEND_LOCAL],
        )
        resp = await registry.RegisterWorker(
            worker_pb2.RegisterWorkerRequest(worker=info, running_sandbox_ids=list(sim.sandboxes)),
            metadata=(*auth, (WORKER_SECRET_METADATA, sim.secret)), timeout=30,
        )
        keep = set(resp.keep_sandbox_ids)
        for sid in [s for s in sim.sandboxes if s not in keep]:
            sim.sandboxes.pop(sid)
        return int(resp.heartbeat_interval_ms)

    async def beat(sim: SimWorker, port: int, interval_ms: int) -> None:
        # Spread the heartbeats over the interval, as independent workers would be.
        await asyncio.sleep(interval_ms / 1000 * (hash(sim.wid) % 1000) / 1000)
        while True:
            statuses = [worker_pb2.WorkerSandboxStatus(sandbox_id=k, state=v) for k, v in sim.sandboxes.items()]
            try:
                hb = await registry.Heartbeat(
                    worker_pb2.HeartbeatRequest(worker_id=sim.wid, sandboxes=statuses), metadata=auth, timeout=30
                )
                interval_ms = hb.heartbeat_interval_ms or interval_ms
                if not hb.known:
                    interval_ms = await register(sim, port)
            except grpc.aio.AioRpcError as e:
                print(f"{sim.wid}: heartbeat {e.code()}", file=sys.stderr, flush=True)
            await asyncio.sleep(interval_ms / 1000)

    intervals = await asyncio.gather(*(register(sim, port) for sim, _, port in servers))
    tasks = [asyncio.create_task(beat(sim, port, iv)) for (sim, _, port), iv in zip(servers, intervals, strict=True)]
    tmp = ready.with_suffix(".tmp")
    tmp.write_text(str(os.getpid()))
    tmp.replace(ready)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    for t in tasks:
        t.cancel()
    print(json.dumps({"start_calls": sum(s.calls for s in sims)}), flush=True)


# -- the orchestrator and the client -----------------------------------------------------------------
def _wait_file(path: Path, proc: subprocess.Popen[Any], what: str, timeout: float = 120.0) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start (exit {proc.poll()})")
        time.sleep(0.02)
    return path.read_text()


def _peak_rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def _cpu_s(p: psutil.Process) -> float:
    t = p.cpu_times()
    return float(t.user + t.system)


def _commits(admin: subprocess.Popen[Any], stats: Path) -> int:
    """Ask the Admin for its commit count (SIGUSR1) and read the answer."""
    def read() -> dict[str, int]:
        with contextlib.suppress(FileNotFoundError, ValueError):
            return dict(json.loads(stats.read_text()))
        return {}

    before = read().get("at")
    admin.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        now = read()
        if now.get("at", before) != before:
            return int(now["commits"])
        time.sleep(0.01)
    raise RuntimeError("the admin wrote no commit count")


async def _burst(address: str, keys: list[str], n: int, channels: int,
                 watchers: int = 0) -> tuple[list[float], list[str], float, dict[str, Any]]:
    """``n`` CreateSandbox(wait=true) calls issued together; their latencies (s), errors, wall time,
    and what ``watchers`` WatchSandboxes streams (round-robin over the namespaces) received."""
    import grpc
    from ale_proto.v1 import common_pb2, sandbox_pb2, sandbox_pb2_grpc

    chans = [grpc.aio.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])
             for _ in range(channels)]
    stubs = [sandbox_pb2_grpc.SandboxServiceStub(c) for c in chans]
    spec = sandbox_pb2.SandboxSpec(resources=common_pb2.Resources(cpu_millis=100, memory_bytes=64 * 2**20),
                                   backend=sandbox_pb2.SANDBOX_BACKEND_LOCAL)
    latencies: list[float] = []
    errors: list[str] = []
    received = [0] * watchers
    created = [0] * len(keys)  # per namespace

    async def watch(j: int) -> None:
        md = (("authorization", f"Bearer {keys[j % len(keys)]}"),)
        call = stubs[j % channels].WatchSandboxes(sandbox_pb2.WatchSandboxesRequest(), metadata=md)
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.CancelledError):
            async for _ in call:
                received[j] += 1

    streams = [asyncio.create_task(watch(j)) for j in range(watchers)]
    if watchers:
        await asyncio.sleep(0.5)  # subscribed before the burst
    t0 = time.monotonic()

    async def one(i: int) -> None:
        md = (("authorization", f"Bearer {keys[i % len(keys)]}"),)
        try:
            resp = await stubs[i % channels].CreateSandbox(
                sandbox_pb2.CreateSandboxRequest(spec=spec, wait=True), metadata=md, timeout=600)
            created[i % len(keys)] += 1  # its changes reach the watchers, whatever its state
            if resp.sandbox.state != sandbox_pb2.SANDBOX_STATE_RUNNING:
                errors.append(f"state {resp.sandbox.state}")
            else:
                latencies.append(time.monotonic() - t0)
        except grpc.aio.AioRpcError as e:
            errors.append(f"{e.code().name}: {e.details()} (after {time.monotonic() - t0:.1f} s)")

    await asyncio.gather(*(one(i) for i in range(n)))
    wall = time.monotonic() - t0
    # Each watcher sees two changes (created PENDING, then RUNNING or FAILED) per create of its
    # namespace that the Admin answered (a call gRPC cancelled never reached it).
    expected = sum(2 * created[j % len(keys)] for j in range(watchers))
    deadline = time.monotonic() + 30
    while sum(received) < expected and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    watched: dict[str, Any] = {"watchers": watchers, "watch_events": sum(received), "watch_events_expected": expected,
                               "watch_drain_s": round(time.monotonic() - t0 - wall, 2)}
    for t in streams:
        t.cancel()
    await asyncio.gather(*streams, return_exceptions=True)
    for c in chans:
        await c.close()
    return latencies, errors, wall, watched


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * len(s)) - 1))]


def run_level(level: int, workers: int, namespaces: int, workdir: Path, profile: Path | None,
              channels: int = 8, admin_src: Path | None = None, watchers: int = 0) -> dict[str, Any]:
    """One fresh Admin + simulated workers; one burst of ``level`` creates. ``admin_src``: run the
    Admin from that ``ale_rock`` source tree instead (a baseline checkout)."""
    import yaml

    workdir.mkdir(parents=True, exist_ok=True)
    keys = [f"scale-key-{i}" for i in range(namespaces)]
    cap = level * 2 + 100
    cfg = {
        "host": "127.0.0.1", "port": 0, "db_path": str(workdir / "admin.db"), "join_token": JOIN_TOKEN,
        "api_keys": {k: f"ns{i}" for i, k in enumerate(keys)},
        "default_quota": {"max_sandboxes": cap, "max_cpu_millis": cap * 1000, "max_memory_bytes": 2**50},
        "max_concurrent_sandboxes": cap, "envs": {"enabled": False}, "envhub": None,
        "worker_lost_after_s": 60, "recovery_grace_s": 0,
    }
    (workdir / "admin.yaml").write_text(yaml.safe_dump(cfg))
    ready, stats = workdir / "admin.port", workdir / "admin.stats"
    argv = [sys.executable, str(HERE), "--role", "admin", "--config", str(workdir / "admin.yaml"),
            "--ready", str(ready), "--stats", str(stats)]
    if profile is not None:
        argv += ["--profile-out", str(profile)]
    log = (workdir / "admin.log").open("wb")
    env = dict(os.environ)
    if admin_src is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(admin_src), env.get("PYTHONPATH", "")]))
    admin = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True, env=env)
    sim: subprocess.Popen[bytes] | None = None
    try:
        port = int(_wait_file(ready, admin, "admin"))
        address = f"127.0.0.1:{port}"
        sim_ready = workdir / "workers.ready"
        sim = subprocess.Popen(
            [sys.executable, str(HERE), "--role", "workers", "--admin", address, "--workers", str(workers),
             "--ready", str(sim_ready)],
            stdout=subprocess.PIPE, stderr=(workdir / "workers.log").open("wb"), start_new_session=True,
        )
        _wait_file(sim_ready, sim, "simulated workers")
        time.sleep(0.3)  # let the first heartbeats settle
        ap, sp, me = psutil.Process(admin.pid), psutil.Process(sim.pid), psutil.Process()
        cpu0 = (_cpu_s(ap), _cpu_s(sp), _cpu_s(me))
        commits0 = _commits(admin, stats)
        latencies, errors, wall, watched = asyncio.run(_burst(address, keys, level, channels, watchers))
        cpu1 = (_cpu_s(ap), _cpu_s(sp), _cpu_s(me))
        commits = _commits(admin, stats) - commits0
        rss = _peak_rss_bytes(admin.pid)
        sim.send_signal(signal.SIGTERM)
        out, _ = sim.communicate(timeout=60)
        start_calls = json.loads(out.decode().strip().splitlines()[-1])["start_calls"]
        admin.send_signal(signal.SIGTERM)
        admin.wait(timeout=120)
    finally:
        for p in (sim, admin):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        log.close()
    ms = [x * 1000 for x in latencies]
    return {
        "concurrent": level, "workers": workers, "namespaces": namespaces,
        "created": len(latencies), "errors": len(errors), "error_samples": sorted(set(errors))[:5],
        "worker_start_calls": start_calls,
        "create_p50_ms": round(_pct(ms, 0.50), 1), "create_p99_ms": round(_pct(ms, 0.99), 1),
        "create_max_ms": round(max(ms), 1) if ms else None,
        "create_mean_ms": round(statistics.fmean(ms), 1) if ms else None,
        "wall_s": round(wall, 3), "creates_per_s": round(len(latencies) / wall, 1),
        "admin_cpu_s": round(cpu1[0] - cpu0[0], 2), "admin_peak_rss_mb": round(rss / 2**20, 1),
        "workers_cpu_s": round(cpu1[1] - cpu0[1], 2), "client_cpu_s": round(cpu1[2] - cpu0[2], 2),
        "store_commits": commits, "store_commits_per_s": round(commits / wall, 1),
        "store_commits_per_create": round(commits / max(1, len(latencies)), 2),
        **watched,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--levels", default="1000,4000,16000", help="creates in flight, comma-separated")
    ap.add_argument("--workers", type=int, default=100, help="simulated workers")
    ap.add_argument("--namespaces", type=int, default=4, help="namespaces (API keys) the creates spread over")
    ap.add_argument("--watchers", type=int, default=8,
                    help="WatchSandboxes streams open during the burst (round-robin over the namespaces)")
    ap.add_argument("--channels", type=int, default=8, help="client connections the creates spread over")
    ap.add_argument("--baseline-src", type=Path,
                    help="also run each level against the Admin of this ale_rock source tree (e.g. "
                         "`git archive REV packages/ale-rock/src | tar -x -C DIR`, then DIR/packages/ale-rock/src)")
    ap.add_argument("--quick", action="store_true", help="a small run (levels 50,200; 8 workers) for tests")
    ap.add_argument("--profile", type=Path, help="write a cProfile of each level's Admin into this folder")
    ap.add_argument("--workdir", type=Path, help="keep the Admins' databases and logs here")
    # internal roles (the bench starts itself as the Admin and as the simulated workers)
    ap.add_argument("--role", choices=["admin", "workers"], help=argparse.SUPPRESS)
    ap.add_argument("--config", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--ready", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--stats", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--profile-out", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--admin", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.role == "admin":
        run_admin(args.config, args.ready, args.stats, args.profile_out)
        return 0
    if args.role == "workers":
        asyncio.run(run_workers(args.admin, args.workers, args.ready))
        return 0
    levels = [50, 200] if args.quick else [int(x) for x in args.levels.split(",") if x]
    workers = 8 if args.quick else args.workers
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    results = []
    with tempfile.TemporaryDirectory(prefix="ale-scale-") as tmp:
        root = args.workdir or Path(tmp)
        if args.profile is not None:
            args.profile.mkdir(parents=True, exist_ok=True)
        for level in levels:
            prof = args.profile / f"admin-{level}.prof" if args.profile is not None else None
            if args.baseline_src is not None:
                base = run_level(level, workers, args.namespaces, root / f"baseline-{level}", None, args.channels,
                                 args.baseline_src.resolve(), args.watchers)
            r = run_level(level, workers, args.namespaces, root / f"level-{level}", prof, args.channels,
                          watchers=args.watchers)
            if args.baseline_src is not None:
                r["baseline"] = base
                r["vs_baseline"] = {
                    k: round(base[k] / r[k], 2) if r[k] else None
                    for k in ("create_p50_ms", "create_p99_ms", "admin_cpu_s")
                } | {"creates_per_s": round(r["creates_per_s"] / base["creates_per_s"], 2)
                     if base["creates_per_s"] else None}
            results.append(r)
            if not args.json:
                print(f"{level:>6} in flight: p50 {r['create_p50_ms']} ms, p99 {r['create_p99_ms']} ms, "
                      f"{r['creates_per_s']}/s, admin {r['admin_cpu_s']} CPU-s, {r['admin_peak_rss_mb']} MB, "
                      f"{r['store_commits_per_s']} commits/s, errors {r['errors']}", flush=True)
    out = {
        "bench": "scale", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": " ".join(["python", "bench/scale.py", *(argv if argv is not None else sys.argv[1:])]),
        "uptime_before": uptime, "uptime_after": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
        "cpus": os.cpu_count(), "baseline_src": str(args.baseline_src) if args.baseline_src else None,
        "levels": results,
    }
    if args.json:
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
