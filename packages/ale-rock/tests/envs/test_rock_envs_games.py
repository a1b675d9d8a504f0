"""The built-in games in-process: seeded, solvable, gem-shaped, typed errors after the end."""

from __future__ import annotations

from collections import deque

import pytest
from ale_rock.envs import EnvNotFound, EpisodeNotActive, make
from ale_rock.envs.games.frozen_lake import MOVES


def test_guess_the_number_binary_search_wins_and_feedback_is_right() -> None:
    env = make("game:GuessTheNumber-v0")
    for seed in range(20):
        obs, info = env.reset(seed=seed)
        assert isinstance(obs, str) and info["max_turns"] == 5
        lo, hi, reward, done = 1, 20, 0.0, False
        while not done:
            guess = (lo + hi) // 2
            obs, reward, terminated, truncated, info = env.step(f"My guess is \\boxed{{{guess}}}")
            done = terminated or truncated
            if "higher" in obs:
                lo = guess + 1
            elif "lower" in obs:
                hi = guess - 1
        assert reward == 1.0 and terminated and info["success"]  # 1..20 always falls in 5 halvings
        with pytest.raises(EpisodeNotActive):
            env.step("3")


def test_guess_the_number_invalid_actions_use_turns_and_truncate() -> None:
    env = make("game:GuessTheNumber-v0", max_turns=2)
    env.reset(seed=1)
    obs, r, term, trunc, info = env.step("no idea")
    assert info["invalid_action"] and (r, term, trunc) == (0.0, False, False)
    obs, r, term, trunc, info = env.step("99")
    assert info["invalid_action"] and trunc and not term


def test_same_seed_same_state_different_seeds_vary() -> None:
    for env_id in ("game:GuessTheNumber-v0", "game:FrozenLake-v0", "game:Sokoban-v0", "tool:Billing-v0"):
        a, b = make(env_id), make(env_id)
        assert a.reset(seed=5)[0] == b.reset(seed=5)[0]
        assert a.step("up")[0] == b.step("up")[0]
    lakes = {make("game:FrozenLake-v0").reset(seed=s)[0] for s in range(10)}
    assert len(lakes) > 5


def _bfs(start: object, moves: list[str], apply: object, goal: object, limit: int = 200000) -> list[str]:
    seen, todo = {start}, deque([(start, [])])
    while todo:
        state, path = todo.popleft()
        if goal(state):  # type: ignore[operator]
            return path
        for m in moves:
            nxt = apply(state, m)  # type: ignore[operator]
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                todo.append((nxt, [*path, m]))
        assert len(seen) < limit
    raise AssertionError("unsolvable")


def test_frozen_lake_is_solvable_and_holes_end_the_episode() -> None:
    env = make("game:FrozenLake-v0")
    for seed in range(10):
        env.reset(seed=seed)
        grid, size = env.grid, env.size

        def apply(p: tuple[int, int], m: str, grid: list = grid, size: int = size) -> tuple[int, int] | None:
            r = min(max(p[0] + MOVES[m][0], 0), size - 1)
            c = min(max(p[1] + MOVES[m][1], 0), size - 1)
            return None if grid[r][c] == "H" else (r, c)

        path = _bfs((0, 0), list(MOVES), apply, lambda p, grid=grid: grid[p[0]][p[1]] == "G")
        for m in path:
            obs, reward, term, trunc, info = env.step(m)
        assert (reward, term) == (1.0, True) and "P" in obs
    holes = [(seed, env) for seed in range(30) for _ in [env.reset(seed=seed)] if env.grid[1][0] == "H"]
    assert holes
    env.reset(seed=holes[0][0])
    assert env.step("down")[1:3] == (0.0, True)


def test_sokoban_levels_are_solvable_by_search() -> None:
    for env_id, seeds in (("game:Sokoban-v0", range(8)), ("game:Sokoban-v0-2box", range(3))):
        env = make(env_id)
        for seed in seeds:
            env.reset(seed=seed)
            assert env.boxes != env.targets
            floor, targets = env._floor, env.targets

            def apply(s: tuple, m: str, floor: object = floor) -> tuple | None:
                player, boxes = s
                dr, dc = MOVES[m]
                nxt = (player[0] + dr, player[1] + dc)
                if not floor(nxt):  # type: ignore[operator]
                    return None
                if nxt in boxes:
                    beyond = (nxt[0] + dr, nxt[1] + dc)
                    if not floor(beyond) or beyond in boxes:  # type: ignore[operator]
                        return None
                    boxes = (boxes - {nxt}) | {beyond}
                return (nxt, frozenset(boxes))

            path = _bfs(
                (env.player, frozenset(env.boxes)),
                list(MOVES),
                apply,
                lambda s, targets=targets: s[1] == targets,
            )
            for m in path:
                obs, reward, term, trunc, info = env.step(f"\\boxed{{{m}}}")
            assert (reward, term, info["success"]) == (1.0, True, True)


def test_unknown_ids_and_bad_kwargs_are_typed() -> None:
    with pytest.raises(EnvNotFound) as e:
        make("game:Nope-v0")
    assert e.value.field == "env_id" and e.value.metadata["env_id"] == "game:Nope-v0"
    from ale_rock.envs import InvalidAction

    with pytest.raises(InvalidAction):
        make("game:GuessTheNumber-v0", colour="red")
