"""Scores: Pass@1 per run averaged over runs, per domain and per task; the table; the files.

Errors are not failures. An episode the infrastructure failed (model unreachable or unauthorized,
sandbox lost, setup or verifier failed, a phase timed out) has no score: it is counted apart (per
task, per domain, in the totals, by kind) and left out of Pass@1, which is over the *scored*
episodes. Pass@1 is ``None`` ("—" in the table) where nothing was scored."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from statistics import mean
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ale.eval.config import EvalConfig
    from ale.eval.run import EpisodeResult


def summarize(cfg: EvalConfig, results: list[EpisodeResult], task_ids: list[str]) -> dict[str, Any]:
    """``results.json``'s content. Pass@1 of a run is the fraction of its scored tasks it solved; the
    reported Pass@1 is its mean over the runs that scored anything. Errors are counted apart."""
    by_task: dict[str, list[EpisodeResult]] = defaultdict(list)
    for r in results:
        by_task[r.task].append(r)
    tasks = []
    for tid in task_ids:
        eps = sorted(by_task.get(tid, []), key=lambda r: r.run)
        tasks.append({
            "id": tid,
            "domain": eps[0].domain if eps else "",
            "pass_at_1": _rate(eps),
            **_counts(eps),
            "mean_turns": round(mean(r.turns for r in eps), 2) if eps else 0.0,
            "runs": [{"run": r.run, "status": r.outcome, "success": r.success, "reward": r.reward, "turns": r.turns,
                      "stop_reason": r.stop_reason, "agent_exit_code": r.agent_exit_code,
                      "agent_timed_out": r.agent_timed_out, "duration_s": round(r.duration_s, 2),
                      "tests": r.tests, "error": r.error, "error_kind": r.error_kind} for r in eps],
        })  # fmt: skip
    per_run = {run: _rate([r for r in results if r.run == run]) for run in range(1, cfg.runs + 1)}
    scored_runs = [v for v in per_run.values() if v is not None]
    by_domain: dict[str, list[EpisodeResult]] = defaultdict(list)
    for r in results:
        by_domain[r.domain].append(r)
    domains = {
        d: {"tasks": len({r.task for r in eps}), "pass_at_1": _rate(eps), **_counts(eps),
            "mean_turns": round(mean(r.turns for r in eps), 2)}
        for d, eps in sorted(by_domain.items())
    }  # fmt: skip
    return {
        "suite": cfg.suite,
        "split": cfg.effective_split,
        "model": cfg.model or cfg.local_model,
        "upstream": cfg.base_url or cfg.inference_address or f"local:{cfg.local_model}",
        "runs": cfg.runs,
        "pass_at_1": round(mean(scored_runs), 4) if scored_runs else None,
        "pass_at_1_per_run": [per_run[r] for r in sorted(per_run)],
        "episodes": len(results),
        **_counts(results),
        "errors_by_kind": dict(sorted(Counter(r.error_kind or "unknown" for r in results if r.outcome == "error").items())),
        "mean_turns": round(mean(r.turns for r in results), 2) if results else 0.0,
        "domains": domains,
        "tasks": tasks,
        "budget": {"concurrency": cfg.concurrency, "task_timeout_s": cfg.task_timeout_s,
                   "max_turns": cfg.max_turns, "max_tokens": cfg.max_tokens, "temperature": cfg.temperature},
    }  # fmt: skip


def _counts(eps: list[EpisodeResult]) -> dict[str, int]:
    """Scored episodes, their failures, and the errors (which have no score)."""
    errors = sum(1 for r in eps if r.outcome == "error")
    return {"scored": len(eps) - errors, "failures": sum(1 for r in eps if r.outcome == "failure"), "errors": errors}


def _rate(eps: list[EpisodeResult]) -> float | None:
    scored = [r for r in eps if r.outcome != "error"]
    return round(sum(r.outcome == "success" for r in scored) / len(scored), 4) if scored else None


def _pct(rate: float | None) -> str:
    return "—" if rate is None else f"{100 * rate:.1f}%"


def render_table(summary: dict[str, Any]) -> Any:
    """The per-domain table (a rich ``Table``), with the overall row last."""
    from rich.table import Table

    title = f"ale eval — {summary['model']} on {summary['suite']}/{summary['split']} ({summary['runs']} run(s))"
    table = Table(title=title)
    columns = (("domain", "left"), ("tasks", "right"), ("pass@1", "right"), ("failed", "right"), ("errors", "right"),
               ("mean turns", "right"))  # fmt: skip
    for col, just in columns:
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for d, row in summary["domains"].items():
        table.add_row(d, str(row["tasks"]), _pct(row["pass_at_1"]), str(row["failures"]), str(row["errors"]),
                      f"{row['mean_turns']:.1f}")  # fmt: skip
    table.add_section()
    table.add_row("all", str(len(summary["tasks"])), _pct(summary["pass_at_1"]), str(summary["failures"]),
                  str(summary["errors"]), f"{summary['mean_turns']:.1f}", style="bold")  # fmt: skip
    return table


def summary_line(summary: dict[str, Any]) -> str:
    """The totals in one line: Pass@1 over the scored episodes, failures, and errors by kind."""
    kinds = ", ".join(f"{k} {n}" for k, n in summary["errors_by_kind"].items())
    errors = f"{summary['errors']} error(s) ({kinds})" if summary["errors"] else "0 errors"
    return (f"Pass@1 {_pct(summary['pass_at_1'])} over {summary['scored']} scored of {summary['episodes']} "
            f"episode(s); {summary['failures']} failed; {errors}")  # fmt: skip


def table_text(summary: dict[str, Any]) -> str:
    """The table as plain text (what ``table.txt`` holds)."""
    import io

    from rich.console import Console

    console = Console(width=100, record=True, file=io.StringIO())
    console.print(render_table(summary))
    return console.export_text()


def write_outputs(out_dir: Path, summary: dict[str, Any]) -> None:
    """``results.json`` and ``table.txt``."""
    (out_dir / "results.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    (out_dir / "table.txt").write_text(table_text(summary))
