"""The SDK end to end: client → Admin → Worker → Rocklet in a bubblewrap sandbox (all real)."""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path

import grpc
import pytest
from ale_rock import (
    AsyncSandbox,
    AsyncSandboxGroup,
    FailedPrecondition,
    InvalidArgument,
    Sandbox,
    SandboxGroup,
)
from ale_rock.local_cluster import LocalCluster


def test_exec_session_and_small_files(cluster: LocalCluster) -> None:
    with Sandbox.create(client=cluster.client(), cpu=0.5, memory="256Mi", env={"GREETING": "hi"}) as sb:
        r = sb.exec("echo $GREETING from $(pwd)")
        assert r.ok and r.stdout == "hi from /workspace\n"
        assert sb.exec(["sh", "-c", "exit 7"]).exit_code == 7
        assert sb.exec("cat", stdin="piped").stdout == "piped"
        assert sb.exec("pwd", cwd="/tmp").stdout == "/tmp\n"
        timed = sb.exec("echo partial; sleep 30", timeout=0.5)
        assert timed.end_reason == "timeout" and timed.stdout == "partial\n"
        events = list(sb.exec_stream("for i in 1 2 3; do echo $i; sleep 0.05; done"))
        assert events[0].kind == "started" and events[-1].kind == "exit"
        assert b"".join(e.data for e in events if e.kind == "stdout") == b"1\n2\n3\n"
        with sb.session() as s:
            s.run("cd /tmp && export COUNT=41")
            assert s.run("echo $((COUNT + 1)) $(pwd)").stdout.strip() == "42 /tmp"
        sb.write("/workspace/deep/dir/f.txt", "content")
        assert sb.read("/workspace/deep/dir/f.txt") == b"content"
        assert sb.write("/workspace/deep/dir/f.txt", "+more", append=True) == len("content+more")
        assert [e.path for e in sb.ls("/workspace/deep", recursive=True)] == [
            "/workspace/deep/dir", "/workspace/deep/dir/f.txt"]
        with pytest.raises(InvalidArgument) as e:
            sb.read("relative/path")
        assert e.value.field == "path"
        assert sb.stats().pids >= 1
        assert sb.network_policy() == []
        sb.set_network_policy(["example.com:443", "pypi.org"])
        assert sb.network_policy() == [("example.com", 443), ("pypi.org", 0)]
        snapshot = sb.commit("snap-e2e")
        assert snapshot


def test_large_file_and_directory_round_trip(cluster: LocalCluster, tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    with big.open("wb") as f:  # 24 MiB of random data (many 1 MiB chunks each way)
        for _ in range(24):
            f.write(os.urandom(2**20))
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "a.txt").write_text("alpha")
    (tree / "sub" / "b.bin").write_bytes(os.urandom(5000))
    with Sandbox.create(client=cluster.client(), disk="1Gi") as sb:
        assert sb.upload(big, "/workspace/in/big.bin") == big.stat().st_size
        assert sb.exec("sha256sum /workspace/in/big.bin").stdout.split()[0] == hashlib.sha256(big.read_bytes()).hexdigest()
        back = sb.download("/workspace/in/big.bin", tmp_path / "back.bin")
        assert back.read_bytes() == big.read_bytes()
        sb.upload(tree, "/workspace/tree")
        assert sb.exec("cat /workspace/tree/a.txt").stdout == "alpha"
        out = sb.download("/workspace/tree", tmp_path / "tree-back")
        assert (out / "a.txt").read_text() == "alpha"
        assert (out / "sub" / "b.bin").read_bytes() == (tree / "sub" / "b.bin").read_bytes()


def test_stop_then_delete_and_commands_refused(cluster: LocalCluster) -> None:
    sb = Sandbox.create(client=cluster.client())
    sb.exec("sleep 1000 &", timeout=5)
    assert sb.stop(grace=0.5).state == "stopped"
    with pytest.raises(FailedPrecondition):
        sb.exec("true")
    sb.delete()
    assert sb.refresh().state == "deleted"


def test_group_creates_many_with_bounded_concurrency(cluster: LocalCluster) -> None:
    with SandboxGroup.create(4, concurrency=2, client=cluster.client(), cpu=0.1, memory="64Mi") as group:
        assert len({sb.id for sb in group}) == 4
        assert all(sb.exec("echo ok").stdout == "ok\n" for sb in group)
    assert Sandbox.list(client=cluster.client()) == []


def test_async_sdk(cluster: LocalCluster) -> None:
    async def main() -> None:
        client = cluster.async_client()
        async with await AsyncSandbox.create(client=client, cpu=0.2) as sb:
            results = await asyncio.gather(*(sb.exec(f"echo {i}") for i in range(5)))
            assert [r.stdout.strip() for r in results] == [str(i) for i in range(5)]
            kinds = [ev.kind async for ev in sb.exec_stream("echo x")]
            assert kinds[0] == "started" and kinds[-1] == "exit"
            session = await sb.session()
            await session.run("export A=1")
            assert (await session.run("echo $A")).stdout.strip() == "1"
            await session.close()
        group = await AsyncSandboxGroup.create(3, concurrency=3, client=client, cpu=0.1, memory="64Mi")
        assert len(group) == 3
        await group.delete_all()
        assert await AsyncSandbox.list(client=client) == []
        await client.close()

    asyncio.run(main())


def test_blocking_sdk_on_the_blocking_stack_alongside_the_asyncio_one(cluster: LocalCluster) -> None:
    """The blocking SDK talks gRPC's blocking stack (an interceptor on its channel sees each call,
    one RPC per operation); the asyncio SDK sees and changes the same sandbox."""
    from ale_proto.v1 import sandbox_pb2_grpc
    from ale_rock.sdk.errors import SandboxNotFound

    calls: list[str] = []

    class Count(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
        def intercept_unary_unary(self, continuation, details, request):  # type: ignore[no-untyped-def]
            calls.append(details.method.rsplit("/", 1)[-1])
            return continuation(details, request)

        def intercept_unary_stream(self, continuation, details, request):  # type: ignore[no-untyped-def]
            calls.append(details.method.rsplit("/", 1)[-1])
            return continuation(details, request)

    client = cluster.client()
    client.stub = sandbox_pb2_grpc.SandboxServiceStub(grpc.intercept_channel(client._channel, Count()))
    with Sandbox.create(client=client, cpu=0.2, memory="64Mi") as sb:
        assert sb.write("/workspace/a.txt", "from sync") == 9
        events = sb.exec_stream("echo 1; sleep 30")
        assert next(events).kind == "started"
        events.close()  # leaving a stream early cancels it; the next call is unaffected
        assert sb.exec("cat /workspace/a.txt").stdout == "from sync"
        assert calls == ["CreateSandbox", "WriteFile", "ExecStream", "Exec"]

        async def from_asyncio() -> str:
            aclient = cluster.async_client()
            try:
                asb = await AsyncSandbox.connect(sb.id, client=aclient)
                await asb.write("/workspace/a.txt", "from async")
                return (await asb.refresh()).state
            finally:
                await aclient.close()

        assert asyncio.run(from_asyncio()) == "running" == sb.state
        assert sb.read("/workspace/a.txt") == b"from async"
        assert [i.id for i in Sandbox.list(client=client)] == [sb.id]
    assert Sandbox.connect(sb.id, client=client).info.state == "deleted"
    with pytest.raises(SandboxNotFound):  # its own client, closed again on the error
        Sandbox.connect("sb-0123456789ab", address=cluster.address, api_key=cluster.api_key("default"))
