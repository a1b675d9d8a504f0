"""EnvService.Batch over real gRPC: same results as the single calls, per-call typed errors, the
asyncio micro-batcher with hundreds of concurrent episodes, timeouts, and the Admin's auth."""

from __future__ import annotations

import asyncio
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from ale_proto.errors import error_detail_of
from ale_proto.v1 import common_pb2, env_pb2, env_pb2_grpc
from ale_rock.envs import (
    EnvDeadlineExceeded,
    EnvError,
    EnvNotFound,
    EpisodeNotActive,
    InvalidAction,
    make,
)
from ale_rock.envs.batch_client import BatchedRemoteEnv, BatchEnvClient
from ale_rock.envs.server import EnvServerConfig, serve_env_service

GAMES = ("game:GuessTheNumber-v0", "game:FrozenLake-v0", "game:Sokoban-v0")
ACTIONS = ["10", "5", "\\boxed{15}", "up", "nonsense", "12", "13", "right", "down"]


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    srv = serve_env_service(EnvServerConfig(max_action_bytes=4096, max_batch_calls=600))
    yield srv
    srv.stop(0)


@pytest.fixture(scope="module")
def stub(server: Any) -> Iterator[Any]:
    with grpc.insecure_channel(server.address) as ch:
        yield env_pb2_grpc.EnvServiceStub(ch)


def batch(stub: Any, *calls: env_pb2.EnvCall) -> list[env_pb2.EnvCallResult]:
    return list(stub.Batch(env_pb2.EnvServiceBatchRequest(calls=list(calls)), timeout=30).results)


def test_batch_results_equal_single_call_results(stub: Any) -> None:
    for env_id in GAMES:
        for seed in (0, 1, 2):
            single = stub.Make(env_pb2.MakeRequest(env_id=env_id), timeout=10)
            made = batch(stub, env_pb2.EnvCall(make=env_pb2.MakeRequest(env_id=env_id)))[0]
            assert made.WhichOneof("result") == "make"
            assert made.make.action_description == single.action_description
            assert made.make.env_handle != single.env_handle
            h1, h2 = single.env_handle, made.make.env_handle
            r1 = stub.Reset(env_pb2.ResetRequest(env_handle=h1, seed=seed), timeout=10)
            # Reset, then every action, in one batch: executed in order.
            calls = [env_pb2.EnvCall(reset=env_pb2.ResetRequest(env_handle=h2, seed=seed))]
            calls += [env_pb2.EnvCall(step=env_pb2.StepRequest(env_handle=h2, action=a)) for a in ACTIONS]
            results = batch(stub, *calls)
            assert results[0].reset == r1
            ended = False
            for a, res in zip(ACTIONS, results[1:]):
                if ended:  # the single env's episode ended too: the same typed error per call
                    assert res.WhichOneof("result") == "error"
                    assert res.error.code == common_pb2.ERROR_CODE_FAILED_PRECONDITION
                    with pytest.raises(grpc.RpcError) as ei:
                        stub.Step(env_pb2.StepRequest(env_handle=h1, action=a), timeout=10)
                    assert error_detail_of(ei.value) == res.error
                    continue
                assert res.step == stub.Step(env_pb2.StepRequest(env_handle=h1, action=a), timeout=10)
                ended = res.step.terminated or res.step.truncated
            closed = batch(stub, env_pb2.EnvCall(close=env_pb2.CloseRequest(env_handle=h2)),
                           env_pb2.EnvCall(close=env_pb2.CloseRequest(env_handle=h2)))
            assert [r.WhichOneof("result") for r in closed] == ["close", "close"]  # closing twice is fine
            stub.Close(env_pb2.CloseRequest(env_handle=h1), timeout=10)


