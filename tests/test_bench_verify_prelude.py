"""bench/verify_prelude.py, tiny: on a real cluster the prelude's kill and clear and the plain exec
are all timed, and the ratio is made of the same rounds (no timing goal: one shared machine)."""

from __future__ import annotations

from typing import Any


def test_every_part_of_the_prelude_is_timed_against_a_plain_exec(bench_module: Any) -> None:
    out = bench_module("verify_prelude").run(rounds=3)
    assert out["kill_all_p50_ms"] > 0 and out["install_exec_p50_ms"] > 0 and out["plain_exec_p50_ms"] > 0, out
    extra = max(0.0, out["install_exec_p50_ms"] - out["plain_exec_p50_ms"])
    expected = (out["kill_all_p50_ms"] + extra) / out["plain_exec_p50_ms"]
    assert abs(out["prelude_vs_exec"] - expected) < 0.05 * expected + 0.01, out
