"""Docker backend create latency vs a bare ``docker run --rm IMAGE true``, in the same run.

    python bench/rock_docker_backend.py --json [--n 10] [--pool-size 1]

prints one JSON object: the create -> first exec p50 with a warm pool of one, the same for cold
starts, and the bare ``docker run`` p50, all measured interleaved in the same run; with a pool, also
``warm_steps``: the median of each step of a warm claim (``start`` split into its steps, the first
exec) and the engine calls the claiming thread made (``engine_calls``: a warm claim should make
none). Without a Docker engine it prints ``{"skipped": "<why>"}`` (``make bench`` runs every script
here).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import threading
import time
import uuid
from collections import defaultdict
from typing import Any

import grpc
from ale_proto.v1 import rocklet_pb2, rocklet_pb2_grpc, sandbox_pb2
from ale_rock.backends.base import SandboxConfig
from ale_rock.grpc_options import channel_options


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def docker_run_ms(image: str, n: int) -> list[float]:
    """Wall time of ``docker run --rm --network none IMAGE true`` (the CLI, as users run it)."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(["docker", "run", "--rm", "--network", "none", image, "true"], check=True, timeout=120)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def create_first_exec_ms(backend: Any, n: int, config: SandboxConfig | None = None) -> list[float]:
    """Wall time of ``backend.start`` + the first ``true`` through the Rocklet (remove not timed)."""
    out = []
    for _ in range(n):
        sid = f"bench-{uuid.uuid4().hex[:10]}"
        t0 = time.perf_counter()
        handle = backend.start(sid, config or SandboxConfig())
        try:
            _first_exec(handle)
            out.append((time.perf_counter() - t0) * 1000)
        finally:
            backend.remove(sid)
    return out


_STEPS = ("_check_image", "_reserve", "_shape", "_adopt")
"""DockerBackend methods a warm claim goes through, timed one by one (the pool's claim too)."""


def warm_steps(backend: Any, n: int) -> dict[str, Any]:
    """Median ms of each step of ``n`` warm claims and the engine calls the claiming thread made."""
    times: dict[str, list[float]] = defaultdict(list)
    engine: list[str] = []
    me = threading.get_ident()
    in_start = False

    def timed(name: str, fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                if threading.get_ident() == me:
                    times[name].append((time.perf_counter() - t0) * 1000)
        return call

    class Api:  # the engine client, noting calls from this thread
        def __getattr__(self, name: str) -> Any:
            attr = getattr(api, name)
            if callable(attr) and in_start and threading.get_ident() == me:
                engine.append(name)
            return attr

    api = backend._api
    originals = {name: getattr(backend, name) for name in _STEPS}
    claim = backend._pool.claim
    try:
        backend._api = backend._images._api = Api()
        for name, fn in originals.items():
            setattr(backend, name, timed(name, fn))
        backend._pool.claim = timed("pool_claim", claim)
        for _ in range(n):
            _settle(backend)
            sid = f"step-{uuid.uuid4().hex[:8]}"
            in_start, t0 = True, time.perf_counter()
            handle = backend.start(sid, SandboxConfig())
            times["start"].append((time.perf_counter() - t0) * 1000)
            in_start = False
            try:
                t1 = time.perf_counter()
                _first_exec(handle)
                times["first_exec"].append((time.perf_counter() - t1) * 1000)
            finally:
                backend.remove(sid)
    finally:
        backend._api = backend._images._api = api
        for name in originals:
            delattr(backend, name)
        backend._pool.claim = claim
    steps = {k: round(statistics.median(v), 2) for k, v in times.items()}
    return {"warm_steps_ms": steps, "engine_calls_per_claim": round(len(engine) / n, 2),
            "engine_calls": sorted(set(engine))}


def _first_exec(handle: Any) -> None:
    with grpc.insecure_channel(f"unix:{handle.rocklet_socket}", options=channel_options()) as ch:
        stub = rocklet_pb2_grpc.RockletServiceStub(ch)
        req = rocklet_pb2.RockletServiceExecRequest(spec=sandbox_pb2.ExecSpec(argv=["true"]))
        result = stub.Exec(req, timeout=60).result
    if result.exit_code != 0:
        raise RuntimeError(f"first exec failed in {handle.sandbox_id}: {result}")


def _settle(backend: Any, timeout_s: float = 120.0) -> None:
    """Wait until the warm pool is full, so no refill competes with the next timed operation."""
    pool = backend._pool
    shape = backend._shape(backend._pool_shape())  # the shape every create here asks for
    deadline = time.monotonic() + timeout_s
    settled_at = None
    while pool.enabled and time.monotonic() < deadline:
        # Full, and for longer than the refill delay after a claim (a held-back refill shows late).
        if pool.ready(shape) < max(1, pool.target(shape)) or len(pool.keys()) > pool.ready():
            settled_at = None
        elif settled_at is None:
            settled_at = time.monotonic()
        elif time.monotonic() - settled_at > backend.config.pool_refill_delay_s + 0.1:
            return
        time.sleep(0.05)


def measure(backend: Any, n: int = 10, cold: Any = None) -> dict[str, float]:
    """Interleaved rounds (so load drifts hit all alike); p50/p99 in ms and the ratio to docker run.

    ``backend`` is measured as configured (with its warm pool, if any); ``cold``, when given, is a
    second backend without a pool, for the cold-start figure.
    """
    run: list[float] = []
    create: list[float] = []
    cold_ms: list[float] = []
    docker_run_ms(backend.config.base_image, 1)  # warm the engine's image cache
    for _ in range(n):
        _settle(backend)
        run += docker_run_ms(backend.config.base_image, 1)
        _settle(backend)
        create += create_first_exec_ms(backend, 1)
        if cold is not None:
            _settle(backend)
            cold_ms += create_first_exec_ms(cold, 1)
    p50_run = statistics.median(run)
    out = {
        "docker_run_p50_ms": round(p50_run, 1),
        "docker_create_p50_ms": round(statistics.median(create), 1),
        "docker_create_p99_ms": round(_p(create, 0.99), 1),
        "docker_create_vs_run": round(statistics.median(create) / p50_run, 2),
        "n": n,
    }
    if cold_ms:
        out["docker_create_cold_p50_ms"] = round(statistics.median(cold_ms), 1)
        out["docker_create_cold_vs_run"] = round(statistics.median(cold_ms) / p50_run, 2)
    return out


def main(argv: list[str] | None = None) -> int:
    """Print :func:`measure` as JSON."""
    from ale_rock.backends.docker import DockerBackend, DockerBackendConfig
    from ale_rock.backends.docker_engine import engine_problem

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--pool-size", type=int, default=1, help="warm sandboxes (0 = cold starts only)")
    parser.add_argument("--json", action="store_true", help="(default) print one JSON object")
    args = parser.parse_args(argv)
    if problem := engine_problem():
        print(json.dumps({"skipped": problem}))
        return 0
    tag = uuid.uuid4().hex[:6]
    backend = DockerBackend(DockerBackendConfig(worker=f"bench{tag}", pool_size=args.pool_size))
    cold = DockerBackend(DockerBackendConfig(worker=f"benchc{tag}", pool_size=0)) if args.pool_size else None
    try:
        out: dict[str, Any] = {**measure(backend, args.n, cold)}
        if args.pool_size:
            out.update(warm_steps(backend, args.n))
        print(json.dumps(out))
    finally:
        for b in (backend, cold):
            if b is not None:
                b.reap_orphans(set())
                b.close()
                shutil.rmtree(b.root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
