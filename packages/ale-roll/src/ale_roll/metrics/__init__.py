"""Metrics: JSONL (always), TensorBoard (when installed), a PNG of the curves (matplotlib)."""

from ale_roll.metrics.logger import MetricsLogger, read_jsonl
from ale_roll.metrics.plot import plot_curves

__all__ = ["MetricsLogger", "plot_curves", "read_jsonl"]
