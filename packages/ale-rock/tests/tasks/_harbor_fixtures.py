"""Harbor and Terminal-Bench task directories the tests write: one per feature."""

from __future__ import annotations

import subprocess
from pathlib import Path

HELLO_TEST = """#!/bin/bash
if [ "$(cat /app/hello.txt 2>/dev/null)" = "hello" ]; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def toml(name: str, extra: str = "", agent_s: float = 30, test_s: float = 30, workdir: str = "/app") -> str:
    return (f'schema_version = "1.4"\n[task]\nname = "{name}"\n[metadata]\ncategory = "programming"\n'
            f'difficulty = "easy"\n[agent]\ntimeout_sec = {agent_s}\n[verifier]\ntimeout_sec = {test_s}\n'
            f'[environment]\nworkdir = "{workdir}"\n{extra}')  # fmt: skip


def harbor_tasks(base: Path) -> dict[str, Path]:
    """The valid task set: every entry validates (reference passes, doing nothing does not)."""
    t: dict[str, Path] = {}
    t["reward-txt"] = write(base / "reward-txt", {
        "task.toml": toml("t/reward-txt"), "instruction.md": "Write the word hello to /app/hello.txt.\n",
        "tests/test.sh": HELLO_TEST, "solution/solve.sh": "echo hello > /app/hello.txt\n",
    })  # fmt: skip
    # reward.json with several metrics; the reward is the fraction of the three lines present.
    t["reward-json"] = write(base / "reward-json", {
        "task.toml": toml("t/reward-json"), "instruction.md": "Write the lines a, b and c to /app/out.txt.\n",
        "tests/test.sh": (
            "#!/bin/bash\nn=0\nfor w in a b c; do grep -qx $w /app/out.txt 2>/dev/null && n=$((n+1)); done\n"
            'python3 -c "import json,sys; n=int(sys.argv[1]); '
            'json.dump({\'reward\': n/3, \'lines\': n, \'complete\': float(n==3)}, open(\'/logs/verifier/reward.json\',\'w\'))" $n\n'
        ),
        "solution/solve.sh": "printf 'a\\nb\\nc\\n' > /app/out.txt\n",
    })  # fmt: skip
    # Two steps in one sandbox: shared tests/ helper, each step its own test.sh and solution.
    t["multi-step"] = write(base / "multi-step", {
        "task.toml": toml("t/multi-step", 'multi_step_reward_strategy = "mean"\n'
                          '[[steps]]\nname = "create"\nmin_reward = 1.0\n[steps.agent]\ntimeout_sec = 20\n'
                          '[[steps]]\nname = "append"\n[steps.verifier]\ntimeout_sec = 20\n'),
        "tests/check.sh": 'grep -qx "$1" /app/log.txt 2>/dev/null && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n',
        "steps/create/instruction.md": "Create /app/log.txt containing the line one.\n",
        "steps/create/tests/test.sh": "bash /tests/check.sh one\n",
        "steps/create/solution/solve.sh": "echo one > /app/log.txt\n",
        "steps/append/instruction.md": "Append the line two to /app/log.txt.\n",
        "steps/append/environment/hint.txt": "two\n",
        "steps/append/tests/test.sh": "bash /tests/check.sh two\n",
        "steps/append/solution/solve.sh": "cat /app/hint.txt >> /app/log.txt\n",
    })  # fmt: skip
    # pytest-style verifier (pytest from the host's python3-pytest on the local backend).
    t["pytest-style"] = write(base / "pytest-style", {
        "task.toml": toml("t/pytest-style"), "instruction.md": "Write a python module /app/mathx.py with add(a, b).\n",
        "tests/test_outputs.py": ("import sys\nsys.path.insert(0, '/app')\n\n\ndef test_add():\n    import mathx\n"
                                  "    assert mathx.add(2, 3) == 5\n\n\ndef test_neg():\n    import mathx\n"
                                  "    assert mathx.add(-1, 1) == 0\n"),
        "tests/test.sh": ("#!/bin/bash\ncd /app\npython3 -m pytest -rA -p no:cacheprovider /tests/test_outputs.py\n"
                          "if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"),
        "solution/solve.sh": "printf 'def add(a, b):\\n    return a + b\\n' > /app/mathx.py\n",
    })  # fmt: skip
    # A Dockerfile whose FROM image is not available: its steps are applied on ALE's base image.
    t["dockerfile"] = write(base / "dockerfile", {
        "task.toml": toml("t/dockerfile", workdir="/app").replace('workdir = "/app"\n', ""),
        "instruction.md": "Copy the value of $GREETING and the contents of /app/data/seed.txt into /app/answer.txt.\n",
        "environment/Dockerfile": ("FROM python:3.11-slim-not-here\nARG WHO=world\nENV GREETING=\"hi ${WHO}\"\n"
                                   "WORKDIR /app\nCOPY data/ /app/data/\nCOPY run.sh ./\n"
                                   "RUN bash run.sh && \\\n    echo built > built.txt\nCMD [\"bash\"]\n"),
        "environment/data/seed.txt": "seed-42\n",
        "environment/run.sh": "echo ran > ran.txt\n",
        "tests/test.sh": ('#!/bin/bash\ncd /app\n[ -f built.txt ] && [ -f ran.txt ] && '
                          '[ "$(cat answer.txt 2>/dev/null)" = "hi world seed-42" ] '
                          '&& echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n'),
        "solution/solve.sh": 'echo "$GREETING $(cat /app/data/seed.txt)" > /app/answer.txt\n',
    })  # fmt: skip
    t["allowlist"] = write(base / "allowlist", {
        "task.toml": toml("t/allowlist", 'network_mode = "allowlist"\nallowed_hosts = ["pypi.org:443", "files.pythonhosted.org"]\n'),
        "instruction.md": "Write the word hello to /app/hello.txt.\n", "tests/test.sh": HELLO_TEST,
        "solution/solve.sh": "echo hello > /app/hello.txt\n",
    })  # fmt: skip
    # Deprecated spellings (version, memory, allow_internet) and unknown keys are read.
    t["deprecated"] = write(base / "deprecated", {
        "task.toml": ('version = "1.0"\n[metadata]\nauthor_name = "x"\ncategory = "security"\n[verifier]\ntimeout_sec = 30.0\n'
                      '[agent]\ntimeout_sec = 30.0\n[environment]\nmemory = "256M"\ncpus = 0.5\nallow_internet = false\n'
                      'workdir = "/app"\nsomething_new = 3\n'),
        "instruction.md": "Write the word hello to /app/hello.txt.\n", "tests/test.sh": HELLO_TEST,
        "solution/solve.sh": "echo hello > /app/hello.txt\n",
    })  # fmt: skip
    # Terminal-Bench: task.yaml + run-tests.sh (which installs uv from the internet: substituted).
    t["terminal-bench"] = write(base / "tb-hello", {
        "task.yaml": ("instruction: |\n  Create /app/greet.sh printing hello.\nauthor_name: x\ndifficulty: easy\n"
                      "category: software-engineering\ntags: [bash]\nparser_name: pytest\nmax_agent_timeout_sec: 60\n"
                      "max_test_timeout_sec: 30\nrun_tests_in_same_shell: false\n"),
        "Dockerfile": "FROM ghcr.io/laude-institute/t-bench/python-3-13:20250620\nWORKDIR /app\n",
        "docker-compose.yaml": "services: {}\n",
        "run-tests.sh": "#!/bin/bash\ncurl -LsSf https://astral.sh/uv/install.sh | sh\nuv run pytest $TEST_DIR/test_outputs.py -rA\n",
        "tests/test_outputs.py": ("import subprocess\n\n\ndef test_exists():\n    import os\n    assert os.path.exists('/app/greet.sh')\n\n\n"
                                  "def test_output():\n    out = subprocess.run(['bash', '/app/greet.sh'], capture_output=True, text=True)\n"
                                  "    assert out.stdout.strip() == 'hello'\n"),
        "solution.sh": "echo 'echo hello' > /app/greet.sh\n",
    })  # fmt: skip
    return t


def harbor_error_tasks(base: Path) -> dict[str, Path]:
    """Tasks that load but cannot run here; each run must end in an error naming why."""
    t: dict[str, Path] = {}
    t["network-step"] = write(base / "network-step", {
        "task.toml": toml("t/network-step"), "instruction.md": "Write the word hello to /app/hello.txt.\n",
        "environment/Dockerfile": "FROM ubuntu:24.04\nWORKDIR /app\nRUN apt-get update && apt-get install -y curl\n",
        "tests/test.sh": HELLO_TEST, "solution/solve.sh": "echo hello > /app/hello.txt\n",
    })  # fmt: skip
    t["ready-image"] = write(base / "ready-image", {
        "task.toml": toml("t/ready-image", 'docker_image = "ghcr.io/example/image:1"\n'),
        "instruction.md": "Write the word hello to /app/hello.txt.\n", "tests/test.sh": HELLO_TEST,
        "solution/solve.sh": "echo hello > /app/hello.txt\n",
    })  # fmt: skip
    t["no-reward"] = write(base / "no-reward", {
        "task.toml": toml("t/no-reward"), "instruction.md": "Write the word hello to /app/hello.txt.\n",
        "tests/test.sh": "echo PASS looks_fine\n", "solution/solve.sh": "echo hello > /app/hello.txt\n",
    })  # fmt: skip
    return t


def timeout_task(base: Path) -> Path:
    """The agent's and the verifier's limits are 1 s."""
    return write(base / "timeouts", {
        "task.toml": toml("t/timeouts", agent_s=1, test_s=1), "instruction.md": "Write the word hello to /app/hello.txt.\n",
        "tests/test.sh": "sleep 30\necho 1 > /logs/verifier/reward.txt\n", "solution/solve.sh": "echo hello > /app/hello.txt\n",
    })  # fmt: skip


def swe_repo(base: Path) -> tuple[Path, str, str, str]:
    """A small git repo with a bug; returns (repo, base commit, fix patch, test patch)."""
    repo = base / "calc"
    write(repo, {"calc/__init__.py": "", "calc/ops.py": "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n",
                 "tests/__init__.py": "", "tests/test_sub.py": "from calc.ops import sub\n\n\ndef test_sub():\n    assert sub(3, 1) == 2\n"})

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    git("-c", "user.email=t@t", "-c", "user.name=t", "add", "-A")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "base")
    commit = git("rev-parse", "HEAD").strip()
    buggy = (repo / "calc/ops.py").read_text()
    (repo / "calc/ops.py").write_text(buggy.replace("a - b", "a + b", 1))
    fix = git("diff")
    (repo / "calc/ops.py").write_text(buggy)
    (repo / "tests/test_add.py").write_text("from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n")
    git("add", "-N", "tests/test_add.py")
    test_patch = git("diff")
    git("rm", "-q", "--cached", "tests/test_add.py")
    (repo / "tests/test_add.py").unlink()
    return repo, commit, fix, test_patch
