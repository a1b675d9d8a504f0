"""bench/scale.py --quick: a real Admin, simulated workers, two small bursts; every figure present
and consistent (timings are not asserted: the machine is shared)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LEVEL_KEYS = {
    "concurrent", "workers", "created", "errors", "create_p50_ms", "create_p99_ms", "creates_per_s",
    "admin_cpu_s", "admin_peak_rss_mb", "store_commits", "store_commits_per_s", "store_commits_per_create",
    "worker_start_calls", "wall_s", "watchers", "watch_events", "watch_events_expected",
}


def test_scale_bench_quick_json() -> None:
    out = subprocess.run([sys.executable, str(REPO / "bench" / "scale.py"), "--quick", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout)
    assert {"date", "command", "uptime_before", "cpus", "levels"} <= set(result)
    assert "load average" in result["uptime_before"]
    assert [lv["concurrent"] for lv in result["levels"]] == [50, 200]
    for lv in result["levels"]:
        assert set(lv) >= LEVEL_KEYS, LEVEL_KEYS - set(lv)
        n = lv["concurrent"]
        assert lv["errors"] == 0 and lv["created"] == n, lv["error_samples"]
        assert lv["worker_start_calls"] == n  # each create reached a simulated worker, once
        assert 0 < lv["create_p50_ms"] <= lv["create_p99_ms"] <= lv["create_max_ms"]
        assert lv["creates_per_s"] > 0 and lv["admin_cpu_s"] > 0 and lv["admin_peak_rss_mb"] > 10
        # every create commits its PENDING row and its RUNNING transition, nothing per worker
        assert lv["store_commits"] >= 2 * n and lv["store_commits_per_create"] < 2.5
        # every watcher saw every change of its namespace (PENDING, then RUNNING, per create)
        assert lv["watchers"] > 0 and lv["watch_events"] == lv["watch_events_expected"] > 0
