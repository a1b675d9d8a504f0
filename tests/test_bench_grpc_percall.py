"""bench/grpc_percall.py, tiny: both servers (sync and grpc.aio) answer every kind of call from both
client styles, and every figure the report compares is there and positive (no timing comparison:
the shared machine's load makes one round's CPU figures noise)."""

from __future__ import annotations

from typing import Any


def test_every_cell_is_measured_on_both_stacks(bench_module: Any) -> None:
    out = bench_module("grpc_percall").run(rounds=1, repeats=1)
    for server in ("sync", "aio"):
        for kind in ("noop", "unary", "stream"):
            for style in ("threads", "aio"):
                row = out[f"{server}_server/{kind}/{style}"]
                assert row["calls_per_s"] > 0 and row["client_cpu_us_per_call"] > 0, row
                assert row["server_cpu_us_per_call"] >= 0, row  # /proc ticks are 10 ms: one round may read 0
    for kind in ("noop", "unary", "stream"):
        assert out[f"{kind}_client_cpu_aio_vs_threads"] > 0
