"""A worker process with ``serve_envs``: games played through ``ale_rock.envs.make(address=...)`` and
the batch client on the worker's port, its API key, its health, and SIGKILL → a typed error."""

from __future__ import annotations

import asyncio
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from ale_proto.v1 import worker_pb2, worker_pb2_grpc
from ale_rock import envs
from ale_rock.envs.batch_client import BatchEnvClient
from ale_rock.envs.errors import EnvError, EnvNotFound, EnvUnavailable
from ale_rock.envs.games.digit_lock import expert_guess
from ale_rock.worker.auth import worker_channel
from grpc_health.v1 import health_pb2, health_pb2_grpc

KEY = "env-key-for-tests"
GUESS, LOCK = "game:GuessTheNumber-v0", "game:DigitLock-v0"
SECRETS: dict[str, Path] = {}
"""worker address -> its credential file"""


def start_worker(state: Path, *settings: str) -> tuple[subprocess.Popen[str], str]:
    """``ale-rock worker --set serve_envs=true ...`` as a real process; returns it and its address."""
    argv = [sys.executable, "-m", "ale_rock.cli", "worker"]
    for s in ("serve_envs=true", f"state_dir={state}", "pool_size=0", "address=127.0.0.1:0",
              "worker_id=w-envs", "cgroup=none", *settings):
        argv += ["--set", s]
    log = (state.parent / f"{state.name}.log").open("w")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            line = proc.stdout.readline()
            match = re.search(r"listening on (\S+)", line)
            if match:
                return proc, match.group(1)
        assert proc.poll() is None, f"worker exited {proc.returncode}; see {log.name}"
    proc.kill()
    raise AssertionError("worker did not start in time")


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    state = tmp_path_factory.mktemp("envs") / "state"
    proc, address = start_worker(state, f"env_api_key={KEY}", f"secret_file={state}.secret")
    SECRETS[address] = Path(f"{state}.secret")
    yield address
    stop(proc)
    assert proc.returncode == 0


# -- players: a per-game expert that reads only observations ----------------------------------------
def play_guess(env: Any, seed: int) -> float:
    obs, _ = env.reset(seed=seed)
    lo, hi = 1, 20
    for _ in range(5):
        guess = (lo + hi) // 2
        obs, reward, terminated, truncated, _ = env.step(f"\\boxed{{{guess}}}")
        if terminated or truncated:
            return float(reward)
        lo, hi = (guess + 1, hi) if "higher" in obs else (lo, guess - 1)
    return 0.0


def lock_guess(history: list[tuple[list[int], list[str]]]) -> tuple[list[int], str]:
    guess = expert_guess(history)
    return guess, " ".join(map(str, guess))


def play_lock(env: Any, seed: int) -> float:
    env.reset(seed=seed)
    history: list[tuple[list[int], list[str]]] = []
    for _ in range(5):
        guess, action = lock_guess(history)
        obs, reward, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            return float(reward)
        history.append((guess, obs.split()))
    return 0.0


def test_health_reports_the_env_service_next_to_the_worker_services(worker: str) -> None:
    with grpc.insecure_channel(worker) as ch:
        health = health_pb2_grpc.HealthStub(ch)
        for service in ("ale.v1.EnvService", "ale.v1.WorkerService", "ale.v1.RockletService"):
            status = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status
            assert status == health_pb2.HealthCheckResponse.SERVING, service


def test_env_calls_need_the_key_and_worker_calls_the_worker_credential(worker: str) -> None:
    for key in ("", "wrong-key"):
        with pytest.raises(EnvError, match="API key"):
            envs.make(GUESS, address=worker, api_key=key, rpc_timeout_s=10)
    request = worker_pb2.ListWorkerSandboxesRequest()
    with grpc.insecure_channel(worker) as ch:  # the env key is no worker credential
        with pytest.raises(grpc.RpcError) as e:
            worker_pb2_grpc.WorkerServiceStub(ch).ListWorkerSandboxes(
                request, metadata=[("authorization", f"Bearer {KEY}")], timeout=10)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with worker_channel(worker, SECRETS[worker].read_text()) as ch:
        listed = worker_pb2_grpc.WorkerServiceStub(ch).ListWorkerSandboxes(request, timeout=10)
        assert list(listed.sandboxes) == []


