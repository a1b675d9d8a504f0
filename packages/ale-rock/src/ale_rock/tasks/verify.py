"""Verifiers of Harbor and Terminal-Bench tasks: where their absolute paths land, and the reward.

Harbor's scripts use absolute paths: tests at ``/tests``, the reward at ``/logs/verifier``, the
solution at ``/solution``, the task's files under its work dir (``/app``). A sandbox's root file
system is read-only except its work dir and /tmp (the local backend), and the local runner is a
temp dir, so the harness puts them under the work dir instead (``.ale_tests``, ``.ale_logs``,
``.ale_solution``) and rewrites those paths in the uploaded text files; the work dir's own path is
filled in inside the sandbox (``$PWD``), so the same files work on every runner. ``TEST_DIR``
points at the tests, as in Terminal-Bench.
"""

from __future__ import annotations

import json
import math
import re

from ale_rock.tasks.models import SOLUTION_DIR, TESTS_DIR, Files, Task, TestReport, TestResult
from ale_rock.tasks.runner import CommandResult

LOGS_DIR = ".ale_logs"
PLACEHOLDER = "__ALE_WORKDIR__"
REWARD_TXT_MARK = "@@ALE_REWARD_TXT@@"
REWARD_JSON_MARK = "@@ALE_REWARD_JSON@@"
END_MARK = "@@ALE_VERIFIER_END@@"
OUTPUT_TAIL_BYTES = 200_000

_BOUNDARY_BEFORE = r"(?<![\w.\-/$~])"
_BOUNDARY_AFTER = r"(?=$|[/\s\"'`;:),\]}>|&=])"


def path_map(task: Task) -> dict[str, str]:
    """Absolute Harbor paths → their place under the work dir (placeholder for the work dir)."""
    m = {"/tests": f"{PLACEHOLDER}/{TESTS_DIR}", "/logs": f"{PLACEHOLDER}/{LOGS_DIR}", "/solution": f"{PLACEHOLDER}/{SOLUTION_DIR}"}
    wd = task.environment.workdir
    if wd and wd != "/" and wd not in m:
        m[wd] = PLACEHOLDER
    return m


def rewrite(files: Files, mapping: dict[str, str]) -> Files:
    """Rewrite the mapped absolute paths in every UTF-8 text file (binary files are left alone)."""
    if not mapping:
        return dict(files)
    alts = "|".join(re.escape(k) for k in sorted(mapping, key=len, reverse=True))
    pattern = re.compile(f"{_BOUNDARY_BEFORE}({alts}){_BOUNDARY_AFTER}", re.MULTILINE)
    out: Files = {}
    for rel, data in files.items():
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            out[rel] = data
            continue
        out[rel] = pattern.sub(lambda mt: mapping[mt.group(1)], text).encode("utf-8")
    return out


def resolve_placeholder(*dirs: str) -> str:
    """Shell that fills the work dir's real path into the uploaded files (run in the work dir)."""
    where = " ".join(dirs)
    return (
        f'W="$(pwd)"; grep -rlZ {PLACEHOLDER} {where} 2>/dev/null | xargs -0 -r sed -i "s#{PLACEHOLDER}#$W#g"; '
        f'export TEST_DIR="$W/{TESTS_DIR}"; '
    )


def reward_command(command: str, env_exports: str) -> str:
    """Run the verifier with fresh log dirs; print its output's tail, then the reward files."""
    return (
        f"rm -rf {LOGS_DIR}; mkdir -p {LOGS_DIR}/verifier {LOGS_DIR}/agent; {resolve_placeholder(TESTS_DIR)}{env_exports}"
        f"( {command} ) > {LOGS_DIR}/test-output.txt 2>&1 < /dev/null; rc=$?; "
        f"tail -c {OUTPUT_TAIL_BYTES} {LOGS_DIR}/test-output.txt; "
        f'echo; echo {REWARD_TXT_MARK}; cat {LOGS_DIR}/verifier/reward.txt 2>/dev/null; '
        f'echo; echo {REWARD_JSON_MARK}; cat {LOGS_DIR}/verifier/reward.json 2>/dev/null; '
        f'echo; echo "{END_MARK} $rc"; cd "$W"; rm -rf {TESTS_DIR} {LOGS_DIR}; exit $rc'
    )


def _section(output: str, start: str, end: str) -> str | None:
    i = output.rfind(start)
    if i < 0:
        return None
    j = output.find(end, i)
    return output[i + len(start) : j if j >= 0 else None].strip()


def read_reward(output: str) -> tuple[float | None, dict[str, float], str]:
    """(reward, metrics, error) from the verifier's output: ``reward.json`` wins over ``reward.txt``.

    ``reward.json`` holds numbers by name: its ``reward`` key is the reward, else its only value,
    else the mean of all (every number is kept in ``metrics``)."""
    txt = _section(output, REWARD_TXT_MARK, REWARD_JSON_MARK) or ""
    raw = _section(output, REWARD_JSON_MARK, END_MARK) or ""
    if raw:
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as e:
            return None, {}, f"reward.json is not JSON: {e}"
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            data = {"reward": data}
        if not isinstance(data, dict) or not data:
            return None, {}, "reward.json must be an object of numbers"
        metrics: dict[str, float] = {}
        for k, v in data.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                return None, {}, f"reward.json: {k!r} is not a finite number"
            metrics[str(k)] = float(v)
        if "reward" in metrics:
            reward = metrics["reward"]
        elif len(metrics) == 1:
            reward = next(iter(metrics.values()))
        else:
            reward = sum(metrics.values()) / len(metrics)
        return reward, metrics, ""
    if txt:
        try:
            value = float(txt.split()[0])
        except ValueError:
            return None, {}, f"reward.txt is not a number: {txt[:80]!r}"
        if not math.isfinite(value):
            return None, {}, "reward.txt is not a finite number"
        return value, {"reward": value}, ""
    return None, {}, "the verifier wrote no /logs/verifier/reward.txt or reward.json"


def reward_report(res: CommandResult, tests: list[TestResult]) -> TestReport:
    """A report from a reward-file verifier's run (``tests``: any PASS/FAIL or pytest lines seen)."""
    reward, metrics, error = read_reward(res.output)
    if res.timed_out:
        error = ""
    end = res.output.rfind(REWARD_TXT_MARK)
    shown = res.output[:end].rstrip() if end >= 0 else res.output
    if not tests:
        tests = [TestResult("reward", reward is not None and reward >= 1.0, error or f"reward {reward}")]
    return TestReport(
        tests=tests, exit_code=res.exit_code, output=shown, timed_out=res.timed_out, duration_s=res.duration_s,
        reward_value=reward if reward is not None else 0.0, metrics=metrics, error=error,
    )  # fmt: skip
