"""Checks the ALE packages' tests share (no test framework needed to import this module).

:func:`assert_bad_input_error` is the bad-input contract of every ALE command line: a config,
override or environment problem ends in one or two lines on stderr, the first ``error: ...``
naming the file / key / variable, no traceback, exit status 2 (see :func:`ale_proto.config.exit_on_error`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def assert_bad_input_error(result: Any, named: Iterable[str] = (), *, quiet_stdout: bool = False) -> list[str]:
    """Assert a CLI run (``typer.testing``'s ``Result``) ended as a bad-input error naming every
    string in ``named`` on its first line; ``quiet_stdout`` also asserts nothing went to stdout.
    Returns the stderr lines."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines: list[str] = result.stderr.strip().splitlines()
    assert 1 <= len(lines) <= 2 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    if quiet_stdout:
        assert result.stdout == "", result.stdout
    for needle in named:
        assert needle in lines[0], (needle, lines[0])
    return lines
