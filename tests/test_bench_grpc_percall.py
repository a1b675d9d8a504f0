"""bench/grpc_percall.py, tiny: both servers (sync and grpc.aio) answer every kind of call from both
client styles, and every figure the report compares is there and positive (no timing comparison:
the shared machine's load makes one round's CPU figures noise)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[1] / "bench" / "grpc_percall.py"


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_grpc_percall", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_grpc_percall"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_every_cell_is_measured_on_both_stacks() -> None:
    out = _bench().run(rounds=1, repeats=1)
    for server in ("sync", "aio"):
        for kind in ("noop", "unary", "stream"):
            for style in ("threads", "aio"):
                row = out[f"{server}_server/{kind}/{style}"]
                assert row["calls_per_s"] > 0 and row["client_cpu_us_per_call"] > 0, row
                assert row["server_cpu_us_per_call"] >= 0, row  # /proc ticks are 10 ms: one round may read 0
    for kind in ("noop", "unary", "stream"):
        assert out[f"{kind}_client_cpu_aio_vs_threads"] > 0
