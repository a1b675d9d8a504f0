"""Import SWE-bench-style JSONL instances as Harbor tasks against a local git checkout.

Each line has ``instance_id, repo, base_commit, patch, test_patch, problem_statement, FAIL_TO_PASS,
PASS_TO_PASS`` (the test lists may be JSON strings, as SWE-bench ships them). The task's
environment is the repository at ``base_commit`` (``git archive``, copied to ``/testbed``); the
patches are applied here, with the host's git, so the sandbox needs neither git nor the network:
``tests/files/`` holds the files as ``test_patch`` leaves them and ``solution/files/`` as ``patch``
leaves them (deleted files are listed). The verifier runs the FAIL_TO_PASS and PASS_TO_PASS tests
with pytest and writes ``reward.json``: ``reward`` 1 only when all pass (SWE-bench's "resolved"),
plus the fraction of each list.
"""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ale_rock.tasks.harbor import task_id_from

WORKDIR = "/testbed"
REQUIRED = ("instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement", "FAIL_TO_PASS", "PASS_TO_PASS")

_EVAL_PY = '''"""Run FAIL_TO_PASS and PASS_TO_PASS with pytest; write /logs/verifier/reward.json."""
import json, re, subprocess, sys

cfg = json.load(open(sys.argv[1]))
ids = cfg["FAIL_TO_PASS"] + cfg["PASS_TO_PASS"]
proc = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "-q", *ids],
                      capture_output=True, text=True)
print(proc.stdout[-20000:], proc.stderr[-5000:])
status = {}
for line in proc.stdout.splitlines():
    m = re.match(r"^(PASSED|FAILED|ERROR)\\s+(\\S+)", line.strip())
    if m:
        status[m.group(2)] = m.group(1) == "PASSED"
def frac(xs):
    return sum(status.get(x, False) for x in xs) / len(xs) if xs else 1.0
f2p, p2p = frac(cfg["FAIL_TO_PASS"]), frac(cfg["PASS_TO_PASS"])
reward = 1.0 if f2p == 1.0 and p2p == 1.0 else 0.0
json.dump({"reward": reward, "fail_to_pass": f2p, "pass_to_pass": p2p}, open("/logs/verifier/reward.json", "w"))
'''


class SweImportError(ValueError):
    """An instance cannot be imported; names the line and the field."""


@dataclass
class SweInstance:
    """One JSONL line."""

    instance_id: str
    repo: str
    base_commit: str
    patch: str
    test_patch: str
    problem_statement: str
    fail_to_pass: list[str]
    pass_to_pass: list[str]


def _test_list(value: Any, field: str, where: str) -> list[str]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise SweImportError(f"{where}: field '{field}': not a JSON list") from None
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise SweImportError(f"{where}: field '{field}': must be a list of test ids")
    return value


def read_instances(path: Path | str) -> list[SweInstance]:
    out = []
    for no, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{no}"
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            raise SweImportError(f"{where}: invalid JSON: {e}") from None
        missing = [k for k in REQUIRED if k not in d]
        if missing:
            raise SweImportError(f"{where}: missing field(s) {', '.join(repr(m) for m in missing)}")
        for k in REQUIRED[:6]:
            if not isinstance(d[k], str):
                raise SweImportError(f"{where}: field '{k}': must be a string")
        out.append(SweInstance(d["instance_id"], d["repo"], d["base_commit"], d["patch"], d["test_patch"],
                               d["problem_statement"], _test_list(d["FAIL_TO_PASS"], "FAIL_TO_PASS", where),
                               _test_list(d["PASS_TO_PASS"], "PASS_TO_PASS", where)))  # fmt: skip
    return out


def find_checkout(repo_dir: Path, repo: str) -> Path:
    """``repo_dir`` itself if it is a git checkout, else ``repo_dir/owner__name`` or ``repo_dir/name``."""
    for cand in (repo_dir, repo_dir / repo.replace("/", "__"), repo_dir / repo.rsplit("/", 1)[-1]):
        if (cand / ".git").exists():
            return cand
    raise SweImportError(f"no git checkout for {repo!r} in {repo_dir} (tried it, {repo.replace('/', '__')}, {repo.rsplit('/', 1)[-1]})")


def _git(args: list[str], cwd: Path, stdin: str | None = None) -> bytes:
    res = subprocess.run(["git", *args], cwd=cwd, input=stdin.encode() if stdin is not None else None,
                         capture_output=True, timeout=120)  # fmt: skip
    if res.returncode != 0:
        raise SweImportError(f"git {' '.join(args[:2])} failed in {cwd}: {res.stderr.decode(errors='replace')[-500:]}")
    return res.stdout


