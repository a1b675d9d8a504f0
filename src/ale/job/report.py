"""The job's report: stage numbers with confidence intervals, the funnel, curves, and report.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ale.job.stats import wilson


def stage_entry(successes: int, episodes: int, **extra: Any) -> dict[str, Any]:
    """`{"success", "ci95", "episodes", ...}` for one evaluation stage."""
    lo, hi = wilson(successes, episodes)
    return {"success": round(successes / episodes, 4) if episodes else 0.0, "ci95": [round(lo, 4), round(hi, 4)],
            "episodes": episodes, "successes": successes, **extra}


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The rows of a metrics.jsonl (missing file: no rows)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def plot_job_curves(runs: dict[str, list[dict[str, Any]]], out: Path) -> Path | None:
    """Training reward and success per RL step, one line per seed (None without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for name, rows in runs.items():
        steps = [r["step"] for r in rows if "reward/mean" in r]
        axes[0].plot(steps, [r["reward/mean"] for r in rows if "reward/mean" in r], label=name)
        key = "success/rate" if any("success/rate" in r for r in rows) else "reward/mean"
        axes[1].plot(steps, [r.get(key, r.get("reward/mean")) for r in rows if "reward/mean" in r], label=name)
    axes[0].set_title("RL: mean reward of the training batch")
    axes[1].set_title("RL: success rate of the training batch")
    for ax in axes:
        ax.set_xlabel("RL step")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def render_table(report: dict[str, Any]) -> Any:
    """A rich table: stage × held-out success, 95% CI, episodes, tokens, time."""
    from rich.table import Table

    table = Table(title="held-out success (greedy, distinct held-out locks)")
    for col in ("stage", "success", "95% CI", "episodes", "train tokens", "time s"):
        table.add_column(col, justify="right" if col != "stage" else "left")
    for name, st in report.get("stages", {}).items():
        lo, hi = st["ci95"]
        table.add_row(name, f"{st['success']:.3f}", f"[{lo:.3f}, {hi:.3f}]", str(st["episodes"]),
                      str(st.get("tokens", "-")), f"{st.get('time_s', 0):.0f}")
    return table


def render_funnel(counts: dict[str, int]) -> Any:
    """A rich table of the filtering funnel."""
    from rich.table import Table

    table = Table(title="synthesis → filtering funnel")
    table.add_column("stage")
    table.add_column("episodes", justify="right")
    for stage, n in counts.items():
        table.add_row(stage, str(n))
    return table
