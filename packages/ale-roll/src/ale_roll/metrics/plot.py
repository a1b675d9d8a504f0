"""A PNG of the training curves from `metrics.jsonl` (matplotlib, imported lazily)."""

from __future__ import annotations

from pathlib import Path

from ale_roll.metrics.logger import read_jsonl

DEFAULT_KEYS = ("reward/mean", "success/rate", "eval/success", "train/loss", "staleness/mean",
                "throughput/tokens_per_s", "mismatch/kl")


def plot_curves(metrics_path: str | Path, out_path: str | Path, keys: tuple[str, ...] = DEFAULT_KEYS) -> Path | None:
    """Plot every key present in the records, one panel each; None when matplotlib is missing or no data."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    records = read_jsonl(metrics_path)
    present = [k for k in keys if any(k in r for r in records)]
    if not present:
        return None
    fig, axes = plt.subplots(len(present), 1, figsize=(7, 2.2 * len(present)), squeeze=False)
    for ax, key in zip(axes[:, 0], present, strict=True):
        pts = [(r["step"], r[key]) for r in records if key in r]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="." if len(pts) < 50 else None)
        ax.set_ylabel(key, fontsize=8)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("step")
    fig.tight_layout()
    out = Path(out_path)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
