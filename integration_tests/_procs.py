"""Live processes of a run, found by what their command lines name (for leak and secret checks)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


def processes_mentioning(texts: str | Iterable[str]) -> list[str]:
    """``pid: command line`` of every live (not zombie) process, other than this test's, whose
    command line names one of ``texts`` (a run dir, a state dir, a marker, a secret)."""
    wanted = [texts] if isinstance(texts, str) else list(texts)
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
        except (OSError, IndexError):
            continue
        if state != "Z" and int(pid) != os.getpid() and any(t in cmd for t in wanted):
            found.append(f"{pid}: {cmd[:300]}")
    return found
