"""DigitLock: feedback, the held-out split by seed, and that the per-digit binary search always opens it."""

from __future__ import annotations

import itertools

import pytest
from ale_rock.envs import make
from ale_rock.envs.games.digit_lock import DigitLock, code_digits, expert_guess, split_codes


def play_expert(env: DigitLock, seed: int) -> tuple[bool, int]:
    env.reset(seed)
    history: list[tuple[list[int], list[str]]] = []
    for turn in range(1, env.max_turns + 1):
        guess = expert_guess(history)
        obs, reward, term, trunc, info = env.step(" ".join(map(str, guess)))
        if term:
            return reward == 1.0 and info.get("success", False), turn
        if trunc:
            return False, turn
        history.append((guess, obs.split()))
    return False, env.max_turns


def test_feedback_per_digit() -> None:
    env = DigitLock()
    _, info = env.reset(7)
    code = code_digits(info["code"], 3, 10)
    guess = [min(9, code[0] + 1), code[1], max(0, code[2] - 1)]
    obs, reward, term, trunc, _ = env.step(" ".join(map(str, guess)))
    expected = ["lower" if guess[0] > code[0] else "correct", "correct",
                "higher" if guess[2] < code[2] else "correct"]
    assert obs.split() == expected and reward == 0.0 and not term and not trunc


def test_invalid_actions_use_a_turn() -> None:
    env = DigitLock(max_turns=2)
    env.reset(1)
    obs, reward, term, trunc, info = env.step("12")
    assert obs.startswith("invalid") and info["invalid_action"] and not trunc
    obs, reward, term, trunc, info = env.step("a b c")
    assert info["invalid_action"] and trunc and reward == 0.0


def test_split_is_disjoint_complete_and_fixed() -> None:
    train, heldout = split_codes(3, 10)
    assert set(train).isdisjoint(heldout) and sorted(train + heldout) == list(range(1000))
    assert 400 < len(heldout) < 600
    assert split_codes(3, 10) == (train, heldout)


def test_training_seeds_never_draw_heldout_codes_and_eval_seeds_enumerate_them() -> None:
    env = DigitLock()
    _, heldout = split_codes(3, 10)
    train_codes = {env.reset(seed)[1]["code"] for seed in range(3000)}
    assert train_codes.isdisjoint(heldout)
    eval_codes = [env.reset(1_000_000 + i)[1]["code"] for i in range(400)]
    assert len(set(eval_codes)) == 400 and set(eval_codes) <= set(heldout)
    assert env.reset(1_000_000)[1]["split"] == "heldout"


def _search_depth(digit: int) -> int:
    """Guesses the per-digit binary search needs for ``digit`` (1 for the first guess's 4, up to 4)."""
    lo, hi, depth = 0, 9, 1
    while (mid := (lo + hi) // 2) != digit:
        lo, hi = (mid + 1, hi) if digit > mid else (lo, mid - 1)
        depth += 1
    return depth


@pytest.mark.parametrize("n", [300, 400])
def test_the_first_n_eval_seeds_are_a_fair_sample_of_the_heldout_half(n: int) -> None:
    # Held-out seeds used to enumerate the codes in increasing order, so the 300 locks of an
    # evaluation were codes 0xx-5xx: no first digit above 5, fewer of the 4-guess digits (3, 6, 9)
    # than the training locks — an easier held-out set than the training distribution.
    env = DigitLock()
    _, heldout = split_codes(3, 10)
    first = [env.reset(1_000_000 + i)[1]["code"] for i in range(n)]
    assert {c // 100 for c in first} == set(range(10))  # every leading digit
    deep = sum(_search_depth(c // 100) == 4 for c in first) / n
    deep_all = sum(_search_depth(c // 100) == 4 for c in heldout) / len(heldout)
    assert abs(deep - deep_all) < 0.06, (deep, deep_all)
    assert len(set(first)) == n  # still distinct
    assert first == [env.reset(1_000_000 + i)[1]["code"] for i in range(n)]  # and fixed


@pytest.mark.parametrize("seed", list(itertools.chain(range(0, 60), range(1_000_000, 1_000_060))))
def test_expert_opens_every_lock_within_four_guesses(seed: int) -> None:
    opened, turns = play_expert(DigitLock(), seed)
    assert opened and turns <= 4


def test_registered_and_playable_by_id() -> None:
    env = make("game:DigitLock-v0")
    obs, info = env.reset(3)
    assert "3 digits" in obs and info["split"] == "train"
