"""Run every (task, run) episode within the budget, save trajectories as they finish, report."""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ale.eval import agent
from ale.eval.config import BUILTIN, EvalConfig
from ale.eval.report import summarize, write_outputs
from ale.eval.stack import Endpoints, eval_stack, sandbox_policy

_GRACE_S = 10.0  # the agent stops itself this long before the episode's budget, to save its trajectory


@dataclass
class EpisodeResult:
    """One task in one run."""

    task: str
    domain: str
    run: int
    success: bool = False
    reward: float = 0.0
    turns: int = 0
    """Model calls the agent made (the proxy's records)."""
    stop_reason: str = ""
    """How ale-flow stopped (completed, max_steps, time_limit, …; ``killed`` when cut off)."""
    agent_exit_code: int = -1
    agent_timed_out: bool = False
    duration_s: float = 0.0
    tests: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""
    """Set when the infrastructure failed the episode (model unreachable or unauthorized, sandbox
    lost, setup or verifier failed, a phase timed out): an error, not a failure; it has no score."""
    error_kind: str = ""
    """The error's kind (``ale_rock.episode.ErrorKind``: model_unreachable, sandbox_lost, …)."""
    status: str = ""
    """success | failure | error ("" is read from ``error`` and ``success``)."""
    phase_s: dict[str, float] = field(default_factory=dict)
    """Seconds per phase of the episode (setup, open, agent, close, records, verify, delete)."""

    @property
    def outcome(self) -> str:
        """success | failure | error."""
        return self.status or ("error" if self.error else "success" if self.success else "failure")


def load_tasks(cfg: EvalConfig) -> list[Any]:
    """The suite's tasks of the configured split (and ids), sorted by domain and id."""
    from ale_rock.tasks import load_suite

    if cfg.suite == BUILTIN:
        tasks = load_suite()
    elif Path(cfg.suite).is_dir():
        tasks = load_suite(cfg.suite)
    else:
        raise ValueError(f"--suite {cfg.suite!r}: not {BUILTIN!r} and not a directory of tasks")
    split = cfg.effective_split
    if split != "all":
        tasks = [t for t in tasks if t.spec.split.value == split]
    if cfg.tasks:
        unknown = sorted(set(cfg.tasks) - {t.id for t in tasks})
        if unknown:
            raise ValueError(f"no such task(s) in split {split!r} of {cfg.suite}: {', '.join(unknown)}")
        tasks = [t for t in tasks if t.id in set(cfg.tasks)]
    if not tasks:
        raise ValueError(f"no tasks in split {split!r} of {cfg.suite}")
    return sorted(tasks, key=lambda t: (t.spec.domain.value, t.id))


def default_out_dir() -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return Path(os.environ.get("ALE_RUNS", "runs")).resolve() / f"eval-{stamp}-{secrets.token_hex(2)}"


@dataclass
class _FlowCommand:
    """ale-flow's CLI as the episode's command agent; its own stop reason says whether it gave up
    on the model (then the episode is an error of the model's kind, not a failure)."""

    command: str
    files: dict[str, bytes]

    def run(self, ctx: Any, cancel: threading.Event) -> Any:
        from ale_rock.episode import AgentRun, CommandAgent

        out = CommandAgent(self.command, self.files).run(ctx, cancel)
        reason = agent.stop_reason(agent.split_output(out.output)[0])
        return AgentRun(out.exit_code, out.output, out.timed_out, reason, model_failed=reason == "model_error")


def run_episode(task: Any, run: int, cfg: EvalConfig, ep: Endpoints, provider: Any, tag: str,
                proxy: Any = None) -> tuple[EpisodeResult, dict[str, Any]]:
    """One agent-native episode (ale-rock's one episode implementation); never raises: an episode
    the infrastructure failed is an error with its kind, apart from the agent's failures."""
    from ale_rock.episode import run_episode as run_agent_episode
    from ale_rock.sdk.model_proxy import ModelProxyClient

    budget = min(cfg.task_timeout_s, task.spec.limits.agent_s)
    command = agent.agent_command(
        task.spec.prompt, max_turns=cfg.max_turns, max_tokens=cfg.max_tokens, temperature=cfg.temperature,
        native_tools=cfg.native_tools, time_limit_s=max(budget - _GRACE_S, budget / 2), settings=cfg.agent_settings,
    )  # fmt: skip
    res = EpisodeResult(task=task.id, domain=task.spec.domain.value, run=run)
    line: dict[str, Any] = {"task": task.id, "domain": res.domain, "run": run}
    own = proxy is None
    upstream: Any = ep.upstream  # "openai" | "inference", checked by EvalConfig
    client = ModelProxyClient(ep.proxy_address) if own else proxy
    try:
        out = run_agent_episode(
            task, _FlowCommand(command, {agent.AGENT_ZIP: agent.agent_zip()}), provider=provider, proxy=client,
            upstream=upstream, target=ep.upstream_target, model=ep.model, max_calls=2 * cfg.max_turns + 2,
            budget_s=budget, episode_id=f"{tag}-r{run}-{task.id}",
        )  # fmt: skip
    finally:
        if own:
            client.close()
    output = out.agent.output if out.agent else ""
    trajectory, log = agent.split_output(output)
    res.status, res.success, res.reward, res.turns = out.status.value, out.success, out.reward, len(out.records)
    res.error, res.error_kind = out.error, out.error_kind.value if out.error_kind else ""
    if out.agent is not None:
        res.stop_reason = agent.stop_reason(trajectory) if not out.agent.timed_out else "timeout"
        res.agent_exit_code, res.agent_timed_out = out.agent.exit_code, out.agent.timed_out
    res.tests, res.duration_s, res.phase_s = out.tests, out.wall_s, dict(out.phase_s)
    line.update(asdict(res), episode_id=out.episode_id, phase=out.phase, calls=[asdict(r) for r in out.records],
                agent_trajectory=trajectory, agent_log=log[-20000:], safety_events=out.safety_events,
                cleanup_error=out.cleanup_error)  # fmt: skip
    return res, line


