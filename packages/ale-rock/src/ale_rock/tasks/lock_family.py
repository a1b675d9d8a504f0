"""A seeded terminal-task family in Harbor layout: open a digit lock with a shell command.

    write_lock_task(dest, seed=7, split=Split.HELD_OUT)      # one Harbor task directory
    write_lock_suite(dest, range(300), Split.HELD_OUT)       # 300 distinct held-out locks

Each instance is DigitLock (``ale_rock.envs.games.digit_lock``) as a sandbox task: ``lock.py`` (stdlib
only, shipped in ``environment/`` and copied in by the Dockerfile) holds a code of ``digits`` digits;
``python3 lock.py 4 4 4`` answers ``higher``/``lower``/``correct`` per digit, ``open`` or ``invalid: ...``,
appends the guess to ``.lock/guesses`` and refuses guesses once the lock opened or the turns ran out.
``tests/test.sh`` writes ``/logs/verifier/reward.txt``: 1 when the last logged guess is the code and
the lock was opened within the turns, else 0.

**Train and held-out never overlap, by code, not only by seed**: every code belongs to exactly one
side of DigitLock's fixed split (``split_codes``), so no held-out lock is ever seen in training
whatever the seeds. Held-out seed i is the i-th held-out code in the GEM game's fixed shuffled order
(``heldout_order``: a fair sample of the half, not its lowest codes; seeds ``0 .. n_heldout-1`` are
distinct instances: ~500 for 3 digits); a train seed draws a training code.

The code sits in a read-only file in the sandbox (the lock script must read it); an agent that reads
it instead of guessing opens the lock, which the verifier cannot tell from a lucky guess.
"""

from __future__ import annotations

import random
import shlex
from collections.abc import Iterable
from pathlib import Path

from ale_rock.envs.games.digit_lock import code_digits, heldout_order, split_codes
from ale_rock.tasks.models import Split

SCRIPT = r'''import os, sys
state = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".lock")
code = open(os.path.join(state, "code")).read().split()
max_turns = int(open(os.path.join(state, "max_turns")).read())
log = os.path.join(state, "guesses")
done = os.path.exists(os.path.join(state, "opened"))
turns = len(open(log).read().splitlines()) if os.path.exists(log) else 0
if done or turns >= max_turns:
    print("closed: no guesses left" if not done else "open")
    sys.exit(2)
guess = [a for a in " ".join(sys.argv[1:]).replace(",", " ").split() if a]
with open(log, "a") as f:
    f.write(" ".join(guess) + "\n")
if len(guess) != len(code) or not all(g.isdigit() and len(g) == 1 for g in guess):
    print("invalid: answer with %d digits separated by spaces" % len(code))
    sys.exit(1)
if guess == code:
    open(os.path.join(state, "opened"), "w").close()
    print("open")
    sys.exit(0)
print(" ".join("correct" if g == c else ("higher" if int(g) < int(c) else "lower") for g, c in zip(guess, code)))
'''
"""The lock (same feedback as ``DigitLock``); its state lives in ``.lock/`` beside it."""

WORKDIR = "/workspace"
BASE = 10


def prompt(digits: int = 3, max_turns: int = 5) -> str:
    """The instruction (the same for every instance of a shape: the lock is what differs)."""
    example = " ".join(["D"] * digits)
    return (f"Open the lock. It has {digits} digits, each 0-9, and you have {max_turns} guesses. Run "
            f"`python3 lock.py {example}` with your guess; every digit answers higher, lower or correct.")


def lock_code(seed: int, split: Split, digits: int = 3) -> list[int]:
    """The code of instance ``seed`` on ``split`` (held-out: the seed-th held-out code, cycling)."""
    if split == Split.HELD_OUT:
        heldout = heldout_order(digits, BASE)  # the GEM game's held-out seed order: one yardstick
        code = heldout[seed % len(heldout)]
    else:
        train = split_codes(digits, BASE)[0]
        code = train[random.Random(f"lock-train-{digits}-{seed}").randrange(len(train))]
    return code_digits(code, digits, BASE)


def heldout_size(digits: int = 3) -> int:
    """How many distinct held-out instances there are."""
    return len(split_codes(digits, BASE)[1])


