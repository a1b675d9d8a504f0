"""ale_testlib: the stdlib-only harness uploaded beside every task's hidden tests.

A test file does ``from ale_testlib import test, run_all``, decorates functions with ``@test`` and
calls ``run_all()``, which prints one ``PASS name`` / ``FAIL name: reason`` line per test and exits
1 when any failed. Helpers cover what most tests need: running the agent's program and reading files.
"""

from __future__ import annotations

import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

_TESTS: list[Callable[[], None]] = []


def test(fn: Callable[[], None]) -> Callable[[], None]:
    """Register a test function."""
    _TESTS.append(fn)
    return fn


def run(args: list[str], *, input: str | None = None, timeout: float = 20.0) -> subprocess.CompletedProcess[str]:
    """Run a program from the work dir with text I/O; never raises on a non-zero exit."""
    return subprocess.run(args, input=input, capture_output=True, text=True, timeout=timeout)


def py(script: str, *args: str, input: str | None = None, timeout: float = 20.0) -> subprocess.CompletedProcess[str]:
    """Run a python script with the same interpreter as the tests."""
    return run([sys.executable, script, *args], input=input, timeout=timeout)


def read(path: str) -> str:
    """Read a text file; a clear AssertionError when it is missing."""
    p = Path(path)
    assert p.is_file(), f"{path} does not exist"
    return p.read_text(encoding="utf-8")


def load_module(path: str, name: str = "agent_module"):  # type: ignore[no-untyped-def]
    """Import a python file by path (fresh each time)."""
    import importlib.util

    assert Path(path).is_file(), f"{path} does not exist"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, f"cannot import {path}"
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def run_all() -> None:
    """Run the registered tests in order, print a line each, exit 1 if any failed."""
    failed = 0
    for fn in _TESTS:
        try:
            fn()
        except Exception as e:  # a test failure is data, whatever raised it
            failed += 1
            msg = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
            if not isinstance(e, AssertionError):
                msg += " @ " + traceback.format_exc(limit=-1).strip().splitlines()[-2].strip()
            print(f"FAIL {fn.__name__}: " + " ".join(msg.split())[:400], flush=True)
        else:
            print(f"PASS {fn.__name__}", flush=True)
    sys.exit(1 if failed else 0)
