"""Red team: a sandbox against its own Rocklet (issue 11, findings 8, 9, 12).

Each test performs the attack from inside a real bubblewrap sandbox and asserts it fails:
1 GB of non-streamed output and a full /tmp do not kill the Rocklet (8); a command that traps
SIGTERM and forks sleepers (some setsid'd) leaves nothing alive after its timeout (9); a command
cannot ptrace its Rocklet or read its /proc environ (12); garbage request bytes get
INVALID_ARGUMENT (12). One sandbox serves every test (module scope): CI time is the constraint.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from ale_proto.v1 import sandbox_pb2
from ale_rock.backends.base import Limits, SandboxConfig
from ale_rock.backends.local import LocalBackend, LocalBackendConfig

from ..backends._box import Box

MiB = 2**20
EXITED = sandbox_pb2.EXEC_END_REASON_EXITED
TIMEOUT = sandbox_pb2.EXEC_END_REASON_TIMEOUT


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Box]:
    """One sandbox with memory=256Mi and disk=64Mi (its /tmp is RAM-backed tmpfs)."""
    if shutil.which("bwrap") is None or os.geteuid() != 0:
        pytest.skip("needs bubblewrap and root")
    backend = LocalBackend(
        LocalBackendConfig(state_dir=tmp_path_factory.mktemp("rt-rocklet"), pool_size=0, kill_grace_s=0.5)
    )
    sid = f"rt-{uuid.uuid4().hex[:8]}"
    try:
        handle = backend.start(sid, SandboxConfig(limits=Limits(memory_bytes=256 * MiB, disk_bytes=64 * MiB)))
        b = Box(handle.rocklet_socket)
        yield b
        b.channel.close()
        backend.remove(sid)
    finally:
        backend.close()


def _docker_problem() -> str:
    try:
        import docker

        client = docker.from_env(timeout=5)
        client.ping()
        client.close()
    except Exception as e:  # noqa: BLE001 - any failure means "no engine"
        return f"no Docker engine reachable: {e}"
    return ""


@pytest.fixture(scope="module")
def docker_box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Box]:
    """The same attacks against a Docker sandbox (memory=256Mi, the Rocklet from this checkout)."""
    problem = _docker_problem()
    if problem:
        pytest.skip(problem)
    from ale_rock.backends.docker import DockerBackend, DockerBackendConfig

    repo = Path(__file__).resolve().parents[4]
    subprocess.run(["bash", str(repo / "scripts" / "build_base_image.sh")], check=True, timeout=900)
    worker = f"rt{uuid.uuid4().hex[:8]}"
    backend = DockerBackend(
        DockerBackendConfig(worker=worker, root_dir=Path("/tmp/ale-dt") / worker, pool_size=0)
    )
    sid = f"rt-{uuid.uuid4().hex[:8]}"
    try:
        handle = backend.start(sid, SandboxConfig(limits=Limits(memory_bytes=256 * MiB)))
        b = Box(handle.rocklet_socket)
        yield b
        b.channel.close()
        backend.remove(sid)
    finally:
        backend.reap_orphans(set())
        backend.close()


def _host_pids_running(cmdline: str) -> list[int]:
    """Host processes whose command line is exactly ``cmdline`` (space-separated)."""
    want = cmdline.replace(" ", "\0").encode() + b"\0"
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cmd = Path(f"/proc/{name}/cmdline").read_bytes()
                state = Path(f"/proc/{name}/stat").read_bytes().rpartition(b")")[2].split()[0]
            except (OSError, IndexError):
                continue
            if cmd == want and state != b"Z":
                found.append(int(name))
    return found


# -- finding 8: output and a full /tmp do not kill the Rocklet ------------------------------------


def test_1g_of_output_neither_kills_the_rocklet_nor_fills_its_memory(box: Box) -> None:
    r = box.sh("head -c 1G /dev/zero; echo done >&2", timeout_ms=60000)
    assert r.end_reason == EXITED and r.exit_code == 0, r
    assert r.stdout_truncated and len(r.stdout) <= 1 * MiB
    assert r.stdout_total_bytes == 1 << 30  # every byte was counted…
    assert r.spill_truncated  # …but the spill was cut (at most 64 MiB per stream)
    size = box.sh(f"stat -c %s {r.stdout_spill_path}").stdout.decode().strip()
    assert int(size) <= 64 * MiB
    assert r.stderr == b"done\n" and not r.oom_killed
    # The Rocklet lives on: the next command runs.
    again = box.sh("echo alive")
    assert again.end_reason == EXITED and again.stdout == b"alive\n"
    box.sh(f"rm -f {r.stdout_spill_path}")


def test_a_full_tmp_does_not_stop_commands(box: Box) -> None:
    # Several files: the per-file size limit (RLIMIT_FSIZE) would stop a single one early.
    fill = box.sh("for i in 1 2 3 4 5 6 7 8 9; do head -c 16M /dev/zero > /tmp/fill$i || break; done; "
                  "df -k --output=avail /tmp | tail -1")
    assert fill.stdout.strip() == b"0", f"/tmp is not full: {fill}"
    try:
        r = box.sh("echo still-here")
        assert r.end_reason == EXITED and r.stdout == b"still-here\n"
        # Output beyond the in-memory cap needs a spill file, which cannot be written now: the
        # command still completes, with the kept part and the totals.
        big = box.sh("head -c 3M /dev/zero", max_output_bytes=MiB)
        assert big.end_reason == EXITED and big.exit_code == 0
        assert big.stdout_total_bytes == 3 * MiB and len(big.stdout) == MiB
        assert big.stdout_truncated and big.spill_truncated
    finally:
        box.sh("rm -f /tmp/fill* /tmp/.ale/*")


# -- finding 9: a timed-out command leaves nothing behind ------------------------------------------


FORK_BOMB = (
    "trap '' TERM; "
    "for i in $(seq 25); do sleep 3117 & done; "
    "for i in $(seq 25); do setsid sleep 3118 & done; "
    "( setsid sh -c 'sleep 3119 & sleep 3119' & ); "  # double fork into a new session
    "wait"
)


def test_timeout_kills_every_descendant_even_setsid_ones(box: Box) -> None:
    started = time.monotonic()
    r = box.sh(FORK_BOMB, timeout_ms=1000)
    took = time.monotonic() - started
    assert r.end_reason == TIMEOUT, r
    assert took < 8, f"the timeout took {took:.1f} s"
    inside = box.sh("ps -eo stat=,comm= | awk '$2 == \"sleep\" && $1 !~ /^Z/' | wc -l")
    assert inside.stdout.strip() == b"0", f"sleepers still alive inside the sandbox: {inside}"
    for n in (3117, 3118, 3119):
        assert _host_pids_running(f"sleep {n}") == [], f"sleep {n} survived (seen from the host)"
    # The sandbox can still fork (no pids left hanging on the pids limit).
    forked = box.sh("for i in 1 2 3 4 5; do true & done; wait; echo forked")
    assert forked.stdout == b"forked\n"


def test_a_command_ignoring_sigterm_gets_sigkill_after_the_grace(box: Box) -> None:
    started = time.monotonic()
    r = box.sh("trap '' TERM; sleep 3120", timeout_ms=500)
    assert r.end_reason == TIMEOUT and r.signal == 9, r
    assert time.monotonic() - started < 6
    assert _host_pids_running("sleep 3120") == []


# -- finding 12: the Rocklet cannot be inspected by its commands ---------------------------------

PTRACE = r"""
import ctypes, os, sys
def stat(p):
    return open(f"/proc/{p}/stat", "rb").read().rpartition(b")")[2].split()
