"""Benchmark of the local backend alone (no admin, no worker): create→first exec, exec round trip
straight to the Rocklet, N sandboxes held at once, failures and leaks.

    python bench/rock_local_backend.py --json [--samples 20] [--concurrent 50] [--pool-size 2]

The baseline, in the same run: a bare ``/bin/sh -c true`` spawn (``subprocess_p50_ms``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
from ale_proto.v1 import rocklet_pb2, rocklet_pb2_grpc, sandbox_pb2
from ale_rock.backends.base import Limits, SandboxConfig
from ale_rock.backends.limits import CGROUP_ROOT
from ale_rock.backends.local import LocalBackend, LocalBackendConfig
from ale_rock.grpc_options import channel_options

_TRUE = rocklet_pb2.RockletServiceExecRequest(spec=sandbox_pb2.ExecSpec(argv=["true"]))


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2) if ordered else 0.0


def _first_exec(socket: Path) -> None:
    with grpc.insecure_channel(f"unix:{socket}", options=channel_options()) as channel:
        result = rocklet_pb2_grpc.RockletServiceStub(channel).Exec(_TRUE, timeout=60).result
    if result.end_reason != sandbox_pb2.EXEC_END_REASON_EXITED or result.exit_code != 0:
        raise RuntimeError(f"first exec failed: {result}")


def _wait_pool(backend: LocalBackend, size: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while len(backend._pool) < size and time.monotonic() < deadline:
        time.sleep(0.05)


def leaks(backend: LocalBackend) -> list[str]:
    """Processes, mounts, dirs and cgroups of the backend's state dir still present."""
    state = str(backend.config.state_dir.resolve())
    found = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines() if state in line]
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                if state.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(f"pid {pid}")
            except OSError:
                pass
    found += [str(p) for p in backend.sandboxes_dir.iterdir()]
    for ctl in ("memory", "pids", "cpu"):
        parent = CGROUP_ROOT / ctl / backend.cgroup_parent
        if parent.is_dir():
            found += [str(c) for c in parent.iterdir() if c.is_dir()]
    return found


def run(samples: int, concurrent: int, parallel: int, pool_size: int) -> dict[str, Any]:
    """Run every workload and return the figures."""
    out: dict[str, Any] = {"pool_size": pool_size}
    spawn = []
    for _ in range(samples):
        t = time.perf_counter()
        subprocess.run(["/bin/sh", "-c", "true"], check=True)
        spawn.append((time.perf_counter() - t) * 1000)
    out["subprocess_p50_ms"] = _pct(spawn, 0.5)
    with tempfile.TemporaryDirectory(prefix="ale-bench-") as tmp:
        backend = LocalBackend(LocalBackendConfig(state_dir=Path(tmp), pool_size=pool_size))
        try:
            warm, cold = [], []
            for i in range(samples):
                _wait_pool(backend, pool_size)
                t = time.perf_counter()
                h = backend.start(f"bench-{i}", SandboxConfig())
                _first_exec(h.rocklet_socket)
                warm.append((time.perf_counter() - t) * 1000)
                backend.remove(f"bench-{i}")
            for i in range(max(3, samples // 5)):
                t = time.perf_counter()  # a custom work dir is never served from the pool
                h = backend.start(f"cold-{i}", SandboxConfig(workdir="/srv"))
                _first_exec(h.rocklet_socket)
                cold.append((time.perf_counter() - t) * 1000)
                if i == 0:
                    with grpc.insecure_channel(f"unix:{h.rocklet_socket}", options=channel_options()) as ch:
                        stub = rocklet_pb2_grpc.RockletServiceStub(ch)
                        rtt = []
                        for _ in range(samples * 5):
                            t = time.perf_counter()
                            stub.Exec(_TRUE, timeout=60)
                            rtt.append((time.perf_counter() - t) * 1000)
                backend.remove(f"cold-{i}")
            out |= {
                "create_p50_ms": _pct(warm, 0.5),
                "create_p99_ms": _pct(warm, 0.99),
                "cold_create_p50_ms": _pct(cold, 0.5),
                "rocklet_exec_rtt_p50_ms": _pct(rtt, 0.5),
                "rocklet_exec_rtt_p99_ms": _pct(rtt, 0.99),
            }
            failures: list[str] = []
            ids = [f"many-{uuid.uuid4().hex[:8]}" for _ in range(concurrent)]
            small = SandboxConfig(limits=Limits(memory_bytes=128 * 2**20, disk_bytes=64 * 2**20))

            def create(sid: str) -> None:
                try:
                    _first_exec(backend.start(sid, small).rocklet_socket)
                except Exception as e:  # noqa: BLE001 - counted, reported
                    failures.append(f"{sid}: {e}")

            t = time.perf_counter()
            with ThreadPoolExecutor(parallel) as pool:
                list(pool.map(create, ids))
            out["concurrent_create_s"] = round(time.perf_counter() - t, 1)
            held = [sid for sid in ids if backend.is_running(sid)]
            out["concurrent"] = len(held)
            for sid in held:  # all alive at once: each still answers
                try:
                    _first_exec(backend.handle(sid).rocklet_socket)
                except Exception as e:  # noqa: BLE001
                    failures.append(f"{sid} (held): {e}")
            with ThreadPoolExecutor(parallel) as pool:
                list(pool.map(backend.remove, ids))
            out["failures"] = len(failures)
            out["failure_examples"] = failures[:3]
        finally:
            backend.close()
        left = leaks(backend)
        out["leaked"] = len(left)
        out["leak_examples"] = left[:3]
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the figures as JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=20)
    p.add_argument("--concurrent", type=int, default=50)
    p.add_argument("--parallel", type=int, default=4, help="creates in flight at once")
    p.add_argument("--pool-size", type=int, default=2)
    p.add_argument("--json", action="store_true", help="(default) print one JSON object")
    args = p.parse_args(argv)
    print(json.dumps(run(args.samples, args.concurrent, args.parallel, args.pool_size)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
