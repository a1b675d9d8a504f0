"""EpisodeRunner over the batched EnvService client (the controller's env factory with an address):
the same trajectories as in-process envs, calls really batched, and the env timeout enforced."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from ale_roll.config import EnvConfig
from ale_roll.engines.base import Generation, SamplingParams
from ale_roll.rollout import ChatFormat, EpisodeRunner
from ale_roll.rollout.episode import EnvTimeout
from ale_roll.trainer.controller import make_env_factory
from ale_roll.types import StopReason

rock_envs = pytest.importorskip("ale_rock.envs", reason="ale-rock (environments) is not installed")
GAME = "game:GuessTheNumber-v0"


class CharTokenizer:
    """One token per character (enough for ChatFormat)."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(i) for i in ids)


class BisectingGenerator:
    """A scripted, deterministic policy: bisects 1..20 on the hints found in its context."""

    policy_version = 0

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Generation:
        lo, hi = 1, 20
        for guess, hint in re.findall(r"(\d+) is wrong; the number is (higher|lower)", "".join(map(chr, prompt_ids))):
            lo, hi = (int(guess) + 1, hi) if hint == "higher" else (lo, int(guess) - 1)
        ids = [ord(c) for c in str((lo + hi) // 2)]
        await asyncio.sleep(0)  # a real generator yields to the loop
        return Generation("r", ids, [-0.5] * len(ids), StopReason.STOP, 0)


from ale_rock.testing.envs import SleepyEnv  # noqa: E402 - after the importorskip above

rock_envs.register("test:RollSleepy-v0", SleepyEnv, replace=True)


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    from ale_rock.envs.server import EnvServerConfig, serve_env_service

    srv = serve_env_service(EnvServerConfig(port=0))
    yield srv
    srv.stop(0)


def _runner(factory: Any, env_timeout_s: float = 30) -> EpisodeRunner:
    fmt = ChatFormat(CharTokenizer(), observation_template="\n{observation}\n")
    return EpisodeRunner(factory, BisectingGenerator(), fmt, SamplingParams(max_tokens=4), max_turns=5,  # type: ignore[arg-type]
                         env_timeout_s=env_timeout_s, env_threads=True)


def _play(runner: EpisodeRunner, seeds: range) -> list[Any]:
    async def go() -> list[Any]:
        return list(await asyncio.gather(*(runner.run(seed=s, initial_state_id=f"s{s}") for s in seeds)))

    return asyncio.run(go())


def _view(traj: Any) -> Any:
    return ([(t.prompt_ids, t.completion_ids, t.observation_text, t.observation_ids, t.error) for t in traj.turns],
            traj.reward, traj.metadata, traj.seed)


def test_batched_episodes_equal_in_process_episodes(server: Any) -> None:
    seeds = range(200)
    remote_factory = make_env_factory(EnvConfig(id=GAME, address=server.address), 30)
    probe = remote_factory()
    from ale_rock.envs.batch_client import BatchedRemoteEnv

    assert isinstance(probe, BatchedRemoteEnv)  # the factory hands out batched envs
    client = probe.client
    remote = _play(_runner(remote_factory), seeds)
    local = _play(_runner(make_env_factory(EnvConfig(id=GAME), 30)), seeds)
    assert [_view(t) for t in remote] == [_view(t) for t in local]
    assert sum(t.reward for t in local) > 100  # bisection wins most games within 5 guesses
    calls = sum(len(t.turns) + 3 for t in remote)  # make + reset + steps + close
    assert 0 < client.batches <= calls / 10
    assert len(server.host) == 0  # every env was closed


def test_second_event_loop_reuses_the_factory(server: Any) -> None:
    factory = make_env_factory(EnvConfig(id=GAME, address=server.address), 30)
    runner = _runner(factory)
    first, second = _play(runner, range(5)), _play(runner, range(5))  # two asyncio.run loops
    assert [_view(t) for t in first] == [_view(t) for t in second]


def test_env_timeout_applies_to_async_envs(server: Any) -> None:
    factory = make_env_factory(EnvConfig(id="test:RollSleepy-v0", address=server.address, kwargs={"delay": 1.5}), 30)
    runner = _runner(factory, env_timeout_s=0.3)
    t0 = time.monotonic()
    with pytest.raises(EnvTimeout):
        _play(runner, range(1))
    assert time.monotonic() - t0 < 10