def test_one_failing_call_never_fails_the_others(stub: Any) -> None:
    handle = stub.Make(env_pb2.MakeRequest(env_id="game:GuessTheNumber-v0"), timeout=10).env_handle
    results = batch(
        stub,
        env_pb2.EnvCall(make=env_pb2.MakeRequest(env_id="game:Nope-v0")),
        env_pb2.EnvCall(step=env_pb2.StepRequest(env_handle=handle, action="3")),  # before reset
        env_pb2.EnvCall(reset=env_pb2.ResetRequest(env_handle=handle, seed=4)),
        env_pb2.EnvCall(step=env_pb2.StepRequest(env_handle=handle, action="x" * 5000)),
        env_pb2.EnvCall(step=env_pb2.StepRequest(env_handle="no-such-handle", action="3")),
        env_pb2.EnvCall(),
        env_pb2.EnvCall(make=env_pb2.MakeRequest(env_id="game:GuessTheNumber-v0", kwargs={"max_number": 0})),
        env_pb2.EnvCall(step=env_pb2.StepRequest(env_handle=handle, action="\\boxed{7}")),
    )
    kinds = [r.WhichOneof("result") for r in results]
    assert kinds == ["error", "error", "reset", "error", "error", "error", "error", "step"]
    want = [
        (common_pb2.ERROR_CODE_NOT_FOUND, "env_id"),
        (common_pb2.ERROR_CODE_FAILED_PRECONDITION, ""),
        None,
        (common_pb2.ERROR_CODE_INVALID_ARGUMENT, "action"),
        (common_pb2.ERROR_CODE_NOT_FOUND, "env_handle"),
        (common_pb2.ERROR_CODE_INVALID_ARGUMENT, "call"),
    ]
    for res, w in zip(results, want):
        if w is not None:
            assert (res.error.code, res.error.field) == w, res.error
            assert res.error.message
    # A constructor that raises is an error of that call only (the single Make fails the same way).
    with pytest.raises(grpc.RpcError) as ei:
        stub.Make(env_pb2.MakeRequest(env_id="game:GuessTheNumber-v0", kwargs={"max_number": 0}), timeout=10)
    assert error_detail_of(ei.value).code == results[6].error.code
    # Too many calls fail the whole RPC, naming the field.
    with pytest.raises(grpc.RpcError) as ei:
        batch(stub, *[env_pb2.EnvCall(close=env_pb2.CloseRequest(env_handle=handle))] * 601)
    d = error_detail_of(ei.value)
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT and d.field == "calls"
    stub.Close(env_pb2.CloseRequest(env_handle=handle), timeout=10)


def test_client_raises_the_same_typed_errors_as_remote_env(server: Any) -> None:
    async def go() -> None:
        client = BatchEnvClient(server.address, rpc_timeout_s=10)
        try:
            with pytest.raises(EnvNotFound) as ei:
                await client.env("game:Nope-v0").areset(0)
            assert ei.value.field == "env_id"
            env = client.env("game:GuessTheNumber-v0")
            await env.areset(seed=5)
            with pytest.raises(InvalidAction) as ei2:
                await env.astep("x" * 5000)
            assert ei2.value.field == "action"
            lo, hi = 1, 20
            while True:
                guess = (lo + hi) // 2
                obs, _, term, trunc, _ = await env.astep(str(guess))
                if term or trunc:
                    break
                lo, hi = (guess + 1, hi) if "higher" in obs else (lo, guess - 1)
            with pytest.raises(EpisodeNotActive):
                await env.astep("3")
            await env.aclose()
            await env.aclose()  # idempotent
            with pytest.raises(EnvNotFound) as ei3:
                await client.step(env.handle, "3")
            assert ei3.value.field == "env_handle"
        finally:
            await client.aclose()

    asyncio.run(go())


def _bisect_action(obs: str, bounds: list[int]) -> str:
    if re.search(r"\bhigher\b", obs):
        bounds[0] = int(re.findall(r"\d+", obs)[0]) + 1
    elif re.search(r"\blower\b", obs):
        bounds[1] = int(re.findall(r"\d+", obs)[0]) - 1
    return f"\\boxed{{{(bounds[0] + bounds[1]) // 2}}}"


def _play_local(seed: int) -> list[Any]:
    env, bounds = make("game:GuessTheNumber-v0"), [1, 20]
    obs, info = env.reset(seed=seed)
    out: list[Any] = [(obs, info)]
    while True:
        r = env.step(_bisect_action(obs, bounds))
        out.append(r)
        obs = r[0]
        if r[2] or r[3]:
            return out


@pytest.mark.parametrize("transport", ["thread", "aio"])
def test_hundreds_of_concurrent_episodes_through_the_batcher(server: Any, transport: str) -> None:
    n = 300

    async def play(client: BatchEnvClient, seed: int) -> list[Any]:
        env, bounds = client.env("game:GuessTheNumber-v0"), [1, 20]
        obs, info = await env.areset(seed=seed)
        out: list[Any] = [(obs, info)]
        try:
            while True:
                r = await env.astep(_bisect_action(obs, bounds))
                out.append(r)
                obs = r[0]
                if r[2] or r[3]:
                    return out
        finally:
            await env.aclose()

    async def go() -> tuple[list[list[Any]], int]:
        client = BatchEnvClient(server.address, transport=transport, window_ms=2, max_batch=128)
        try:
            return list(await asyncio.gather(*(play(client, s) for s in range(n)))), client.batches
        finally:
            await client.aclose()

    before = len(server.host)
    trajectories, batches = asyncio.run(go())
    calls = sum(len(t) + 2 for t in trajectories)  # make + reset + steps + close
    assert trajectories == [_play_local(s) for s in range(n)]
    assert batches <= calls / 10  # calls really were batched
    assert len(server.host) == before  # every env was closed


