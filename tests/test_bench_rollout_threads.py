"""bench/rollout.py's torch-threads section, tiny: real synchronous steps through the Controller with 1
and 2 torch threads alternating, and the event loop's CPU per step with batched vs per-episode rollout."""

from __future__ import annotations

from typing import Any


def test_thread_section_reports_both_thread_counts_from_real_steps(bench_module: Any) -> None:
    out = bench_module("rollout").torch_threads(completions=64, iterations=3, rounds=1)
    assert out["completions_per_step"] == 64 and out["steps_per_run"] == 2
    for key in ("1_thread", "2_threads"):
        phases = out["phases_s"][key]
        assert 0 < phases["generate"] <= phases["rollout"] <= phases["step"]
        assert 0 < phases["train"] < phases["step"]
    assert abs(out["two_vs_one_threads"] - out["step_s_2_threads"] / out["step_s_1_thread"]) < 0.01
    assert len(out["two_vs_one_per_round"]) == 1
    cpu = out["loop_cpu_ms_per_step"]
    # Both paths measured in the same run (how much less the batched one does is the bench's figure,
    # not a test's: at 64 episodes and a load of 10 the two are within noise of each other).
    assert cpu["batched"] > 0 and cpu["per_episode"] > 0
    assert abs(cpu["batched_vs_per_episode"] - cpu["batched"] / cpu["per_episode"]) < 0.01
