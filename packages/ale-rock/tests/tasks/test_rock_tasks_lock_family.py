"""The lock task family: Harbor layout that validates, train and held-out codes that never overlap,
hundreds of distinct held-out instances, and a verifier that only pays for an opened lock."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ale_rock.envs.games.digit_lock import split_codes
from ale_rock.tasks import load_task, validate_task
from ale_rock.tasks.evaluate import run_tests, setup_task
from ale_rock.tasks.lock_family import heldout_size, lock_code, write_lock_suite, write_lock_task
from ale_rock.tasks.models import Split, TaskFormat, VerifierKind
from ale_rock.tasks.runner import LocalDirRunner


def test_train_and_heldout_never_overlap() -> None:
    train = {tuple(lock_code(s, Split.TRAIN)) for s in range(5000)}
    heldout = {tuple(lock_code(s, Split.HELD_OUT)) for s in range(heldout_size())}
    assert not train & heldout
    assert len(heldout) == heldout_size() >= 300  # distinct held-out instances
    assert len(train) > 300  # training draws many different locks
    assert lock_code(7, Split.TRAIN) == lock_code(7, Split.TRAIN)  # seeded
    # Every code is on exactly one side of DigitLock's fixed split (the GEM game's split).
    t, h = split_codes(3, 10)
    assert not set(t) & set(h) and len(t) + len(h) == 1000


def test_heldout_instances_follow_the_gem_games_order_and_cover_every_leading_digit() -> None:
    # The first 300 held-out instances (ale up's evaluation) are a fair sample of the held-out half,
    # not its 300 lowest codes, and instance i is the GEM game's held-out seed i (one yardstick).
    from ale_rock.envs.games.digit_lock import DigitLock

    codes = [lock_code(i, Split.HELD_OUT) for i in range(300)]
    assert {c[0] for c in codes} == set(range(10))
    env = DigitLock()
    assert all(int("".join(map(str, c))) == env.reset(1_000_000 + i)[1]["code"] for i, c in enumerate(codes))


def test_instance_is_a_harbor_task_that_validates(tmp_path: Path) -> None:
    root = write_lock_task(tmp_path / "t", 12, Split.HELD_OUT, base_image="ale-base-for-test")
    assert {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} == {
        "task.toml", "instruction.md", "environment/Dockerfile", "environment/lock.py", "tests/test.sh",
        "solution/solve.sh"}
    task = load_task(root)
    assert task.format == TaskFormat.HARBOR and task.verifier.kind == VerifierKind.REWARD_FILE
    assert task.spec.split == Split.HELD_OUT and task.environment.cpus == 0.25 and not task.notes
    report = validate_task(task, LocalDirRunner(tmp_path / "w"))
    assert not report.problems and all(r.reward == 1.0 for r in report.reference) and report.noop.reward == 0.0


def test_verifier_pays_only_for_the_opened_lock(tmp_path: Path) -> None:
    [root] = write_lock_suite(tmp_path / "suite", [3], Split.TRAIN, max_turns=2, base_image="b")
    task = load_task(root)
    code = " ".join(map(str, lock_code(3, Split.TRAIN)))
    wrong = " ".join(str((int(d) + 1) % 10) for d in code.split())
    half = " ".join([code.split()[0], *wrong.split()[1:]])  # the first digit right only
    metrics: dict[str, dict[str, float]] = {}

    def play(*guesses: str) -> tuple[float, list[str]]:
        runner = LocalDirRunner(tmp_path / f"w{len(list(tmp_path.iterdir()))}")
        setup_task(task, runner)
        outs = [subprocess.run(["python3", "lock.py", *g.split()], cwd=runner.workdir, capture_output=True,
                               text=True, timeout=10).stdout.strip() for g in guesses]
        report = run_tests(task, runner)
        metrics[" / ".join(guesses)] = report.metrics
        return report.reward, outs

    assert play(code) == (1.0, ["open"])
    reward, outs = play(wrong, code)
    assert reward == 1.0 and outs[1] == "open" and all(w in ("higher", "lower") for w in outs[0].split())
    assert play(wrong, wrong, code) == (0.0, [outs[0], outs[0], "closed: no guesses left"])  # out of turns
    assert play("1 2")[0] == 0.0  # an invalid guess opens nothing
    assert play(wrong, half)[0] == 0.0
    assert play()[0] == 0.0  # no guess at all
    # reward.json: the 0/1 reward (success) and what a trainer may shape its reward with.
    shape = {"digits": 3.0, "max_turns": 2.0}
    assert metrics[code] == {"reward": 1.0, "guesses": 1.0, "correct_digits": 3.0, **shape}
    assert metrics[f"{wrong} / {code}"] == {"reward": 1.0, "guesses": 2.0, "correct_digits": 3.0, **shape}
    # The third guess was refused and not logged: the last logged guess is the second wrong one.
    assert metrics[f"{wrong} / {wrong} / {code}"] == {"reward": 0.0, "guesses": 2.0, "correct_digits": 0.0, **shape}
    assert metrics[f"{wrong} / {half}"] == {"reward": 0.0, "guesses": 2.0, "correct_digits": 1.0, **shape}
    assert metrics[""] == {"reward": 0.0, "guesses": 0.0, "correct_digits": 0.0, **shape}
    assert metrics["1 2"]["guesses"] == 1.0 and metrics["1 2"]["reward"] == 0.0