class _TrajectoryFiles:
    """One JSONL per run; a line per episode, appended as soon as it finishes."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def path(self, run: int) -> Path:
        return self.dir / f"run-{run}.jsonl"

    def append(self, run: int, line: dict[str, Any]) -> None:
        text = json.dumps(line, default=str) + "\n"
        with self._lock, self.path(run).open("a", encoding="utf-8") as f:
            f.write(text)


def run_eval(cfg: EvalConfig, progress: Callable[[int, int, EpisodeResult], None] | None = None) -> dict[str, Any]:
    """Run the evaluation; write ``results.json``, ``table.txt`` and ``trajectories/`` under the out
    dir; return the summary (``results.json``'s content, plus ``out_dir``)."""
    tasks = load_tasks(cfg)
    out_dir = (cfg.out_dir or default_out_dir()).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    files = _TrajectoryFiles(out_dir / "trajectories")
    tag = f"eval-{secrets.token_hex(3)}"
    jobs = [(t, r) for r in range(1, cfg.runs + 1) for t in tasks]
    results: list[EpisodeResult] = []
    started = time.monotonic()
    owned: tuple[str, ...] = ()
    with eval_stack(cfg, out_dir / "services") as ep:
        owned = ep.owned_paths
        public = {k: v for k, v in asdict(ep).items() if k != "admin_api_key"}
        (out_dir / "services.json").write_text(json.dumps(public, indent=2) + "\n")
        from ale_rock.envs.sandbox import SdkProvider
        from ale_rock.sdk.model_proxy import ModelProxyClient

        from ale.eval.detached import DetachedExecProvider

        # Each sandbox as its task's [environment] asks (image, work dir, env, CPUs, memory, its
        # allow-list beside the model proxy), within the policy: the same spec as `tasks run`.
        # On docker, a Dockerfile task is built through EnvHub once (the episode runner's build phase).
        sdk = SdkProvider(ep.admin_address, ep.admin_api_key, allow=("model-proxy",), policy=sandbox_policy(cfg),
                          backend=cfg.backend)  # fmt: skip
        provider = DetachedExecProvider(sdk)
        proxy = ModelProxyClient(ep.proxy_address)

        def one(job: tuple[Any, int]) -> EpisodeResult:
            res, line = run_episode(job[0], job[1], cfg, ep, provider, tag, proxy)
            files.append(job[1], line)
            return res

        pool = ThreadPoolExecutor(max_workers=cfg.concurrency, thread_name_prefix="eval")
        try:
            for fut in as_completed([pool.submit(one, job) for job in jobs]):
                res = fut.result()
                results.append(res)
                if progress is not None:
                    progress(len(results), len(jobs), res)
        finally:
            # On an interrupt, queued episodes are dropped and the stack stops under the running
            # ones (their sandboxes go with the worker), so they end at once instead of at budget.
            pool.shutdown(wait=False, cancel_futures=True)
        left = _sandboxes_left(sdk, tag)
        sdk.client.close()
        proxy.close()
    summary = summarize(cfg, results, [t.id for t in tasks])
    summary.update(wall_s=round(time.monotonic() - started, 1), sandboxes_left=left, owned_paths=list(owned),
                   trajectories=[str(files.path(r)) for r in range(1, cfg.runs + 1)])  # fmt: skip
    write_outputs(out_dir, summary)
    summary["out_dir"] = str(out_dir)
    return summary


def _sandboxes_left(provider: Any, tag: str) -> int:
    """Sandboxes of this evaluation the admin still holds alive (should be 0)."""
    from ale_rock.sdk import Sandbox

    live = Sandbox.list(client=provider.client, states=("pending", "running"))
    return sum(1 for s in live if s.labels.get("ale.episode", "").startswith(tag))
