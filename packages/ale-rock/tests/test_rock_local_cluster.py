"""LocalCluster hands its secrets (API keys, the join token) to the processes it starts in 0600
files, never on a command line: /proc/<pid>/cmdline is readable by every local user."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from ale_rock.local_cluster import SECRETS_DIR, LocalCluster
from ale_rock.sdk import Sandbox


def _descendants(roots: set[int]) -> set[int]:
    """``roots`` and every live process below them (by /proc/<pid>/stat's parent pid)."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                # The command name (field 2) may hold spaces: the parent pid follows its ')'.
                parent[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, grew = set(roots), True
    while grew:
        more = {pid for pid, ppid in parent.items() if ppid in found} - found
        found |= more
        grew = bool(more)
    return found


def test_no_secret_on_any_command_line(tmp_path: Path) -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (apt bubblewrap) is not installed")
    with LocalCluster(workers=1, workdir=tmp_path / "c") as cluster:
        # A running sandbox, so the worker's children (its rocklet) are looked at too.
        with Sandbox.create(client=cluster.client()) as sb:
            assert sb.exec("echo up").stdout.strip() == "up"
            assert cluster.admin is not None
            pids = _descendants({cluster.admin.popen.pid, *cluster.worker_pids().values()})
            cmdlines = {}
            for pid in pids:
                try:
                    cmdlines[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                except OSError:  # exited meanwhile
                    continue
        assert len(cmdlines) >= 3, cmdlines  # admin, worker, and at least the sandbox's process
        secrets = {"join token": cluster.join_token, **{f"API key of {ns}": k for ns, k in cluster.namespaces.items()}}
        leaks = [f"{what} in pid {pid}: {line}" for pid, line in cmdlines.items()
                 for what, value in secrets.items() if value in line]  # fmt: skip
        assert not leaks, leaks
        # Where the secrets went instead: files only this user can read.
        private = cluster.dir / SECRETS_DIR
        assert stat.S_IMODE(private.stat().st_mode) == 0o700
        files = sorted(private.iterdir())
        assert [f.name for f in files] == ["admin.yaml", "worker.yaml"]
        for f in files:
            assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
            assert f.stat().st_uid == os.getuid()
        assert cluster.join_token in (private / "worker.yaml").read_text()
