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


def plot_job_curves(runs: dict[str, list[dict[str, Any]]], out: Path,
                    stages: dict[str, dict[str, Any]] | None = None, eval_temperature: float = 0.0) -> Path | None:
    """Left: success of the RL training batches per step, per seed (raw and a 5-step moving
    average). Right: held-out success per stage with its 95% interval. None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for i, (name, rows) in enumerate(runs.items()):
        pts = [(r["step"], r.get("success/rate", r.get("reward/mean", 0.0))) for r in rows if "reward/mean" in r]
        if not pts:
            continue
        steps, vals = zip(*pts, strict=True)
        smooth = [sum(vals[max(0, k - 4):k + 1]) / len(vals[max(0, k - 4):k + 1]) for k in range(len(vals))]
        color = f"C{i}"
        axes[0].plot(steps, vals, color=color, alpha=0.25)
        axes[0].plot(steps, smooth, color=color, label=f"{name} (5-step mean)")
    axes[0].set_title("RL: success of the training batches (sampling, T=1)")
    axes[0].set_xlabel("RL step")
    axes[0].legend()
    if stages:
        names = list(stages)
        heights = [float(stages[n]["success"]) for n in names]
        err = [[v - stages[n]["ci95"][0] for n, v in zip(names, heights, strict=True)],
               [stages[n]["ci95"][1] - v for n, v in zip(names, heights, strict=True)]]
        axes[1].bar(names, heights, yerr=err, capsize=6, color=["C7", "C0", "C2"][: len(names)])
        for k, n in enumerate(names):
            axes[1].text(k, stages[n]["ci95"][1] + 0.005, f"{heights[k]:.3f}", ha="center", va="bottom")
    axes[1].set_title(f"held-out success ({decoding(eval_temperature)}), 95% interval")
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def decoding(temperature: float) -> str:
    """How the held-out episodes chose their tokens, for titles."""
    return "greedy" if not temperature else f"sampled at T={temperature:g}"


def render_table(report: dict[str, Any]) -> Any:
    """A rich table: stage × held-out success, 95% CI, episodes, tokens, time."""
    from rich.table import Table

    table = Table(title=f"held-out success ({decoding(report.get('eval_temperature', 0.0))}, distinct held-out locks)")
    for col in ("stage", "success", "95% CI", "episodes", "train tokens", "time s"):
        table.add_column(col, justify="right" if col != "stage" else "left")
    for name, st in report.get("stages", {}).items():
        lo, hi = st["ci95"]
        if not st["episodes"]:  # not evaluated (no RL steps, or every episode errored)
            table.add_row(name, "-", "-", "0", "-", "-")
            continue
        table.add_row(name, f"{st['success']:.3f}", f"[{lo:.3f}, {hi:.3f}]", str(st["episodes"]),
                      str(st.get("tokens", "-")), f"{st['time_s']:.0f}" if "time_s" in st else "-")
    return table


def render_verdict(job: dict[str, Any]) -> str:
    """The verdict line (rich markup): RL against SFT on held-out success, by their 95% intervals."""
    beats, above = job.get("rl_beats_sft"), job.get("rl_above_sft")
    if beats is None:
        return "[yellow]no verdict: the SFT or RL stage was not evaluated[/yellow]"
    if beats:
        return "[green]RL beats SFT beyond the 95% intervals[/green]"
    st = job["stages"]
    rl_low, sft = st["rl"]["ci95"][0], st["sft"]["success"]
    if above:
        return (f"[green]RL's 95% interval is above SFT's success[/green] ({rl_low:.3f} > {sft:.3f}); "
                "the two intervals overlap")
    return f"[yellow]RL's 95% interval is not above SFT's success[/yellow] ({rl_low:.3f} <= {sft:.3f})"


def render_funnel(counts: dict[str, int]) -> Any:
    """A rich table of the filtering funnel."""
    from rich.table import Table

    table = Table(title="synthesis → filtering funnel")
    table.add_column("stage")
    table.add_column("episodes", justify="right")
    for stage, n in counts.items():
        table.add_row(stage, str(n))
    return table
