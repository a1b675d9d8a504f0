"""The agent-native job's shaped reward, on what the lock's real verifier reports."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

from ale_rock.tasks import load_task
from ale_rock.tasks.evaluate import run_tests, setup_task
from ale_rock.tasks.lock_family import lock_code, write_lock_task
from ale_rock.tasks.models import Split
from ale_rock.tasks.runner import LocalDirRunner

from ale.job.lock_reward import EFFICIENCY, PARTIAL, shaped


def _episode(tmp_path: Path, guesses: list[list[int]], max_turns: int = 5) -> tuple[float, bool]:
    """Play ``guesses`` on train lock 11 through its real lock.py and verifier; (shaped, success)."""
    root = tmp_path / "task"
    if not root.exists():
        write_lock_task(root, 11, Split.TRAIN, max_turns=max_turns, base_image="b")
    task = load_task(root)
    runner = LocalDirRunner(tmp_path / f"w{len(list(tmp_path.iterdir()))}")
    setup_task(task, runner)
    for g in guesses:
        subprocess.run(["python3", "lock.py", *map(str, g)], cwd=runner.workdir, capture_output=True, timeout=10)
    report = run_tests(task, runner)
    traj = SimpleNamespace(metadata={"env_reward": report.reward})
    return shaped(traj, {"success": report.passed, "metrics": report.metrics}), report.passed


def test_shaped_reward_orders_episodes_as_the_binary_search_would(tmp_path: Path) -> None:
    code = lock_code(11, Split.TRAIN)
    off = [(d + 1) % 10 for d in code]
    one_right = [code[0], *off[1:]]
    two_right = [code[0], code[1], off[2]]

    first, ok1 = _episode(tmp_path, [code])
    third, ok3 = _episode(tmp_path, [off, off, code])
    fifth, ok5 = _episode(tmp_path, [off, off, off, off, code])
    assert ok1 and ok3 and ok5
    assert first == 1.0 + EFFICIENCY * 4 / 5 and third == 1.0 + EFFICIENCY * 2 / 5 and fifth == 1.0
    assert first > third > fifth

    near, ok_near = _episode(tmp_path, [off] * 4 + [two_right])
    far, ok_far = _episode(tmp_path, [off] * 4 + [one_right])
    none, ok_none = _episode(tmp_path, [off] * 5)
    silent, ok_silent = _episode(tmp_path, [])
    assert not (ok_near or ok_far or ok_none or ok_silent)
    assert near == PARTIAL * 2 / 3 and far == PARTIAL / 3 and none == 0.0 and silent == 0.0
    # Every failure scores below every success: the 0/1 reward's best policy is the shaped one's.
    assert fifth > near > far > none


def test_shaped_reward_keeps_the_verifiers_reward_without_lock_metrics() -> None:
    traj = SimpleNamespace(metadata={"env_reward": 0.25})
    assert shaped(traj, {"success": False, "metrics": {"reward": 0.25}}) == 0.25
    assert shaped(traj, {"success": False}) == 0.25
    bad = {"reward": 1.0, "guesses": 1.0, "correct_digits": 3.0, "digits": 3.0, "max_turns": 0.0}
    assert shaped(SimpleNamespace(metadata={"env_reward": 1.0}), {"success": True, "metrics": bad}) == 1.0
