"""The ale.v1 contract: stubs import, are current, lint clean, and never break the last release."""

from __future__ import annotations

import filecmp
import importlib
import shutil
import subprocess
from pathlib import Path

import pytest
from ale_proto import codegen
from google.protobuf import descriptor_pool

PKG = Path(__file__).resolve().parents[1]
PROTO_ROOT = PKG / "proto"
STUBS = PKG / "src" / "ale_proto" / "v1"
BUF = PKG / "node_modules" / ".bin" / "buf"
RELEASED = sorted((PKG / "released").glob("ale.v1-*.binpb"))

MODULES = ["common", "sandbox", "worker", "rocklet", "env", "inference", "model_proxy", "agent", "trainer"]
SERVICES = {
    "sandbox": ["SandboxService"],
    "worker": ["WorkerRegistryService", "WorkerService"],
    "rocklet": ["RockletService", "EgressService"],
    "env": ["EnvService", "EnvHubService"],
    "inference": ["InferenceService"],
    "model_proxy": ["ModelProxyService"],
    "agent": ["AgentService"],
    "trainer": ["TrainerService"],
}


def stale_files(committed: Path, fresh: Path) -> list[str]:
    """Names of stub files that differ between two generated trees (missing or extra count too)."""
    names = {p.name for p in committed.iterdir() if p.is_file()} | {p.name for p in fresh.iterdir() if p.is_file()}
    out = []
    for name in sorted(names):
        a, b = committed / name, fresh / name
        if not (a.exists() and b.exists() and filecmp.cmp(a, b, shallow=False)):
            out.append(name)
    return out


@pytest.mark.parametrize("module", MODULES)
def test_every_module_imports(module: str) -> None:
    importlib.import_module(f"ale_proto.v1.{module}_pb2")
    importlib.import_module(f"ale_proto.v1.{module}_pb2_grpc")


def test_services_are_in_package_ale_v1() -> None:
    pool = descriptor_pool.Default()
    for module, services in SERVICES.items():
        importlib.import_module(f"ale_proto.v1.{module}_pb2")
        for s in services:
            assert pool.FindServiceByName(f"ale.v1.{s}").full_name == f"ale.v1.{s}"


def test_every_enum_starts_with_unspecified_zero() -> None:
    for module in MODULES:
        fd = importlib.import_module(f"ale_proto.v1.{module}_pb2").DESCRIPTOR

        def enums(container):  # top-level and nested enums
            yield from container.enum_types_by_name.values()
            for m in getattr(container, "message_types_by_name", {}).values():
                yield from m.enum_types
                for nested in m.nested_types:
                    yield from nested.enum_types

        for e in enums(fd):
            assert e.values[0].number == 0 and e.values[0].name.endswith("_UNSPECIFIED"), e.full_name


def test_committed_stubs_are_current(tmp_path: Path) -> None:
    codegen.generate(PROTO_ROOT, tmp_path)
    stale = stale_files(STUBS, tmp_path / "ale_proto" / "v1")
    assert stale == [], f"stale generated stubs {stale}: run `make proto` and commit"


def test_staleness_check_catches_an_edited_stub(tmp_path: Path) -> None:
    copy = tmp_path / "committed"
    shutil.copytree(STUBS, copy, ignore=shutil.ignore_patterns("__pycache__"))
    fresh = tmp_path / "fresh"
    codegen.generate(PROTO_ROOT, fresh)
    edited = copy / "sandbox_pb2.py"
    edited.write_text(edited.read_text() + "\n# hand edit\n")
    assert stale_files(copy, fresh / "ale_proto" / "v1") == ["sandbox_pb2.py"]


def _buf(*args: str, cwd: Path = PKG) -> subprocess.CompletedProcess[str]:
    assert BUF.exists(), "buf is missing: run `make setup` (npm install in packages/ale-proto)"
    return subprocess.run([str(BUF), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_buf_lint_is_clean() -> None:
    r = _buf("lint")
    assert r.returncode == 0, r.stdout + r.stderr


def test_no_breaking_change_against_last_release() -> None:
    assert RELEASED, "no released image under packages/ale-proto/released/"
    r = _buf("breaking", "--against", str(RELEASED[-1]))
    assert r.returncode == 0, "breaking change to ale.v1:\n" + r.stdout + r.stderr


def test_breaking_check_catches_a_removed_field(tmp_path: Path) -> None:
    work = tmp_path / "proto"
    shutil.copytree(PROTO_ROOT, work)
    shutil.copy(PKG / "buf.yaml", tmp_path / "buf.yaml")
    common = work / "ale_proto" / "v1" / "common.proto"
    text = common.read_text()
    assert "uint32 gpus = 6;" in text
    common.write_text(text.replace("uint32 gpus = 6;", "reserved 6;"))
    r = _buf("breaking", "--against", str(RELEASED[-1]), cwd=tmp_path)
    assert r.returncode != 0 and "gpus" in (r.stdout + r.stderr)


def test_contract_reference_doc_is_current(tmp_path: Path) -> None:
    from ale_proto import docgen

    image = tmp_path / "current.binpb"
    r = _buf("build", "-o", str(image))
    assert r.returncode == 0, r.stderr
    doc = PKG.parents[1] / "docs" / "contract-reference.md"
    assert doc.read_text() == docgen.render(image), "docs/contract-reference.md is stale: run `make proto`"
