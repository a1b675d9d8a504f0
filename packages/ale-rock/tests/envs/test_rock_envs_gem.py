"""Interop with the gem-llm package, both ways, and the vectorized async client."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from ale_rock.envs import make
from ale_rock.envs.client import AsyncVectorEnvClient
from ale_rock.envs.gem_compat import register_in_gem
from ale_rock.envs.server import serve_env_service

gem = pytest.importorskip("gem", reason="needs the gem-llm package (ale-rock[gem])")


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    srv = serve_env_service()
    yield srv
    srv.stop(0)


def test_a_gem_environment_runs_behind_our_service(server: Any) -> None:
    env = make("gem:game:GuessTheNumber-v0-easy", address=server.address)
    direct = gem.make("game:GuessTheNumber-v0-easy")
    obs, info = env.reset(seed=3)
    assert obs == direct.reset(seed=3)[0]
    for guess in range(1, 11):
        out = env.step(f"\\boxed{{{guess}}}")
        assert out == tuple(direct.step(f"\\boxed{{{guess}}}")[:4]) + (out[4],)
        if out[2] or out[3]:
            break
    assert out[2] or out[3]
    env.close()


@pytest.mark.parametrize("remote", [False, True])
def test_our_environments_inside_gem_vector_wrappers(server: Any, remote: bool) -> None:
    (gem_id,) = register_in_gem(
        ["game:GuessTheNumber-v0"],
        address=server.address if remote else None,
        prefix="ale-remote/" if remote else "ale/",
    )
    for async_mode in (False, True):
        vec = gem.make_vec([gem_id] * 4, async_mode=async_mode, seed=10)
        obs, infos = vec.reset()
        assert len(obs) == 4 and all(o.startswith("I picked") for o in obs)
        wins = 0
        lo, hi = [1] * 4, [20] * 4
        for _ in range(5):
            guesses = [(a + b) // 2 for a, b in zip(lo, hi)]
            obs, rewards, terms, truncs, infos = vec.step([str(g) for g in guesses])
            wins += int(sum(rewards))
            for i, o in enumerate(obs):
                if "higher" in o:
                    lo[i] = guesses[i] + 1
                elif "lower" in o:
                    hi[i] = guesses[i] - 1
                elif terms[i] or truncs[i]:  # autoreset: start over for the next episode
                    lo[i], hi[i] = 1, 20
        assert wins >= 4
        for e in vec.envs:
            e.close()


def test_vector_client_holds_many_episodes_at_once(server: Any) -> None:
    n = 120

    async def run() -> list[float]:
        async with AsyncVectorEnvClient(["game:GuessTheNumber-v0"] * n, server.address) as vec:
            assert len(server.host) >= n
            obs = await vec.reset(seeds=list(range(n)))
            assert len(obs) == n
            lo, hi, done, rewards = [1] * n, [20] * n, [False] * n, [0.0] * n
            while not all(done):
                guesses = [(a + b) // 2 for a, b in zip(lo, hi)]
                results = await vec.step([None if d else str(g) for d, g in zip(done, guesses)])
                for i, res in enumerate(results):
                    if res is None:
                        continue
                    o, r, term, trunc, _ = res
                    rewards[i] += r
                    done[i] = term or trunc
                    lo[i] = guesses[i] + 1 if "higher" in o else lo[i]
                    hi[i] = guesses[i] - 1 if "lower" in o else hi[i]
            return rewards

    rewards = asyncio.run(run())
    assert rewards == [1.0] * n
    assert len(server.host) == 0


def test_gem_wrappers_stack_on_a_remote_env(server: Any) -> None:
    from gem.wrappers.episode_tracking_wrapper import EpisodeTrackingWrapper
    from gem.wrappers.observation_wrapper import ObservationWrapper

    env = EpisodeTrackingWrapper(
        ObservationWrapper(make("game:FrozenLake-v0", address=server.address), include_chat_template=False)
    )
    obs, info = env.reset(seed=2)
    assert "frozen lake" in obs and info["step_counter"] == 0
    obs, reward, term, trunc, info = env.step("right")
    assert info["step_counter"] == 1 and "right" in obs  # the history wrapper shows past actions
    assert env.unwrapped.handle in server.host._slots
    env.unwrapped.close()
