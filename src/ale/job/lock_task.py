"""DigitLock as a sandbox task: a stdlib-only script holds the lock; the agent opens it with a shell tool.

The script gives exactly the feedback of `ale_rock.envs.games.digit_lock.DigitLock` (a test checks
it): `python3 /workspace/lock.py 4 4 4` prints `higher lower correct`, `open`, or an `invalid: ...`
line, appends the guess to `/workspace/.lock/guesses`, and refuses guesses after the lock opened
or the turns ran out. The code sits in a root-owned, read-only file (`/workspace/.lock/code`)
that only the setup writes, so a re-check in a fresh sandbox replays the same lock.
"""

from __future__ import annotations

import shlex
from typing import Any

from ale_rock.tasks.lock_family import SCRIPT as LOCK_SCRIPT

# The lock script is the Harbor lock family's (one copy): its state is `.lock/` beside it.
SCRIPT = LOCK_SCRIPT

PROMPT = ("Open the lock. It has 3 digits, each 0-9, and you have {max_turns} guesses. Run "
          "`python3 /workspace/lock.py D D D` with your guess; every digit answers higher, lower or correct.")


def setup_commands(code: list[int], max_turns: int) -> str:
    """One shell command that installs the task (any earlier lock in the sandbox is removed first)."""
    digits = " ".join(map(str, code))
    return (f"rm -rf /workspace/.lock /workspace/lock.py && mkdir -p /workspace/.lock && printf %s {shlex.quote(SCRIPT)} > /workspace/lock.py && "
            f"printf %s {shlex.quote(digits)} > /workspace/.lock/code && "
            f"printf %s {max_turns} > /workspace/.lock/max_turns && chmod 0444 /workspace/.lock/code")


def guess_command(guess: list[int] | str) -> str:
    """The shell command for a guess."""
    text = guess if isinstance(guess, str) else " ".join(map(str, guess))
    return f"python3 /workspace/lock.py {text}"


def replay_in_sandbox(sandbox: Any, code: list[int], max_turns: int, actions: list[str],
                      timeout: float = 30.0) -> tuple[bool, list[str]]:
    """Re-execute `actions` against a freshly installed lock in one exec; (opened, outputs)."""
    guesses = "; ".join(guess_command(shlex.join(a.split())) for a in actions) or "true"
    res = sandbox.exec(f"{setup_commands(code, max_turns)} && {{ {guesses}; }}", timeout=timeout)
    outputs = [line.strip() for line in res.stdout.splitlines() if line.strip()]
    return bool(outputs) and outputs[-1] == "open" and "open" not in outputs[:-1], outputs
