"""Real docker builds of EnvHub specs: build, cache hit, warm sandbox start, Dockerfile bases,
failures. Skipped (with the reason) when the docker SDK or an engine is missing."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from ale_proto.v1 import rocklet_pb2, rocklet_pb2_grpc, sandbox_pb2
from ale_rock.backends.docker_engine import engine_problem
from ale_rock.envhub.docker_build import LABEL_HASH
from ale_rock.envhub.hub import EnvHub
from ale_rock.envhub.registry import BuildStatus, Registry
from ale_rock.envhub.service import EnvHubConfig, make_hub
from ale_rock.envhub.spec import parse_spec

REPO = Path(__file__).resolve().parents[4]


def _engine_problem() -> str:
    return engine_problem()


_PROBLEM = _engine_problem()
pytestmark = [pytest.mark.docker, pytest.mark.skipif(bool(_PROBLEM), reason=_PROBLEM or "engine ok")]


@pytest.fixture(scope="module")
def base_image() -> str:
    from ale_rock.backends.docker_runtime import default_base_image

    tag = default_base_image()
    subprocess.run(["bash", str(REPO / "scripts" / "build_base_image.sh")], check=True, timeout=900)
    assert subprocess.run(["docker", "image", "inspect", tag], capture_output=True, timeout=60).returncode == 0
    return tag


@pytest.fixture()
def hub(tmp_path: Path) -> Iterator[EnvHub]:
    h = make_hub(EnvHubConfig(db_path=tmp_path / "hub.db"))
    yield h
    for stored in h.list(0, 1000)[0]:  # delete removes the images it built
        h.delete(stored.spec.name)
    h.registry.close()


def _image_label(tag: str, label: str) -> str:
    out = subprocess.run(["docker", "image", "inspect", "-f", f"{{{{index .Config.Labels \"{label}\"}}}}", tag],
                         capture_output=True, text=True, timeout=60)
    return out.stdout.strip() if out.returncode == 0 else ""


def _run(tag: str, command: str) -> str:
    out = subprocess.run(["docker", "run", "--rm", "--network", "none", "--user", "1000:1000", tag, "sh", "-c", command],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _timed_build(hub: EnvHub, name: str, **kw: object) -> tuple[list[str], BuildStatus, bool, str, float]:
    start = time.monotonic()
    events = list(hub.build(name, backend="docker", **kw))  # type: ignore[arg-type]
    took = time.monotonic() - start
    last = events[-1]
    return [e.line for e in events], last.state, last.cached, last.artifact, took


def test_build_then_cache_hit_then_warm_sandbox(hub: EnvHub, base_image: str, tmp_path: Path) -> None:
    token = uuid.uuid4().hex[:8]
    spec = parse_spec(f"""
name: envhub-test/tools
version: "1"
base: {{docker_image: "{base_image}"}}
setup:
  - mkdir -p /opt/tools && echo ready-{token} > /opt/tools/ready
  - echo seed > data.txt
