"""LocalDirRunner and the test-output parser."""

from __future__ import annotations

import time

import pytest
from ale_rock.tasks import LocalDirRunner, TaskRunner
from ale_rock.tasks.evaluate import parse_test_output


def test_runner_satisfies_protocol() -> None:
    with LocalDirRunner() as r:
        assert isinstance(r, TaskRunner)


def test_upload_run_and_reset() -> None:
    with LocalDirRunner() as r:
        r.upload({"a/b.txt": b"hello\n"})
        res = r.run("cat a/b.txt; echo err >&2; exit 3", timeout_s=10)
        assert res.exit_code == 3 and "hello" in res.output and "err" in res.output
        assert not res.timed_out
        r.reset()
        assert r.run("ls -A | grep -v '^.tmp$' | wc -l", timeout_s=10).output.strip() == "0"


def test_runner_uses_system_python_without_venv() -> None:
    with LocalDirRunner() as r:
        res = r.run("python3 -c 'import sys; print(sys.prefix)'", timeout_s=10)
        assert res.exit_code == 0
        assert ".venv" not in res.output


def test_timeout_kills_the_process_tree() -> None:
    with LocalDirRunner() as r:
        start = time.monotonic()
        res = r.run("sleep 30 & sleep 30; echo never", timeout_s=0.5)
        assert res.timed_out and res.exit_code == 124
        assert "never" not in res.output
        assert time.monotonic() - start < 10


def test_reset_handles_read_only_dirs() -> None:
    with LocalDirRunner() as r:
        r.run("mkdir -p locked/x && touch locked/x/f && chmod 000 locked/x && chmod 500 locked", timeout_s=10)
        r.reset()
        assert list(r.workdir.iterdir()) == []


@pytest.mark.parametrize("bad", ["/etc/passwd", "../escape", "a/../../b", ""])
def test_upload_rejects_paths_outside(bad: str) -> None:
    with LocalDirRunner() as r, pytest.raises(ValueError, match="relative"):
        r.upload({bad: b"x"})


def test_parse_test_output() -> None:
    out = "noise\nPASS first\nFAIL second: AssertionError: 1 != 2\n  PASS third  \nFAIL first: flaky\nPASSED nothing\n"
    res = parse_test_output(out)
    assert [(t.name, t.passed) for t in res] == [("first", False), ("second", False), ("third", True)]
    assert res[1].message == "AssertionError: 1 != 2"