@pytest.mark.parametrize(("env_id", "play"), [(GUESS, play_guess), (LOCK, play_lock)])
def test_games_played_on_the_worker_match_in_process_play(worker: str, env_id: str, play: Any) -> None:
    seeds = [3, 17, 1_000_000, 1_000_041]
    remote = envs.make(env_id, address=worker, api_key=KEY, rpc_timeout_s=30)
    try:
        rewards = [play(remote, s) for s in seeds]
        first_obs = remote.reset(seed=seeds[0])[0]
    finally:
        remote.close()
    local = envs.make(env_id)
    assert rewards == [play(local, s) for s in seeds] == [1.0] * len(seeds)
    assert first_obs == local.reset(seed=seeds[0])[0]


def test_batch_client_plays_many_episodes_over_the_workers_batch_rpc(worker: str) -> None:
    async def episode(client: BatchEnvClient, env_id: str, seed: int) -> float:
        env = client.env(env_id)
        try:
            obs, _ = await env.areset(seed=seed)
            lo, hi, history = 1, 20, []
            for _ in range(5):
                if env_id == GUESS:
                    g = (lo + hi) // 2
                    obs, reward, done, cut, _ = await env.astep(f"\\boxed{{{g}}}")
                    lo, hi = (g + 1, hi) if "higher" in obs else (lo, g - 1)
                else:
                    guess, action = lock_guess(history)
                    obs, reward, done, cut, _ = await env.astep(action)
                    history.append((guess, obs.split()))
                if done or cut:
                    return float(reward)
            return 0.0
        finally:
            await env.aclose()

    async def main() -> tuple[list[float], int]:
        client = BatchEnvClient(worker, api_key=KEY, window_ms=5, rpc_timeout_s=30)
        try:
            jobs = [episode(client, GUESS if i % 2 else LOCK, 100 + i) for i in range(16)]
            rewards = await asyncio.gather(*jobs)
            with pytest.raises(EnvNotFound):
                await client.step("no-such-handle", "1")
            return list(rewards), client.batches
        finally:
            await client.aclose()

    rewards, batches = asyncio.run(main())
    assert rewards == [1.0] * 16
    # 16 episodes x (make + reset + up to 5 steps + close) calls, far fewer Batch RPCs.
    assert 0 < batches < 16 * 4


def test_sigkill_of_the_worker_fails_the_next_env_call_with_a_typed_error(tmp_path: Path, leaks_of: Any) -> None:
    proc, address = start_worker(tmp_path / "state")
    timeout_s = 20.0
    client = BatchEnvClient(address, rpc_timeout_s=timeout_s)
    try:
        remote = envs.make(LOCK, address=address, rpc_timeout_s=timeout_s)
        remote.reset(seed=5)
        remote.step("4 4 4")

        async def started() -> Any:
            env = client.env(GUESS)
            await env.areset(seed=5)
            return env

        batched = asyncio.run(started())
        proc.kill()
        proc.wait(timeout=10)

        t0 = time.monotonic()
        with pytest.raises(EnvUnavailable):
            remote.step("5 5 5")
        with pytest.raises(EnvUnavailable):
            asyncio.run(batched.astep("\\boxed{10}"))
        with pytest.raises(EnvUnavailable):
            envs.make(GUESS, address=address, rpc_timeout_s=timeout_s)
        assert time.monotonic() - t0 < timeout_s  # failed fast: not a deadline wait
    finally:
        client.close_channels()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert not [x for x in leaks_of(tmp_path / "state") if x.startswith("process")]
