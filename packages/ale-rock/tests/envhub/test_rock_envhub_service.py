"""EnvHubService over a real port: register/get/list/delete, typed errors, streamed builds with
the cache, durability across a server restart, hosting inside an asyncio server, and the CLI.

Builds here use an in-memory builder (the caching logic is the hub's, not the engine's); the real
docker builds are in test_rock_envhub_docker.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from ale_proto.errors import error_detail_of
from ale_proto.v1 import common_pb2, env_pb2, env_pb2_grpc, sandbox_pb2
from ale_rock.envhub.cli import app
from ale_rock.envhub.hub import LOCAL_UNSUPPORTED, EnvHub
from ale_rock.envhub.registry import Registry
from ale_rock.envhub.service import EnvHubConfig, EnvHubServer, add_envhub_service, serve_envhub
from ale_rock.envhub.spec import EnvSpecModel
from typer.testing import CliRunner


class MemoryBuilder:
    """Artifacts in a set; counts builds; ``exit 1`` in a setup command fails the build."""

    backend = "docker"

    def __init__(self) -> None:
        self.images: set[str] = set()
        self.builds = 0

    def artifact(self, spec: EnvSpecModel, spec_hash: str) -> str:
        return f"mem/{spec.name}:{spec_hash[:12]}"

    def exists(self, artifact: str) -> bool:
        return artifact in self.images

    def build(self, spec: EnvSpecModel, spec_hash: str, log: Callable[[str], None]) -> str:
        self.builds += 1
        for cmd in spec.setup:
            log(f"+ {cmd}")
            if cmd == "exit 1":
                raise RuntimeError("a setup command failed (exit code 1)")
        art = self.artifact(spec, spec_hash)
        self.images.add(art)
        return art

    def remove(self, artifact: str) -> None:
        self.images.discard(artifact)


SPEC = env_pb2.EnvSpec(
    name="py-tools", version="1", base=env_pb2.EnvBase(docker_image="ale-rock-base:bookworm-py311-v1"),
    setup_commands=["echo one", "echo two"], workdir="/workspace", env={"A": "b"},
    network=sandbox_pb2.NetworkPolicy(allow=[sandbox_pb2.EgressRule(host="model-proxy")]),
    resources=common_pb2.Resources(cpu_millis=500),
)


@pytest.fixture()
def builder() -> MemoryBuilder:
    return MemoryBuilder()


def _serve(db: Path, builder: MemoryBuilder) -> EnvHubServer:
    hub = EnvHub(Registry(db), {"docker": lambda: builder})
    return serve_envhub(EnvHubConfig(port=0, db_path=db), hub=hub)


@pytest.fixture()
def server(tmp_path: Path, builder: MemoryBuilder) -> Iterator[EnvHubServer]:
    srv = _serve(tmp_path / "hub.db", builder)
    yield srv
    srv.stop()


@pytest.fixture()
def stub(server: EnvHubServer) -> Iterator[env_pb2_grpc.EnvHubServiceStub]:
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as ch:
        yield env_pb2_grpc.EnvHubServiceStub(ch)


def _err(fn: Callable[[], object]) -> tuple[grpc.StatusCode, common_pb2.ErrorDetail]:
    with pytest.raises(grpc.RpcError) as ei:
        fn()
    return ei.value.code(), error_detail_of(ei.value)  # type: ignore[attr-defined]


def test_register_get_list_delete(stub: env_pb2_grpc.EnvHubServiceStub) -> None:
    resp = stub.RegisterEnvSpec(env_pb2.RegisterEnvSpecRequest(spec=SPEC), timeout=10)
    assert len(resp.spec.spec_hash) == 64 and resp.spec.env == {"A": "b"}
    again = stub.RegisterEnvSpec(env_pb2.RegisterEnvSpecRequest(spec=SPEC), timeout=10)
    assert again.spec.spec_hash == resp.spec.spec_hash  # deterministic
    v2 = env_pb2.EnvSpec()
    v2.CopyFrom(SPEC)
    v2.version = "2"
    stub.RegisterEnvSpec(env_pb2.RegisterEnvSpecRequest(spec=v2), timeout=10)
    got = stub.GetEnvSpec(env_pb2.GetEnvSpecRequest(name="py-tools"), timeout=10)
    assert got.spec.version == "2" and got.register_time.seconds > 0 and dict(got.builds) == {}
    assert stub.GetEnvSpec(env_pb2.GetEnvSpecRequest(name="py-tools", version="1"), timeout=10).spec.version == "1"
    page = stub.ListEnvSpecs(env_pb2.ListEnvSpecsRequest(page=common_pb2.PageRequest(page_size=1)), timeout=10)
    assert [s.version for s in page.specs] == ["1"] and page.page.total_size == 2 and page.page.next_page_token
    page2 = stub.ListEnvSpecs(env_pb2.ListEnvSpecsRequest(
        page=common_pb2.PageRequest(page_size=1, page_token=page.page.next_page_token)), timeout=10)
    assert [s.version for s in page2.specs] == ["2"] and not page2.page.next_page_token
    stub.DeleteEnvSpec(env_pb2.DeleteEnvSpecRequest(name="py-tools", version="1"), timeout=10)
    assert stub.ListEnvSpecs(env_pb2.ListEnvSpecsRequest(), timeout=10).page.total_size == 1
    stub.DeleteEnvSpec(env_pb2.DeleteEnvSpecRequest(name="py-tools"), timeout=10)
    assert stub.ListEnvSpecs(env_pb2.ListEnvSpecsRequest(), timeout=10).page.total_size == 0


def test_bad_input_is_typed(stub: env_pb2_grpc.EnvHubServiceStub) -> None:
    bad = env_pb2.EnvSpec()
    bad.CopyFrom(SPEC)
    bad.name = "Bad Name"
    code, d = _err(lambda: stub.RegisterEnvSpec(env_pb2.RegisterEnvSpecRequest(spec=bad), timeout=10))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and d.field == "spec.name"
    assert d.code == common_pb2.ERROR_CODE_INVALID_ARGUMENT
    nobase = env_pb2.EnvSpec(name="x")
    code, d = _err(lambda: stub.RegisterEnvSpec(env_pb2.RegisterEnvSpecRequest(spec=nobase), timeout=10))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and d.field == "spec.base"
    code, d = _err(lambda: stub.RegisterEnvSpec(env_pb2.RegisterEnvSpecRequest(), timeout=10))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and d.field == "spec"
    code, d = _err(lambda: stub.GetEnvSpec(env_pb2.GetEnvSpecRequest(name="nope"), timeout=10))
    assert code == grpc.StatusCode.NOT_FOUND and d.field == "name"
    code, d = _err(lambda: stub.GetEnvSpec(env_pb2.GetEnvSpecRequest(), timeout=10))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and d.field == "name"
    stub.RegisterEnvSpec(env_pb2.RegisterEnvSpecRequest(spec=SPEC), timeout=10)
    code, d = _err(lambda: stub.GetEnvSpec(env_pb2.GetEnvSpecRequest(name="py-tools", version="9"), timeout=10))
    assert code == grpc.StatusCode.NOT_FOUND and d.field == "version"
    code, d = _err(lambda: stub.DeleteEnvSpec(env_pb2.DeleteEnvSpecRequest(name="nope"), timeout=10))
    assert code == grpc.StatusCode.NOT_FOUND and d.field == "name"
    code, d = _err(lambda: list(stub.BuildEnvSpec(env_pb2.BuildEnvSpecRequest(name="nope"), timeout=10)))
    assert code == grpc.StatusCode.NOT_FOUND and d.field == "name"
    code, d = _err(lambda: stub.ListEnvSpecs(
        env_pb2.ListEnvSpecsRequest(page=common_pb2.PageRequest(page_token="zz")), timeout=10))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and d.field == "page.page_token"
    code, d = _err(lambda: stub.ListEnvSpecs(
        env_pb2.ListEnvSpecsRequest(page=common_pb2.PageRequest(page_size=5000)), timeout=10))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and d.field == "page.page_size"
    # the local backend has no cached builds: a clear, typed refusal
    req = env_pb2.BuildEnvSpecRequest(name="py-tools", backend=sandbox_pb2.SANDBOX_BACKEND_LOCAL)
    code, d = _err(lambda: list(stub.BuildEnvSpec(req, timeout=10)))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and d.field == "backend" and d.message == LOCAL_UNSUPPORTED


def _build(stub: env_pb2_grpc.EnvHubServiceStub, **kw: object) -> list[env_pb2.BuildEnvSpecResponse]:
    req = env_pb2.BuildEnvSpecRequest(name="py-tools", backend=sandbox_pb2.SANDBOX_BACKEND_DOCKER, **kw)  # type: ignore[arg-type]
    return list(stub.BuildEnvSpec(req, timeout=30))


def test_build_streams_log_then_caches(stub: env_pb2_grpc.EnvHubServiceStub, builder: MemoryBuilder) -> None:
    h1 = stub.RegisterEnvSpec(env_pb2.RegisterEnvSpecRequest(spec=SPEC), timeout=10).spec.spec_hash
    first = _build(stub)
    lines = [m.log_line for m in first]
    assert "+ echo one" in lines and "+ echo two" in lines
    assert first[-1].state == env_pb2.BUILD_STATE_READY and not first[-1].cached
    assert all(m.state == env_pb2.BUILD_STATE_BUILDING for m in first[:-1])
    second = _build(stub)
    assert len(second) == 1 and second[0].cached and second[0].state == env_pb2.BUILD_STATE_READY
    assert builder.builds == 1
    got = stub.GetEnvSpec(env_pb2.GetEnvSpecRequest(name="py-tools"), timeout=10)
    assert dict(got.builds) == {"docker": env_pb2.BUILD_STATE_READY}
    forced = _build(stub, force=True)
    assert not forced[-1].cached and builder.builds == 2
    builder.images.clear()  # the image vanished behind our back: rebuilt, not a stale cache hit
    assert not _build(stub)[-1].cached and builder.builds == 3
    # a changed spec is a new hash and a new build; deleting drops the image
    changed = env_pb2.EnvSpec()
    changed.CopyFrom(SPEC)
    changed.setup_commands.append("echo three")
    stub.RegisterEnvSpec(env_pb2.RegisterEnvSpecRequest(spec=changed), timeout=10)
    assert not _build(stub)[-1].cached and builder.builds == 4
    assert len(builder.images) == 2
    stub.DeleteEnvSpec(env_pb2.DeleteEnvSpecRequest(name="py-tools"), timeout=10)
    # Deleting drops the deleted spec's build (its hash is used by no other spec). The first
    # content's build stays cached: replacing a spec keeps old builds, so switching back is warm.
    assert builder.images == {f"mem/py-tools:{h1[:12]}"}


def test_failed_build_is_reported(stub: env_pb2_grpc.EnvHubServiceStub) -> None:
    failing = env_pb2.EnvSpec()
    failing.CopyFrom(SPEC)
    failing.setup_commands[:] = ["exit 1"]
    stub.RegisterEnvSpec(env_pb2.RegisterEnvSpecRequest(spec=failing), timeout=10)
    out = _build(stub)
    assert out[-1].state == env_pb2.BUILD_STATE_FAILED and "exit code 1" in out[-1].log_line
    got = stub.GetEnvSpec(env_pb2.GetEnvSpecRequest(name="py-tools"), timeout=10)
    assert dict(got.builds) == {"docker": env_pb2.BUILD_STATE_FAILED}


def test_state_survives_server_restart(tmp_path: Path, builder: MemoryBuilder) -> None:
    db = tmp_path / "hub.db"
    srv = _serve(db, builder)
    with grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
        stub = env_pb2_grpc.EnvHubServiceStub(ch)
        h = stub.RegisterEnvSpec(env_pb2.RegisterEnvSpecRequest(spec=SPEC), timeout=10).spec.spec_hash
        assert not _build(stub)[-1].cached
    srv.stop()
    srv = _serve(db, builder)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
            stub = env_pb2_grpc.EnvHubServiceStub(ch)
            assert stub.GetEnvSpec(env_pb2.GetEnvSpecRequest(name="py-tools"), timeout=10).spec.spec_hash == h
            assert _build(stub)[-1].cached and builder.builds == 1
    finally:
        srv.stop()


def test_hosted_in_an_asyncio_server(tmp_path: Path, builder: MemoryBuilder) -> None:
    """The Admin is a grpc.aio server: the sync servicer must work there too (builds streamed)."""

    async def main() -> list[str]:
        server = grpc.aio.server()
        hub = add_envhub_service(server, hub=EnvHub(Registry(tmp_path / "a.db"), {"docker": lambda: builder}))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
                stub = env_pb2_grpc.EnvHubServiceStub(ch)
                await stub.RegisterEnvSpec(env_pb2.RegisterEnvSpecRequest(spec=SPEC), timeout=10)
                req = env_pb2.BuildEnvSpecRequest(name="py-tools")
                lines = [m.log_line async for m in stub.BuildEnvSpec(req, timeout=30)]
                with pytest.raises(grpc.aio.AioRpcError) as ei:
                    await stub.GetEnvSpec(env_pb2.GetEnvSpecRequest(name="nope"), timeout=10)
                assert ei.value.code() == grpc.StatusCode.NOT_FOUND
                return lines
        finally:
            await server.stop(1)
            hub.registry.close()

    lines = asyncio.run(main())
    assert "+ echo one" in lines and lines[-1].startswith("ready: mem/py-tools:")


def test_authorize_hook(tmp_path: Path, builder: MemoryBuilder) -> None:
    from ale_rock.admin.auth import Authenticator

    auth = Authenticator({"k1": "team"}, "join")
    import concurrent.futures

    server = grpc.server(concurrent.futures.ThreadPoolExecutor(2))
    hub = add_envhub_service(server, hub=EnvHub(Registry(tmp_path / "a.db"), {"docker": lambda: builder}),
                             authorize=auth.namespace_of)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            stub = env_pb2_grpc.EnvHubServiceStub(ch)
            code, d = _err(lambda: stub.ListEnvSpecs(env_pb2.ListEnvSpecsRequest(), timeout=10))
            assert code == grpc.StatusCode.UNAUTHENTICATED and d.code == common_pb2.ERROR_CODE_UNAUTHENTICATED
            ok = stub.ListEnvSpecs(env_pb2.ListEnvSpecsRequest(), timeout=10, metadata=(("authorization", "Bearer k1"),))
            assert ok.page.total_size == 0
    finally:
        server.stop(1).wait(3)
        hub.registry.close()


def test_cli_register_ls_show_build_rm(server: EnvHubServer, tmp_path: Path) -> None:
    spec = tmp_path / "env.yaml"
    spec.write_text("name: cli-env\nversion: 3\nbase: {docker_image: 'img:1'}\nsetup: ['echo hi']\n"
                    "description: from the cli\n")
    cli = CliRunner()
    addr = ["--address", f"127.0.0.1:{server.port}"]
    r = cli.invoke(app, ["register", str(spec), *addr])
    assert r.exit_code == 0 and r.output.startswith("registered cli-env:3 "), r.output
    r = cli.invoke(app, ["ls", *addr])
    assert r.exit_code == 0 and "cli-env\t3\t" in r.output and "from the cli" in r.output
    r = cli.invoke(app, ["build", "cli-env", *addr])
    assert r.exit_code == 0 and "+ echo hi" in r.output and r.output.rstrip().endswith("state: READY")
    r = cli.invoke(app, ["build", "cli-env", *addr])
    assert r.exit_code == 0 and r.output.rstrip().endswith("state: READY (cached)")
    r = cli.invoke(app, ["show", "cli-env", *addr])
    assert r.exit_code == 0 and "name: cli-env" in r.output and "# build[docker]: READY" in r.output
    r = cli.invoke(app, ["build", "cli-env", "--backend", "local", *addr])
    assert r.exit_code == 1 and "local builds need local-backend support" in r.output
    r = cli.invoke(app, ["rm", "cli-env", *addr])
    assert r.exit_code == 0
    r = cli.invoke(app, ["show", "cli-env", *addr])
    assert r.exit_code == 1 and "not found" in r.output
    spec.write_text("name: cli-env\nbase: {docker_image: 'img:1'}\nfoo: 1\n")
    r = cli.invoke(app, ["register", str(spec), *addr])
    assert r.exit_code == 1 and "field 'foo'" in r.output


def test_sandbox_config_needs_a_build(tmp_path: Path, builder: MemoryBuilder) -> None:
    from ale_rock.envhub.hub import HubError
    from ale_rock.envhub.spec import parse_spec

    hub = EnvHub(Registry(tmp_path / "h.db"), {"docker": lambda: builder})
    hub.register(parse_spec("name: sc\nversion: 2\nbase: {docker_image: img}\nresources: {memory_bytes: 1048576}\n"
                            "network: {allow: [{host: model-proxy, port: 80}]}\nenv: {K: v}\nworkdir: /w"))
    assert hub.resolve_image("not-a-spec:1") is None
    with pytest.raises(HubError) as ei:
        hub.resolve_image("sc:2")
    assert ei.value.code == "FAILED_PRECONDITION" and "envhub build sc" in ei.value.message
    assert list(hub.build("sc"))[-1].state.value == "ready"
    cfg = hub.sandbox_config("sc")
    assert cfg.image == hub.resolve_image("sc") == hub.resolve_image("sc:2")
    assert cfg.limits.memory_bytes == 1048576 and cfg.limits.cpu_millis == 1000  # 0 -> backend default
    assert [(r.host, r.port) for r in cfg.allow] == [("model-proxy", 80)] and cfg.env == {"K": "v"} and cfg.workdir == "/w"
    hub.registry.close()


def test_concurrent_builds_of_one_hash_build_once(tmp_path: Path) -> None:
    import threading

    from ale_rock.envhub.spec import parse_spec

    gate = threading.Event()

    class SlowBuilder(MemoryBuilder):
        def build(self, spec: EnvSpecModel, spec_hash: str, log: Callable[[str], None]) -> str:
            assert gate.wait(10)
            return super().build(spec, spec_hash, log)

    builder = SlowBuilder()
    hub = EnvHub(Registry(tmp_path / "h.db"), {"docker": lambda: builder})
    hub.register(parse_spec("name: c\nbase: {docker_image: img}\nsetup: ['echo hi']"))
    results: list[bool] = []

    def run() -> None:
        results.append(list(hub.build("c"))[-1].cached)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(timeout=20)
    assert sorted(results) == [False, True, True] and builder.builds == 1
    hub.registry.close()