def _patched_files(tree: Path, patch: str, what: str) -> tuple[dict[str, bytes], list[str]]:
    """Apply ``patch`` to a scratch copy of ``tree``: (files it adds or changes, files it deletes)."""
    if not patch.strip():
        return {}, []
    try:
        _git(["apply", "--check", "-"], tree, patch)
    except SweImportError as e:
        raise SweImportError(f"{what} does not apply at base_commit: {e}") from None
    touched = _git(["apply", "--numstat", "-z", "-"], tree, patch).decode()
    _git(["apply", "-"], tree, patch)
    changed, deleted = {}, []
    for entry in touched.split("\0"):
        parts = entry.split("\t")
        if len(parts) == 3 and parts[2]:
            p = tree / parts[2]
            if p.is_file():
                changed[parts[2]] = p.read_bytes()
            else:
                deleted.append(parts[2])
    return changed, deleted


def _copy_script(dir_: str, deleted: list[str]) -> str:
    rm = "".join(f"rm -f {WORKDIR}/{d}\n" for d in deleted)
    return f"cd {WORKDIR}\nif [ -d {dir_}/files ]; then cp -a {dir_}/files/. {WORKDIR}/; fi\n{rm}"


def import_instance(inst: SweInstance, checkout: Path, out: Path, *, base_image: str | None = None) -> Path:
    """Write one instance as a Harbor task dir under ``out``; returns it."""
    if base_image is None:
        from ale_rock.backends.docker_runtime import default_base_image

        base_image = default_base_image()
    root = out / task_id_from(inst.instance_id)
    archive = _git(["archive", "--format=tar", inst.base_commit], checkout)
    with tempfile.TemporaryDirectory(prefix="ale-swe-") as tmp:
        tree = Path(tmp) / "repo"
        tree.mkdir()
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tree, filter="data")
        _git(["init", "-q"], tree)  # git apply needs a repository to resolve paths against
        env_repo = root / "environment" / "repo"
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(env_repo, filter="data")
        test_files, test_deleted = _patched_files(tree, inst.test_patch, "test_patch")
        sol_files, sol_deleted = _patched_files(tree, inst.patch, "patch")
    files: dict[str, bytes] = {
        "task.toml": "\n".join([
            'schema_version = "1.4"', "", "[task]", f"name = {json.dumps(inst.instance_id)}",
            f"description = {json.dumps(f'{inst.repo}: {inst.instance_id}')}", "",
            "[metadata]", 'category = "software_engineering"', f"repo = {json.dumps(inst.repo)}",
            f"base_commit = {json.dumps(inst.base_commit)}", "",
            "[agent]", "timeout_sec = 1800.0", "", "[verifier]", "timeout_sec = 600.0", "",
            "[environment]", f'workdir = "{WORKDIR}"', 'network_mode = "no-network"', "",
        ]).encode(),  # fmt: skip
        "instruction.md": (f"{inst.problem_statement.rstrip()}\n\nThe repository is checked out in {WORKDIR} "
                           "(your work dir). Change its code so the issue above is resolved.\n").encode(),  # fmt: skip
        "environment/Dockerfile": f"FROM {base_image}\nWORKDIR {WORKDIR}\nCOPY repo/ {WORKDIR}/\n".encode(),
        "tests/test.sh": ("#!/bin/bash\n" + _copy_script("/tests", test_deleted)
                          + "python3 /tests/swe_eval.py /tests/config.json\n").encode(),  # fmt: skip
        "tests/swe_eval.py": _EVAL_PY.encode(),
        "tests/config.json": json.dumps({"FAIL_TO_PASS": inst.fail_to_pass, "PASS_TO_PASS": inst.pass_to_pass}).encode(),
        "solution/solve.sh": ("#!/bin/bash\nset -e\n" + _copy_script("/solution", sol_deleted)).encode(),
    }
    files.update({f"tests/files/{k}": v for k, v in test_files.items()})
    files.update({f"solution/files/{k}": v for k, v in sol_files.items()})
    for rel, data in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return root


def import_swe(jsonl: Path | str, repo_dir: Path | str, out: Path | str, *, base_image: str | None = None) -> list[Path]:
    """Import every instance of a JSONL file; returns the task dirs written."""
    return [import_instance(i, find_checkout(Path(repo_dir), i.repo), Path(out), base_image=base_image)
            for i in read_instances(jsonl)]  # fmt: skip
