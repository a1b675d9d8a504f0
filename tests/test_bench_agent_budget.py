"""bench/agent_budget.py on the real stack, tiny: lock-family episodes whose scripted model makes
shell tool calls in bubblewrap sandboxes, the baseline workload beside them, and the budget's arithmetic."""

from __future__ import annotations

import shutil
from typing import Any

import pytest


def test_budget_arithmetic(bench_module: Any) -> None:
    b = bench_module("agent_budget").budget(5.0, rl_episodes=3900, eval_episodes=900, synthesis_episodes=300, fixed_s=90.0)
    assert b["episodes"] == 5100 and b["needed_episodes_per_s"] == round(5100 / 810, 2)
    assert b["projected_job_s"] == 90.0 + 5100 / 5.0 and b["fits"] is False
    assert bench_module("agent_budget").budget(10.0, 3900, 900, 300, 90.0)["fits"] is True


def test_lock_episodes_run_their_tool_calls_in_sandboxes(bench_module: Any) -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed: no sandboxes")
    out = bench_module("agent_budget").run(2, [1], guesses=2, baseline_n=1)
    lock = out["lock"]["c1"]
    assert (lock["episodes"], lock["errors"]) == (2, 0), lock["first_error"]
    assert lock["calls_per_episode"] == 3.0  # two guesses as tool calls, then the answer
    assert set(lock["phase_p50_ms"]) == {"setup", "open", "agent", "close", "records", "verify", "delete"}
    assert out["baseline"]["errors"] == 0 and out["baseline"]["calls_per_episode"] == 1.0
    assert out["sandbox_only"]["c1"]["sandboxes_per_s"] > 0
    assert lock["stack_cpu_ms_per_episode"]["host"] > 0  # the sandboxes' share needs cgroups v1 (None without)
    assert out["lock_episodes_per_s_best"] == lock["episodes_per_s"] > 0
    assert out["budget"]["measured_episodes_per_s"] == lock["episodes_per_s"]