def test_sync_api_of_the_batched_env_matches_remote_env(server: Any) -> None:
    client = BatchEnvClient(server.address)
    try:
        env = client.env("game:FrozenLake-v0")
        remote = make("game:FrozenLake-v0", address=server.address)
        assert env.reset(seed=3) == remote.reset(seed=3)
        for a in ACTIONS:
            r = remote.step(a)
            assert env.step(a) == r
            if r[2] or r[3]:
                break
        env.close()
        remote.close()
        with pytest.raises(EnvNotFound):
            env.step("up")
    finally:
        client.close_channels()


def test_timeouts_per_call_and_per_rpc(server: Any) -> None:
    async def go() -> None:
        client = BatchEnvClient(server.address, rpc_timeout_s=10)
        slow = client.env("test:Sleepy-v0", step_timeout_s=0.2, delay=2.0)
        fast = client.env("game:GuessTheNumber-v0")
        await asyncio.gather(slow.areset(0), fast.areset(0))
        # The server's step timeout fails the slow env's call only.
        results = await asyncio.gather(slow.astep("a"), fast.astep("3"), return_exceptions=True)
        assert isinstance(results[0], EnvDeadlineExceeded)
        assert isinstance(results[1], tuple) and results[1][0]
        await fast.aclose()
        await client.aclose()

        # The RPC's own deadline: every call of the batch fails with DEADLINE_EXCEEDED, promptly.
        impatient = BatchEnvClient(server.address, rpc_timeout_s=0.3)
        sleepy = impatient.env("test:Sleepy-v0", delay=3.0)
        await sleepy.areset(0)
        t0 = time.monotonic()
        with pytest.raises(EnvDeadlineExceeded):
            await sleepy.astep("a")
        assert time.monotonic() - t0 < 2.5  # long before the step itself ends
        await sleepy.aclose()
        await impatient.aclose()

    asyncio.run(go())


def test_unreachable_server_is_a_typed_error() -> None:
    async def go() -> None:
        client = BatchEnvClient("127.0.0.1:1", rpc_timeout_s=2)
        try:
            with pytest.raises(EnvError) as ei:
                await client.env("game:GuessTheNumber-v0").areset(0)
            assert ei.value.code in (common_pb2.ERROR_CODE_UNAVAILABLE, common_pb2.ERROR_CODE_DEADLINE_EXCEEDED)
        finally:
            await client.aclose()

    asyncio.run(go())


def test_a_batched_env_is_a_gem_env(server: Any) -> None:
    client = BatchEnvClient(server.address)
    env = client.env("game:GuessTheNumber-v0")
    assert isinstance(env, BatchedRemoteEnv) and env.unwrapped is env
    assert env.handle == ""  # made on first use
    env.reset(seed=1)
    assert env.handle and "integer" in env.action_description
    env.close()
    client.close_channels()


# -- the Admin-hosted EnvService: Batch is authenticated and handles stay per namespace ----------
KEY_A, KEY_B = "key-batch-a", "key-batch-b"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from ale_rock.local_cluster import LocalCluster

    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (apt bubblewrap) is not installed")
    workdir: Path = tmp_path_factory.mktemp("rock-env-batch")
    with LocalCluster(workers=1, workdir=workdir, namespaces={"a": KEY_A, "b": KEY_B}) as c:
        yield c


def test_admin_batch_is_authenticated_and_namespaced(cluster: Any) -> None:
    with grpc.insecure_channel(cluster.address) as ch:
        stub = env_pb2_grpc.EnvServiceStub(ch)
        make_call = env_pb2.EnvCall(make=env_pb2.MakeRequest(env_id="game:GuessTheNumber-v0"))
        req = env_pb2.EnvServiceBatchRequest(calls=[make_call])
        with pytest.raises(grpc.RpcError) as ei:
            stub.Batch(req, timeout=10)
        assert ei.value.code() == grpc.StatusCode.UNAUTHENTICATED
        handle = stub.Batch(req, timeout=10, metadata=(("authorization", f"Bearer {KEY_A}"),)).results[0].make.env_handle
        assert handle
        foreign = env_pb2.EnvServiceBatchRequest(calls=[
            env_pb2.EnvCall(reset=env_pb2.ResetRequest(env_handle=handle, seed=1)), make_call,
            env_pb2.EnvCall(close=env_pb2.CloseRequest(env_handle=handle))])
        res = stub.Batch(foreign, timeout=10, metadata=(("authorization", f"Bearer {KEY_B}"),)).results
        assert [r.WhichOneof("result") for r in res] == ["error", "make", "error"]
        assert res[0].error.code == common_pb2.ERROR_CODE_NOT_FOUND and res[0].error.field == "env_handle"

    async def go() -> None:  # the owner's batched client plays on
        client = BatchEnvClient(cluster.address, api_key=KEY_A)
        try:
            obs, _ = await client.reset(handle, 1)
            assert obs
            await client.close(handle)
        finally:
            await client.aclose()

    asyncio.run(go())
