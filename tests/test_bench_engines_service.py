"""bench/engines.py's service section, tiny: a real ``ale-roll serve-inference`` process answers every
way of calling it, the CPU of both sides is accounted per call, and the client-side bound is
consistent with what was measured (no timing goal: one round on a shared machine is noise)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def test_service_section_measures_every_way_and_bounds_it_by_the_clients_cpu(bench_module: Any, tmp_path: Path) -> None:
    out = bench_module("engines").bench_service(tmp_path, repeats=2, sizes=(16,))
    for key in ("service_vs_inprocess", "service_unary_singles_vs_inprocess", "service_aio_clients_vs_inprocess",
                "service_rpc_floor_vs_inprocess", "service_batch_vs_inprocess"):
        assert out[key] > 0, key
    for way, cpu in out["service_cpu_us_per_call"].items():
        assert cpu["client"] > 0 and cpu["server"] >= 0, (way, cpu)  # /proc ticks are 10 ms: a round may read 0
    # What the bound stands on: a round cannot take less wall time than its client CPU spread over
    # every core, so no way's measured rate may exceed cores / client CPU per call.
    detail, cores = out["service_detail"][16], out["service_cores"]
    for way, key in (("streams", "generate_streams_tokens_per_s"), ("aio_streams", "aio_client_streams_tokens_per_s"),
                     ("unary", "unary_singles_tokens_per_s"), ("rpc_floor", "no_op_rpcs_per_s")):
        assert detail[key] <= cores / (out["service_cpu_us_per_call"][way]["client"] * 1e-6) * 1.01, way
    # ... and the bound adds the engine's CPU to that, so it is at most the client-only figure.
    client_only = cores / (out["service_cpu_us_per_call"]["streams"]["client"] * 1e-6) / detail["inprocess_singles_tokens_per_s"]
    assert 0 < out["service_client_bound_vs_inprocess"] < client_only
    assert out["service_aio_client_bound_vs_inprocess"] > 0