def _toml(name: str, split: Split, digits: int, max_turns: int, agent_s: float) -> str:
    return "\n".join([
        'schema_version = "1.4"', "",
        "[task]", f'name = "{name}"', f'description = "Open a {digits}-digit lock in {max_turns} guesses"',
        'keywords = ["lock", "generated"]', "",
        "[metadata]", 'category = "games"', 'difficulty = "easy"', f'split = "{split.value}"',
        'tags = ["lock", "generated"]', 'family = "lock"', "",
        "[agent]", f"timeout_sec = {float(agent_s)}", "",
        "[verifier]", "timeout_sec = 10.0", "",
        # A small sandbox: the lock needs a Python start per guess, no more (more fit on a worker).
        "[environment]", "build_timeout_sec = 30.0", f'workdir = "{WORKDIR}"', 'network_mode = "no-network"',
        "cpus = 0.25", 'memory = "256M"', "",
    ])  # fmt: skip


def _dockerfile(code: list[int], max_turns: int, base_image: str) -> str:
    digits = " ".join(map(str, code))
    return "\n".join([
        f"FROM {base_image}", f"WORKDIR {WORKDIR}", f"COPY lock.py {WORKDIR}/lock.py",
        f"RUN mkdir -p .lock && printf %s {shlex.quote(digits)} > .lock/code && printf %s {max_turns} > .lock/max_turns"
        " && chmod 0444 .lock/code",
    ]) + "\n"  # fmt: skip


def _test_sh(code: list[int], max_turns: int) -> str:
    want = " ".join(map(str, code))
    # Opened = the last logged guess is the code, within the turns (lock.py logs nothing once it
    # refuses, so a guess after the end cannot count). reward.json's `reward` is that 0/1 (success);
    # beside it, for a trainer that shapes its reward: guesses made, digits of the last guess that
    # are right, and the lock's shape.
    return (
        "#!/bin/bash\n"
        f"g={WORKDIR}/.lock/guesses\n"
        'n=0; last=""; if [ -f "$g" ]; then n=$(wc -l < "$g"); last=$(tail -n 1 "$g"); fi\n'
        f'if [ -f {WORKDIR}/.lock/opened ] && [ "$n" -le {max_turns} ] && [ "$last" = {shlex.quote(want)} ]; '
        "then r=1; else r=0; fi\n"
        f"want=({want}); read -r -a got <<< \"$last\"; c=0\n"
        'for i in "${!want[@]}"; do [ "${got[$i]:-}" = "${want[$i]}" ] && c=$((c+1)); done\n'
        'echo "guesses: $n, opened: $r, right digits in the last guess: $c"\n'
        "echo $r > /logs/verifier/reward.txt\n"
        f'printf \'{{"reward": %d, "guesses": %d, "correct_digits": %d, "digits": {len(code)}, "max_turns": {max_turns}}}\\n\' '
        '"$r" "$n" "$c" > /logs/verifier/reward.json\n'
    )


def write_lock_task(dest: Path | str, seed: int, split: Split, *, digits: int = 3, max_turns: int = 5,
                    agent_s: float = 60.0, base_image: str | None = None) -> Path:
    """Write instance ``seed`` of ``split`` as a Harbor task directory ``dest``; returns it."""
    if base_image is None:
        from ale_rock.backends.docker_runtime import default_base_image

        base_image = default_base_image()
    code = lock_code(seed, split, digits)
    tag = "heldout" if split == Split.HELD_OUT else "train"
    name = f"lock-{digits}d-{tag}-{seed}"
    root = Path(dest)
    files = {
        "task.toml": _toml(name, split, digits, max_turns, agent_s),
        "instruction.md": prompt(digits, max_turns) + "\n",
        "environment/Dockerfile": _dockerfile(code, max_turns, base_image),
        "environment/lock.py": SCRIPT,
        "tests/test.sh": _test_sh(code, max_turns),
        "solution/solve.sh": f"#!/bin/bash\ncd {WORKDIR}\npython3 lock.py {' '.join(map(str, code))}\n",
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def write_lock_suite(dest: Path | str, seeds: Iterable[int], split: Split, **kwargs: object) -> list[Path]:
    """One task directory per seed under ``dest`` (``<dest>/<seed>``); returns them in seed order."""
    return [write_lock_task(Path(dest) / str(s), s, split, **kwargs) for s in seeds]  # type: ignore[arg-type]
