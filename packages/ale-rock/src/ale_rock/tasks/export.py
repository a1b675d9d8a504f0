"""Write tasks in Harbor's layout (``ale-rock tasks export --format harbor``).

An ALE task becomes: ``task.toml`` (limits, domain as category, split and tags in metadata),
``instruction.md`` (the prompt), ``environment/Dockerfile`` (ALE's base image, ``WORKDIR
/workspace``, the setup files copied in and ``setup.sh`` run), ``tests/test.sh`` (runs the original
test command against ``/tests`` and writes ``/logs/verifier/reward.json`` with the same reward ALE
computes: the fraction of PASS lines, 1 only when all pass) and ``solution/solve.sh``.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from ale_rock.tasks.evaluate import SETUP_SCRIPT, SOLVE_SCRIPT, TESTLIB_NAME, _testlib_source
from ale_rock.tasks.models import SETUP_DIR, SOLUTION_DIR, TESTS_DIR, Task, TaskFormat

HARBOR_SCHEMA = "1.4"
EXPORT_WORKDIR = "/workspace"
REWARD_SCRIPT = "ale_reward.py"

# Reads the test output and writes Harbor's reward.json with ALE's reward rule (see TestReport).
_REWARD_PY = '''"""Turn PASS/FAIL lines into /logs/verifier/reward.json (ALE's reward rule)."""
import json, re, sys

out = open(sys.argv[1], encoding="utf-8", errors="replace").read()
rc = int(sys.argv[2])
tests = {}
for line in out.splitlines():
    m = re.match(r"^(PASS|FAIL)\\s+([A-Za-z0-9_.:/\\[\\]-]+)", line.strip())
    if m:
        tests[m.group(2)] = m.group(1) == "PASS"
n, p = len(tests), sum(tests.values())
if n and p == n and rc == 0:
    reward = 1.0
elif n:
    reward = min(p / n, 1.0 - 1.0 / (n + 1))
else:
    reward = 0.0
json.dump({"reward": reward, "tests_passed": p, "tests_total": n}, open(sys.argv[3], "w"))
'''


def _toml_str(v: str) -> str:
    return json.dumps(v, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def task_toml(task: Task) -> str:
    s = task.spec
    tags = ", ".join(_toml_str(t) for t in s.tags)
    return "\n".join([
        f'schema_version = "{HARBOR_SCHEMA}"', "",
        "[task]", f"name = {_toml_str(s.id)}", f"description = {_toml_str(s.title)}", f"keywords = [{tags}]", "",
        "[metadata]", f"category = {_toml_str(s.domain.value)}", f"difficulty = {_toml_str(s.difficulty.value)}",
        f"split = {_toml_str(s.split.value)}", f"tags = [{tags}]", "",
        "[agent]", f"timeout_sec = {float(s.limits.agent_s)}", "",
        "[verifier]", f"timeout_sec = {float(s.limits.test_s)}", "",
        "[environment]", f"build_timeout_sec = {float(s.limits.setup_s)}", f'workdir = "{EXPORT_WORKDIR}"',
        'network_mode = "no-network"', "",
    ])  # fmt: skip


def dockerfile(task: Task, base_image: str) -> str:
    lines = [f"FROM {base_image}", f"WORKDIR {EXPORT_WORKDIR}"]
    if any(k != SETUP_SCRIPT for k in task.setup):
        lines.append(f"COPY workspace/ {EXPORT_WORKDIR}/")
    if SETUP_SCRIPT in task.setup:
        lines += [f"COPY {SETUP_SCRIPT} {EXPORT_WORKDIR}/{SETUP_DIR}/{SETUP_SCRIPT}",
                  f"RUN bash {SETUP_DIR}/{SETUP_SCRIPT} && rm -rf {SETUP_DIR}"]  # fmt: skip
    return "\n".join(lines) + "\n"


def test_sh(task: Task) -> str:
    cmd = task.spec.test_command.replace(f"{TESTS_DIR}/", "/tests/")
    return (
        "#!/bin/bash\n# Exported by ale-rock: the task's own test command, then ALE's reward rule.\n"
        f"cd {EXPORT_WORKDIR}\n"
        f"( {cmd} ) > /logs/verifier/test-output.txt 2>&1\nrc=$?\ncat /logs/verifier/test-output.txt\n"
        f"python3 /tests/{REWARD_SCRIPT} /logs/verifier/test-output.txt $rc /logs/verifier/reward.json\n"
        "exit $rc\n"
    )


def solve_sh(task: Task) -> str:
    head = f"#!/bin/bash\nset -e\ncd {EXPORT_WORKDIR}\n"
    if SOLVE_SCRIPT in task.solution:
        body = task.solution[SOLVE_SCRIPT].decode("utf-8").replace(f"{SOLUTION_DIR}/", "/solution/")
        return head + body
    copies = [f"mkdir -p {shlex.quote(str(Path(rel).parent))} && cp /solution/{shlex.quote(rel)} {shlex.quote(rel)}"
              for rel in sorted(task.solution)]  # fmt: skip
    return head + "\n".join(copies) + "\n"


def export_harbor(task: Task, dest: Path | str, *, base_image: str | None = None) -> Path:
    """Write one ALE task as a Harbor task directory; returns it."""
    if task.format != TaskFormat.ALE:
        raise ValueError(f"{task.id}: only ALE-format tasks are exported (this one is {task.format.value})")
    if base_image is None:
        from ale_rock.backends.docker_runtime import default_base_image

        base_image = default_base_image()
    root = Path(dest)
    files: dict[str, bytes] = {
        "task.toml": task_toml(task).encode(),
        "instruction.md": (task.spec.prompt.rstrip() + "\n").encode(),
        "environment/Dockerfile": dockerfile(task, base_image).encode(),
        "tests/test.sh": test_sh(task).encode(),
        f"tests/{REWARD_SCRIPT}": _REWARD_PY.encode(),
        f"tests/{TESTLIB_NAME}": _testlib_source(),
        "solution/solve.sh": solve_sh(task).encode(),
    }
    for rel, data in task.setup.items():
        files[f"environment/{SETUP_SCRIPT}" if rel == SETUP_SCRIPT else f"environment/workspace/{rel}"] = data
    for rel, data in task.tests.items():
        files[f"tests/{rel}"] = data
    for rel, data in task.solution.items():
        if rel != SOLVE_SCRIPT:
            files[f"solution/{rel}"] = data
    for rel, data in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return root


def export_suite(tasks: list[Task], out: Path | str, *, base_image: str | None = None) -> list[Path]:
    """Export tasks under ``out/<domain>/<id>``."""
    return [export_harbor(t, Path(out) / t.spec.domain.value / t.id, base_image=base_image) for t in tasks]