env: {{TOOLS_HOME: /opt/tools}}
resources: {{cpu_millis: 500, memory_bytes: 268435456}}
""")
    stored = hub.register(spec)
    lines, state, cached, tag, cold_s = _timed_build(hub, spec.name)
    assert state is BuildStatus.READY and not cached, lines
    assert tag == f"ale-env/envhub-test-tools:{stored.spec_hash[:12]}"
    assert any(f"+ mkdir -p /opt/tools && echo ready-{token}" in ln for ln in lines)
    assert _image_label(tag, LABEL_HASH) == stored.spec_hash
    # Files made by the setup in the work dir belong to the sandbox user, and env is baked in.
    assert _run(tag, "cat /opt/tools/ready; echo more >> data.txt && cat data.txt; pwd; echo $TOOLS_HOME") == (
        f"ready-{token}\nseed\nmore\n/workspace\n/opt/tools\n"
    )

    lines, state, cached, tag2, warm_s = _timed_build(hub, spec.name)
    assert state is BuildStatus.READY and cached and tag2 == tag and len(lines) == 1
    print(f"envhub docker build: cold {cold_s:.2f}s, cached {warm_s * 1000:.1f}ms")
    assert warm_s < cold_s

    # A sandbox of the built spec starts from the cached image: no build on the way.
    from ale_rock.backends.docker import DockerBackend, DockerBackendConfig

    cfg = hub.sandbox_config(spec.name, backend="docker")
    assert hub.resolve_image(f"{spec.name}:1") == tag and hub.resolve_image(base_image) is None
    assert cfg.image == tag and cfg.env == {"TOOLS_HOME": "/opt/tools"} and cfg.limits.cpu_millis == 500
    worker = f"eh{uuid.uuid4().hex[:6]}"
    backend = DockerBackend(DockerBackendConfig(worker=worker, base_image=base_image,
                                                root_dir=Path("/tmp/ale-eh") / worker, pool_size=0))
    try:
        start = time.monotonic()
        handle = backend.start("warm1", cfg)
        start_s = time.monotonic() - start
        with grpc.insecure_channel(f"unix:{handle.rocklet_socket}") as ch:
            stub = rocklet_pb2_grpc.RockletServiceStub(ch)
            req = rocklet_pb2.RockletServiceExecRequest(
                spec=sandbox_pb2.ExecSpec(command="cat /opt/tools/ready data.txt; id -u", timeout_ms=20_000))
            res = stub.Exec(req, timeout=60).result
        assert res.exit_code == 0 and res.stdout.decode() == f"ready-{token}\nseed\n1000\n", res
        print(f"envhub warm sandbox start: {start_s:.2f}s")
    finally:
        backend.reap_orphans(set())
        backend.close()
        shutil.rmtree(Path("/tmp/ale-eh") / worker, ignore_errors=True)
    assert hub.registry.build(stored.spec_hash, "docker").state is BuildStatus.READY  # type: ignore[union-attr]


def test_dockerfile_base_and_failures(hub: EnvHub, base_image: str) -> None:
    token = uuid.uuid4().hex[:8]
    spec = parse_spec(f"""
name: envhub-test-df
base:
  dockerfile: |
    FROM {base_image}
    USER root
    RUN echo df-{token} > /etc/df-marker
setup: ["echo setup-{token} > /etc/setup-marker"]
""")
    hub.register(spec)
    lines, state, cached, tag, _ = _timed_build(hub, spec.name)
    assert state is BuildStatus.READY and not cached, lines
    assert _run(tag, "cat /etc/df-marker /etc/setup-marker") == f"df-{token}\nsetup-{token}\n"
    assert _timed_build(hub, spec.name)[2]  # cached

    hub.register(parse_spec(f"name: envhub-test-fail\nbase: {{docker_image: '{base_image}'}}\nsetup: ['echo x-{token}', 'exit 3']"))
    lines, state, cached, tag, _ = _timed_build(hub, "envhub-test-fail")
    assert state is BuildStatus.FAILED and "setup: a setup command failed (exit code 3)" in lines[-1], lines
    assert f"x-{token}" in lines

    hub.register(parse_spec(f"name: envhub-test-noimg\nbase: {{docker_image: 'ale-missing/{token}:1'}}"))
    lines, state, *_ = _timed_build(hub, "envhub-test-noimg")
    assert state is BuildStatus.FAILED and "base.docker_image" in lines[-1], lines

    hub.register(parse_spec("name: envhub-test-rootfs\nbase: {rootfs: /srv/rootfs}"))
    lines, state, *_ = _timed_build(hub, "envhub-test-rootfs")
    assert state is BuildStatus.FAILED and "base.rootfs" in lines[-1], lines

    hub.register(parse_spec("name: envhub-test-baddf\nbase: {dockerfile: 'FROM scratch\\nRUN true'}"))
    lines, state, *_ = _timed_build(hub, "envhub-test-baddf")
    assert state is BuildStatus.FAILED and "base.dockerfile" in lines[-1], lines


def test_no_setup_is_a_tag_and_delete_removes_the_image(hub: EnvHub, base_image: str, tmp_path: Path) -> None:
    name = f"envhub-test-tag-{uuid.uuid4().hex[:6]}"
    hub.register(parse_spec(f"name: {name}\nbase: {{docker_image: '{base_image}'}}\nworkdir: /workspace"))
    _, state, cached, tag, _ = _timed_build(hub, name)
    assert state is BuildStatus.READY and not cached
    assert subprocess.run(["docker", "image", "inspect", tag], capture_output=True, timeout=60).returncode == 0
    # A fresh registry on the same engine finds the image instead of rebuilding.
    other = EnvHub(Registry(tmp_path / "other.db"), hub._factories)
    other.register(hub.get(name).spec)
    assert list(other.build(name))[-1].cached
    other.registry.close()
    hub.delete(name)
    assert subprocess.run(["docker", "image", "inspect", tag], capture_output=True, timeout=60).returncode != 0
