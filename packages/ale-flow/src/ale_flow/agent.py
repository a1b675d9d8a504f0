"""The agent loop. Each step: check limits → reminders → compress → assemble context → call the
model → run the chosen tools (hooks and mode checks around each) → record the turn → detect loops.

`Agent(model, workspace).run(task)` is a generator of events; iterate it to drive the run.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ale_flow import events as ev
from ale_flow import permissions
from ale_flow.context import builder
from ale_flow.context.compress import compress, estimate_tokens
from ale_flow.context.detection import Detector
from ale_flow.context.reminders import ReminderTracker, env_summary
from ale_flow.hooks import HookEvent, HookOutcome, HookRunner, guard
from ale_flow.models.base import Model, ModelError, model_info
from ale_flow.project import load_memory_files, load_project_files
from ale_flow.settings import Settings, global_dir
from ale_flow.tools import ToolRegistry, builtin_tools
from ale_flow.tools.base import EnvState, Tool, ToolContext
from ale_flow.tools.task import task_tool
from ale_flow.tools.todo import load_memory, load_todos, render_todos
from ale_flow.trajectory import ObservationRecord, TrajectoryWriter, TurnRecord
from ale_flow.types import AgentStopReason, Message, ModelResponse, ToolCall, ToolResult, Usage
from ale_flow.workspace import LocalWorkspace, Workspace


@dataclass
class _RunState:
    step: int = 0
    stop: AgentStopReason | None = None
    detail: str = ""
    final: str = ""


class Agent:
    """One agent session over a model and a workspace."""

    def __init__(
        self,
        model: Model,
        workspace: Workspace | str | Path = ".",
        settings: Settings | None = None,
        tools: list[Tool] | None = None,
        confirm: permissions.Confirm | None = None,
        trajectory_path: str | Path | None = None,
        record: bool = True,
        allow_subagents: bool = True,
    ) -> None:
        self.model = model
        self.workspace: Workspace = workspace if isinstance(workspace, Workspace) else LocalWorkspace(workspace)
        self.settings = settings or Settings()
        self.confirm = confirm
        self.session_id = uuid.uuid4().hex[:16]
        self.cancel = threading.Event()
        self.env = EnvState()
        self.usage = Usage()
        s = self.settings
        self.project = load_project_files(self.workspace, s.state_dir)
        registry = ToolRegistry(builtin_tools(s.tools.allow_network) + list(tools or []))
        if allow_subagents:
            registry.add(task_tool({n: a.description for n, a in self.project.agents.items()}))
        self.warnings: list[str] = list(self.project.errors)
        self._mcp: list[Any] = []
        if s.mcp_servers:
            from ale_flow.tools.mcp import connect_all  # lazy: the mcp SDK is an optional extra

            self._mcp, errors = connect_all(s.mcp_servers)
            self.warnings += errors
            for conn in self._mcp:
                for tool in conn.tools():
                    registry.add(tool)
        self.tools = registry.subset(s.tools.enabled, tuple(s.tools.disabled))
        self.ctx = ToolContext(self.workspace, self.env, self.cancel, s.state_dir, {"subagent": self._run_subagent})
        self.hooks = HookRunner({str(k): v for k, v in s.hooks.items()}, self.workspace.root if isinstance(self.workspace, LocalWorkspace) else ".")
        self._hook_failures: list[ev.HookFailed] = []
        """Failed hooks not yet yielded; `run` yields them before the next event."""
        if record and trajectory_path is None:
            if s.trajectory_dir:
                base = Path(s.trajectory_dir)
            elif isinstance(self.workspace, LocalWorkspace):
                base = Path(self.workspace.root) / s.state_dir / "trajectories"
            else:  # a remote workspace's root is not a path on this machine
                base = global_dir() / "trajectories"
            trajectory_path = base / f"{time.strftime('%Y%m%d-%H%M%S')}-{self.session_id}.jsonl"
        self.trajectory_path = Path(trajectory_path) if trajectory_path else None
        """The current (or last) run's trajectory file; each further run gets its own (`<stem>.<n>.jsonl`)."""
        self._first_path = self.trajectory_path
        self._runs = 0
        self.history: list[Message] = []

    # ------------------------------------------------------------------ public
    def close(self) -> None:
        """Disconnect MCP servers (their processes exit)."""
        for conn in self._mcp:
            conn.close()
        self._mcp = []

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def interrupt(self) -> None:
        """Stop the current tool (shell commands are killed) and end the run at the next check."""
        self.cancel.set()

    def run(self, task: str) -> Iterator[ev.Event]:
        """Run `task` to a stop; yields events, the last one is always `Stopped`."""
        self._runs += 1
        if self._first_path is not None and self._runs > 1:
            self.trajectory_path = self._first_path.with_name(f"{self._first_path.stem}.{self._runs}{self._first_path.suffix}")
        writer = TrajectoryWriter(self.trajectory_path) if self.trajectory_path else None
        st = _RunState()
        self._hook_failures = []
        try:
            self._hook("SessionStart", {"task": task})
            yield ev.SessionStarted(task=task, session_id=self.session_id)
            with closing(self._loop(task, st, writer)) as loop:  # closed with us, as `yield from` would
                for event in loop:
                    # Hooks run inside the step that produced `event`: report their failures first.
                    yield from self._drain_hook_failures()
                    yield event
            yield from self._drain_hook_failures()
        finally:
            # Runs on a normal stop, on exceptions and when the caller closes the generator.
            reason = st.stop.value if st.stop else "aborted"
            if writer:
                writer.end(reason, st.detail)
                writer.close()
            self._hook("SessionEnd", {"stop_reason": reason})
        assert st.stop is not None
        yield from self._drain_hook_failures()  # SessionEnd's
        yield ev.Stopped(reason=st.stop, final_message=st.final, steps=st.step, usage=self.usage, detail=st.detail)

    def _loop(self, task: str, st: _RunState, writer: TrajectoryWriter | None) -> Generator[ev.Event, None, None]:
        s = self.settings
        start = time.monotonic()
        task = self.project.expand(task)
        gate = self._run_hooks("UserPromptSubmit", self._payload(prompt=task))
        if writer:
            writer.header(self.session_id, task, {**model_info(self.model), "workspace": self.workspace.root, "mode": s.mode})
        if gate.blocked:
            st.stop, st.detail = AgentStopReason.BLOCKED, gate.message
            return
        self.history = [Message("user", task, turn=0, pinned=True)]
        memory = load_memory_files(self.workspace, self.env.cwd, global_dir())
        memory_cwd = self.env.cwd
        facts, todos = self._external_memory()
        tracker = ReminderTracker()
        detector = Detector(s.detection)
        malformed_streak = 0
        chunk = 0

        while True:
            limit = self._limit_reached(st.step, start)
            if limit is not None:
                st.stop, st.detail = limit
                return
            st.step += 1
            step = st.step
            notes = tracker.check(self.workspace, self.env, self.tools.names(), todos)
            for note in notes:
                self.history.append(Message("user", f"<system-reminder>{note}</system-reminder>", turn=step))
                yield ev.Reminder(text=note)
            compressed = self._maybe_compress(writer)
            if compressed is not None:
                yield compressed
            if self.env.cwd != memory_cwd:
                memory, memory_cwd = load_memory_files(self.workspace, self.env.cwd, global_dir()), self.env.cwd
            system = builder.system_prompt(s.system_prompt, s.mode, memory, facts, render_todos(todos), env_summary(self.env))
            try:
                resp = self.model.complete(builder.assemble(system, self.history, s.model.native_tools), self.tools.schemas())
            except ModelError as e:
                st.stop, st.detail = AgentStopReason.MODEL_ERROR, str(e)
                return
            self.usage.add(resp.usage)
            self.history.append(Message("assistant", resp.content, list(resp.tool_calls), turn=step))
            yield ev.AssistantMessage(step=step, content=resp.content, tool_calls=tuple(resp.tool_calls), usage=resp.usage)

            if resp.malformed:
                malformed_streak += 1
                yield ev.MalformedToolCall(step=step, problems=tuple(resp.malformed))
            else:
                malformed_streak = 0
            if not resp.tool_calls and not resp.malformed:
                blocked = self._run_hooks("Stop", self._payload(final_message=resp.content))
                if blocked.blocked:  # a Stop hook may send the agent back to work
                    self.history.append(Message("user", blocked.message, turn=step))
                    self._record(writer, step, resp, [], chunk)
                    continue
                st.final = resp.content
                st.stop = AgentStopReason.COMPLETED
                self._record(writer, step, resp, [], chunk)
                return

            results: list[ToolResult] = []
            for item in self._run_tools(step, resp.tool_calls):
                if isinstance(item, ev.ToolFinished) and item.result is not None:
                    results.append(item.result)
                yield item
            for call, result in zip(resp.tool_calls, results):
                self.history.append(Message("tool", result.content, tool_call_id=call.id, name=call.name, turn=step))
            if resp.malformed:
                report = "Your tool call could not be used:\n- " + "\n- ".join(resp.malformed) + "\nSend it again as valid JSON."
                self.history.append(Message("user", report, turn=step))
            self._record(writer, step, resp, results, chunk, error=bool(resp.malformed))
            chunk += 1
            if any(not getattr(self.tools.get(c.name), "read_only", False) for c in resp.tool_calls):
                facts, todos = self._external_memory()
            if malformed_streak >= s.limits.max_malformed:
                st.stop, st.detail = AgentStopReason.MALFORMED_LIMIT, f"{malformed_streak} malformed tool-call replies in a row"
                return
            verdict = detector.observe(resp.content, list(resp.tool_calls), results)
            if verdict is not None:
                if verdict.stop:
                    st.stop = AgentStopReason.LOOP_DETECTED if verdict.kind == "loop" else AgentStopReason.FAILURE_STREAK
                    st.detail = verdict.message
                    return
                self.history.append(Message("user", f"<system-reminder>{verdict.message}</system-reminder>", turn=step))
                yield ev.Intervention(text=verdict.message)

    def run_to_end(self, task: str) -> ev.Stopped:
        """Run and return only the final `Stopped` event."""
        *_, last = self.run(task)
        assert isinstance(last, ev.Stopped)
        return last

    # ------------------------------------------------------------------ steps
    def _limit_reached(self, step: int, start: float) -> tuple[AgentStopReason, str] | None:
        lim, price = self.settings.limits, self.settings.model
        if self.cancel.is_set():
            return AgentStopReason.INTERRUPTED, "interrupted by the user"
        if step >= lim.max_steps:
            return AgentStopReason.MAX_STEPS, f"reached max_steps={lim.max_steps}"
        if lim.max_tokens is not None and self.usage.total_tokens >= lim.max_tokens:
            return AgentStopReason.MAX_TOKENS, f"used {self.usage.total_tokens} tokens (limit {lim.max_tokens})"
        cost = (self.usage.prompt_tokens * price.price_per_1k_prompt + self.usage.completion_tokens * price.price_per_1k_completion) / 1000
        if lim.max_cost_usd is not None and cost >= lim.max_cost_usd:
            return AgentStopReason.MAX_COST, f"spent ${cost:.4f} (limit ${lim.max_cost_usd})"
        if lim.time_limit_s is not None and time.monotonic() - start >= lim.time_limit_s:
            return AgentStopReason.TIME_LIMIT, f"ran {time.monotonic() - start:.1f}s (limit {lim.time_limit_s}s)"
        return None

    def _maybe_compress(self, writer: TrajectoryWriter | None) -> ev.Compressed | None:
        cfg = self.settings.compression
        if not cfg.enabled:
            return None
        tokens = estimate_tokens(self.history)
        if tokens <= cfg.threshold * self.model.context_window:
            return None
        self._hook("PreCompress", {"before_tokens": tokens, "context_window": self.model.context_window})
        res = compress(self.history, cfg, self.model.context_window, self.workspace, self.settings.state_dir, self._summarize)
        if res is None or (res.after_tokens >= res.before_tokens and not res.pruned_turns):
            return None  # nothing compressible yet (everything is recent)
        self.history = res.history
        if writer:
            writer.mark_irrelevant(sorted(t for t in res.pruned_turns if t > 0))
        return ev.Compressed(before_tokens=res.before_tokens, after_tokens=res.after_tokens, lossy=res.lossy)

    def _summarize(self, old: list[Message]) -> str:
        from ale_flow.context.compress import mechanical_summary

        msgs = [{"role": "system", "content": builder.SUMMARY_SYSTEM}, {"role": "user", "content": builder.render_for_summary(old)}]
        try:
            resp = self.model.complete(msgs, [])
        except ModelError:
            return mechanical_summary(old)
        self.usage.add(resp.usage)
        return resp.content or mechanical_summary(old)

    def _external_memory(self) -> tuple[str, list[dict[str, str]]]:
        return load_memory(self.workspace, self.settings.state_dir), load_todos(self.workspace, self.settings.state_dir)

    def _gate(self, call: ToolCall) -> str | None:
        """Mode, built-in guard and PreToolUse hooks; returns a refusal or None."""
        tool = self.tools.get(call.name)
        if tool is None:
            return None  # the registry reports unknown tools with the list of valid names
        refusal = permissions.check(self.settings.mode, tool, call, self.confirm)
        if refusal is None and self.settings.builtin_guard:
            refusal = guard(call.name, call.arguments, self.workspace.root)
        if refusal is None:
            out = self._run_hooks("PreToolUse", self._payload(tool_name=call.name, tool_input=call.arguments), tool=call.name)
            refusal = f"Blocked by a PreToolUse hook: {out.message}" if out.blocked else None
        return refusal

    def _run_tools(self, step: int, calls: list[ToolCall]) -> Iterator[ev.Event]:
        refusals = [self._gate(c) for c in calls]
        for c in calls:
            yield ev.ToolStarted(step=step, call=c)
        runnable = [(i, c) for i, c in enumerate(calls) if refusals[i] is None]
        results: list[ToolResult | None] = [None if r is None else ToolResult(r, is_error=True, blocked=True) for r in refusals]
        parallel = (
            self.settings.tools.parallel
            and len(runnable) > 1
            and all((t := self.tools.get(c.name)) is not None and t.read_only for _, c in runnable)
        )
        if parallel:
            with ThreadPoolExecutor(max_workers=min(8, len(runnable))) as pool:
                futures = [(i, pool.submit(self.tools.invoke, c.name, c.arguments, self.ctx)) for i, c in runnable]
                for i, f in futures:
                    results[i] = f.result()
        else:
            for i, c in runnable:
                results[i] = self.tools.invoke(c.name, c.arguments, self.ctx)
        for i, c in enumerate(calls):
            r = results[i]
            assert r is not None
            if not r.blocked:
                post = self._run_hooks("PostToolUse", self._payload(tool_name=c.name, tool_input=c.arguments, tool_response=r.content, is_error=r.is_error), tool=c.name)
                if post.blocked:
                    r = ToolResult(f"{r.content}\n[PostToolUse hook: {post.message}]", is_error=True)
                    results[i] = r
            yield ev.ToolFinished(step=step, call=c, result=r)

    def _record(self, writer: TrajectoryWriter | None, step: int, resp: ModelResponse, results: list[ToolResult], chunk: int, error: bool = False) -> None:
        if writer is None:
            return
        writer.turn(
            TurnRecord(
                index=step,
                content=resp.content,
                tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments} for c in resp.tool_calls],
                observations=[ObservationRecord(c.id, r.content, r.is_error) for c, r in zip(resp.tool_calls, results)],
                error=error or any(r.is_error for r in results),
                finish_reason=resp.finish_reason,
                prompt_tokens=resp.usage.prompt_tokens,
                completion_tokens=resp.usage.completion_tokens,
                latency_s=resp.latency_s,
                completion_token_ids=resp.completion_token_ids,
                completion_logprobs=resp.completion_logprobs,
                chunk_index=chunk,
            )
        )

    # ------------------------------------------------------------------ helpers
    def _payload(self, **kw: object) -> dict[str, object]:
        return {"session_id": self.session_id, "cwd": self.env.cwd, "workspace": self.workspace.root, **kw}

    def _hook(self, event: str, payload: dict[str, object]) -> None:
        self._run_hooks(event, self._payload(**payload))  # type: ignore[arg-type]

    def _run_hooks(self, event: HookEvent, payload: dict[str, Any], tool: str | None = None) -> HookOutcome:
        out = self.hooks.run(event, payload, tool=tool)
        self._hook_failures += [ev.HookFailed(hook_event=f.event, command=f.command, exit_code=f.exit_code, error=f.error) for f in out.failures]
        return out

    def _drain_hook_failures(self) -> Iterator[ev.HookFailed]:
        pending, self._hook_failures = self._hook_failures, []
        yield from pending

    def _run_subagent(self, prompt: str, agent_name: str | None) -> tuple[str, str, int]:
        """Run a child agent with a fresh context and a restricted tool set (no nested `task`)."""
        sub = self.settings.model_copy(deep=True)
        sub.limits.max_steps = self.settings.subagents.max_steps
        system = None
        if agent_name:
            d = self.project.agents.get(agent_name)
            if d is None:
                return f"unknown agent {agent_name!r}; known: {sorted(self.project.agents)}", "error", 0
            sub.tools.enabled = [t for t in (d.tools or self.tools.names()) if t != "task"]
            system = d.prompt
            if d.max_steps:
                sub.limits.max_steps = min(d.max_steps, sub.limits.max_steps)
        sub.system_prompt = system or self.settings.system_prompt
        # The child reuses the parent's live MCP sessions and custom tools instead of reconnecting.
        sub.mcp_servers = {}
        builtin = {t.name for t in builtin_tools(sub.tools.allow_network)}
        shared = [t for n in self.tools.names() if n not in builtin and n != "task" and (t := self.tools.get(n)) is not None]
        child = Agent(self.model, self.workspace, sub, tools=shared, confirm=self.confirm, record=False, allow_subagents=False)
        child.cancel = self.cancel
        child.ctx.cancel = self.cancel
        *events, done = child.run(prompt)
        assert isinstance(done, ev.Stopped)
        # The child's hooks failing must be as visible as the parent's: pass them up.
        self._hook_failures += [e for e in events if isinstance(e, ev.HookFailed)]
        self.usage.add(done.usage)
        self.env.files_written |= child.env.files_written
        text = done.final_message or done.detail
        limit = self.settings.subagents.summary_chars
        return (text[:limit] + (" …[truncated]" if len(text) > limit else "")), done.reason.value, done.steps