pid = str(os.getppid())  # the Rocklet is our nearest ancestor running ale_rock.rocklet
while b"ale_rock.rocklet" not in open(f"/proc/{pid}/cmdline", "rb").read():
    pid = stat(pid)[1].decode()
libc = ctypes.CDLL(None, use_errno=True)
print("pid", pid)
print("own-environ", len(open("/proc/self/environ", "rb").read()) > 0)
try:
    print("environ", len(open(f"/proc/{pid}/environ", "rb").read()))
except OSError as e:
    print("environ-denied", e.errno)
try:
    open(f"/proc/{pid}/mem", "rb").close(); print("mem-opened")
except OSError as e:
    print("mem-denied", e.errno)
if libc.ptrace(16, int(pid), 0, 0) == 0:  # PTRACE_ATTACH
    print("attached"); libc.ptrace(17, int(pid), 0, 0)  # PTRACE_DETACH
else:
    print("attach-denied", ctypes.get_errno())
"""


def test_a_command_cannot_ptrace_or_read_its_rocklet(box: Box) -> None:
    r = box.sh("exec /usr/bin/python3 -", stdin=PTRACE.encode())
    out = r.stdout.decode()
    assert r.exit_code == 0, r
    assert "own-environ True" in out  # reading /proc works in general…
    assert "environ-denied" in out, out  # …but not the Rocklet's
    assert "mem-denied" in out, out
    assert "attach-denied" in out and "attached" not in out.replace("attach-denied", ""), out
    assert box.sh("echo ok").stdout == b"ok\n"  # and the Rocklet still works


# -- finding 12: garbage requests ----------------------------------------------------------------


@pytest.mark.parametrize("method", ["Exec", "ReadFile", "GetInfo"])
def test_garbage_request_bytes_get_invalid_argument(box: Box, method: str) -> None:
    call = box.channel.unary_unary(f"/ale.v1.RockletService/{method}")
    with pytest.raises(grpc.RpcError) as e:
        call(b"\xff\xff\xff", timeout=10)  # not a protobuf message at all
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value
    assert box.sh("echo ok").stdout == b"ok\n"


def test_garbage_upload_stream_gets_invalid_argument(box: Box) -> None:
    call = box.channel.stream_unary("/ale.v1.RockletService/UploadFile")
    with pytest.raises(grpc.RpcError) as e:
        call(iter([b"\xff\xff\xff"]), timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value


# -- the same on the Docker backend ---------------------------------------------------------------


@pytest.mark.docker
def test_docker_1g_of_output_leaves_the_rocklet_alive(docker_box: Box) -> None:
    test_1g_of_output_neither_kills_the_rocklet_nor_fills_its_memory(docker_box)


@pytest.mark.docker
def test_docker_timeout_kills_every_descendant_even_setsid_ones(docker_box: Box) -> None:
    test_timeout_kills_every_descendant_even_setsid_ones(docker_box)


@pytest.mark.docker
def test_docker_a_command_cannot_ptrace_or_read_its_rocklet(docker_box: Box) -> None:
    test_a_command_cannot_ptrace_or_read_its_rocklet(docker_box)


def test_a_memory_bomb_is_killed_not_the_rocklet_and_the_result_says_so(box: Box) -> None:
    # Touch every page: 512 MiB in a 256 MiB sandbox. Commands run at oom_score_adj 1000, so the
    # OOM killer takes the command.
    r = box.sh("exec /usr/bin/python3 -c 'x = bytearray(512 << 20); print(len(x))'", timeout_ms=30000)
    assert r.signal == 9 and r.oom_killed, r
    assert box.sh("cat /proc/self/oom_score_adj").stdout == b"1000\n"
    assert box.sh("echo alive").stdout == b"alive\n"


@pytest.mark.docker
def test_docker_a_memory_bomb_is_killed_not_the_rocklet(docker_box: Box) -> None:
    test_a_memory_bomb_is_killed_not_the_rocklet_and_the_result_says_so(docker_box)


# -- what an agent leaves running is gone before its tests run (test_redteam_verifier.py) ---------


def _left_running(b: Box, pattern: str) -> list[str]:
    """pid + command line of every process whose command line matches ``pattern`` (a grep -E
    written so that it does not match its own command line)."""
    r = b.sh("for f in /proc/[0-9]*/cmdline; do d=${f%/cmdline}; echo \"${d#/proc/} $(tr '\\0' ' ' < $f 2>/dev/null)\"; "
             f"done | grep -E '{pattern}'")
    return [line for line in r.stdout.decode().splitlines() if line.strip()]


def test_kill_all_leaves_nothing_but_the_rocklet(box: Box) -> None:
    from ale_proto.errors import error_detail_of
    from ale_proto.v1 import common_pb2, rocklet_pb2

    # A fork loop in a session of its own, a double-forked sleeper with a scrubbed environment (no
    # tag for the timeout sweep), a background job of a shell session, and a command in flight.
    started = box.sh("setsid sh -c 'while :; do sleep 0.05 & sleep 0.01; done' >/dev/null 2>&1 < /dev/null & "
                     "( env -i /bin/sleep 1001 >/dev/null 2>&1 < /dev/null & ) ; echo started")
    assert started.stdout == b"started\n"
    sid = box.stub.CreateSession(rocklet_pb2.RockletServiceCreateSessionRequest(spec=sandbox_pb2.SessionSpec())).session_id
    box.stub.RunInSession(rocklet_pb2.RockletServiceRunInSessionRequest(
        session_id=sid, command=sandbox_pb2.SessionCommand(command="sleep 1002 &")), timeout=30)
    in_flight: list = []
    t = threading.Thread(target=lambda: in_flight.append(box.sh("sleep 1003", timeout_ms=60000)))
    t.start()
    pattern = "slee[p] (0|100[123])|whil[e] :"
    deadline = time.monotonic() + 10
    while len(_left_running(box, pattern)) < 4 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(_left_running(box, pattern)) >= 4, _left_running(box, pattern)

    assert box.stub.SignalProcess(rocklet_pb2.RockletServiceSignalProcessRequest(all_processes=True), timeout=30).delivered
    t.join(30)
    assert in_flight and in_flight[0].end_reason == sandbox_pb2.EXEC_END_REASON_INTERRUPTED, in_flight
    time.sleep(0.5)  # a survivor of the fork loop would have forked again by now
    assert _left_running(box, pattern) == []
    assert box.sh("echo alive").stdout == b"alive\n"  # the Rocklet itself serves on
    # Nothing left: nothing killed. Only SIGKILL, and all_processes is a target of its own.
    assert not box.stub.SignalProcess(rocklet_pb2.RockletServiceSignalProcessRequest(all_processes=True)).delivered
    for bad, field in (({"signal": 15}, "signal"), ({"pid": 5}, "exec_id")):
        with pytest.raises(grpc.RpcError) as e:
            box.stub.SignalProcess(rocklet_pb2.RockletServiceSignalProcessRequest(all_processes=True, **bad))
        detail = error_detail_of(e.value)
        assert detail.code == common_pb2.ERROR_CODE_INVALID_ARGUMENT and detail.field == field, detail


@pytest.mark.docker
def test_docker_kill_all_leaves_nothing_but_the_rocklet(docker_box: Box) -> None:
    test_kill_all_leaves_nothing_but_the_rocklet(docker_box)
