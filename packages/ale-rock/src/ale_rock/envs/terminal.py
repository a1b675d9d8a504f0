"""Terminal tasks as a gem environment: the action is a shell tool call run in a sandbox, the
reward comes from the task's hidden tests, copied in only when the episode ends."""

from __future__ import annotations

import functools
from typing import Any

from ale_rock.envs.core import Env, StepResult
from ale_rock.envs.errors import EnvNotFound
from ale_rock.envs.sandbox import LocalDirProvider, ProviderRunner, SandboxProvider
from ale_rock.envs.tools.calls import ToolCallError, parse_tool_call, tool_schema

MAX_OBSERVATION_CHARS = 8000


@functools.lru_cache(maxsize=1)
def _suite() -> dict[str, Any]:
    from ale_rock.tasks.loader import load_suite

    return {t.id: t for t in load_suite()}


def find_task(task_id: str) -> Any:
    """A task of the built-in suite by id."""
    task = _suite().get(task_id)
    if task is None:
        raise EnvNotFound(f"unknown task {task_id!r}", field="env_id", env_id=f"task:{task_id}")
    return task


class TerminalTaskEnv(Env):
    """One task of the suite (or any ``ale_rock.tasks`` Task). Tools: ``bash`` and ``submit``.
    The episode ends on ``submit`` or after ``max_turns``; then the hidden tests give the reward."""

    needs_sandbox = True

    def __init__(
        self,
        task_id: str = "",
        task: Any = None,
        sandbox_provider: SandboxProvider | None = None,
        max_turns: int = 30,
        command_timeout_s: float = 60.0,
        seed: int | None = None,
    ) -> None:
        super().__init__(seed)
        self.task = task if task is not None else find_task(task_id)
        # Without a provider the task runs in a temp dir on this machine: fine for development,
        # no isolation. The env server passes its configured provider.
        self.provider = sandbox_provider or LocalDirProvider()
        self.max_turns, self.command_timeout_s = max_turns, command_timeout_s
        from ale_rock.tasks.environment import sandbox_spec

        # The sandbox its task's [environment] asks for (the same spec as episodes and `tasks run`).
        self.runner = ProviderRunner(self.provider, {"ale.env": f"task:{self.task.id}"}, sandbox_spec(self.task))
        self.turn = 0
        self.action_description = (
            'One tool call: {"name": "bash", "arguments": {"command": "..."}} or {"name": "submit"}.'
        )

    @property
    def sandbox_id(self) -> str:
        return self.runner.sandbox_id

    @property
    def tools(self) -> list[dict[str, Any]]:
        return [
            tool_schema("bash", "Run a shell command in the task's work dir.", {"command": "string"}),
            tool_schema("submit", "Finish; the hidden tests decide the reward.", {}),
        ]

    def _reset(self) -> tuple[str, dict[str, Any]]:
        from ale_rock.tasks.evaluate import setup_task

        self.turn = 0
        self.runner.safety_events.clear()
        setup_task(self.task, self.runner)
        info = {"task_id": self.task.id, "domain": self.task.spec.domain.value, "sandbox_id": self.sandbox_id}
        return self.task.spec.prompt, info

    def _finish(self, info: dict[str, Any]) -> float:
        from ale_rock.tasks.evaluate import run_tests

        report = run_tests(self.task, self.runner)
        info["final_reward"] = {
            "value": report.reward,
            "success": report.passed,
            "source": self.task.spec.test_command,
            "tests": [{"name": t.name, "passed": t.passed, "output": t.message} for t in report.tests],
        }
        info["success"] = report.passed
        return report.reward

    def _step(self, action: str) -> StepResult:
        self.turn += 1
        info: dict[str, Any] = {"turn": self.turn}
        truncated = self.turn >= self.max_turns
        n_events = len(self.runner.safety_events)
        try:
            call = parse_tool_call(action)
        except ToolCallError as e:
            call, obs = None, f"Error: {e}"
            info["error"] = "malformed_tool_call"
        if call is not None and call.name == "submit":
            reward = self._finish(info)
            return "Submitted.", reward, True, False, info
        if call is not None and call.name == "bash" and isinstance(call.arguments.get("command"), str):
            res = self.runner.run(call.arguments["command"], self.command_timeout_s)
            out = res.output[-MAX_OBSERVATION_CHARS:]
            status = "timed out" if res.timed_out else f"exit code {res.exit_code}"
            obs = f"[{status}]\n{out}"
            if res.exit_code != 0:
                info["error"] = "command_failed"
        elif call is not None:
            obs = "Error: the tools are bash(command: string) and submit()"
            info["error"] = "unknown_tool"
        if len(self.runner.safety_events) > n_events:
            info["safety_events"] = self.runner.safety_events[n_events:]
        if truncated:
            reward = self._finish(info)
            return obs + "\n(turn limit reached)", reward, False, True, info
        return obs, 0.0, False, False, info

    def close(self) -> None:
        super().close()
        self.runner.close()
