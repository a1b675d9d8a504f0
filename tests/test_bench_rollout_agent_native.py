"""bench/rollout.py's agent-native part on the real stack, tiny: a LocalCluster with bubblewrap
sandboxes, the ModelProxy and the InferenceService over the scripted model; both agents (ale-flow's
loop in this process, ale-flow's CLI in the sandbox) and GEM mode on the same model."""

from __future__ import annotations

import shutil
from typing import Any

import pytest


def test_agent_native_figures_come_from_real_episodes(bench_module: Any) -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed: no sandboxes")
    out = bench_module("rollout").agent_native(2, 1, "csv-sales-rollup", 0.0, baseline=False, gem_episodes=16, warmup=False,
                               start_rounds=1)
    for agent in ("flow", "cli"):
        r = out[agent]
        assert (r["episodes"], r["errors"]) == (2, 0), r["first_error"]
        assert r["calls_per_episode"] == 1.0  # the scripted model ended each agent's run on its first call
        assert set(r["phase_p50_ms"]) == {"setup", "open", "agent", "close", "records", "verify", "delete"}
        assert 0 < r["overhead_p50_ms"] <= r["wall_p50_ms"] and r["model_p50_ms"] > 0
        assert r["episodes_per_s"] > 0
    assert out["agent_native_episodes_per_s"] == out["flow"]["episodes_per_s"]
    assert out["agent_native_episode_overhead_p50_ms"] == out["flow"]["overhead_p50_ms"]
    assert out["agent_native_cli_episode_overhead_p50_ms"] == out["cli"]["overhead_p50_ms"]
    assert out["gem_episodes_per_s"] > out["agent_native_episodes_per_s"]  # no sandbox, no process: far cheaper
    start = out["cli_start"]
    assert 0 < start["now_cpu_p50_ms"] <= start["now_wall_p50_ms"] * 2 and start["before_cpu_p50_ms"] > 0
