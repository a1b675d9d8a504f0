"""The exec engine: timeouts with partial output, interrupts, caps, background processes."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from ale_rock.rocklet.exec import ExecEngine
from ale_rock.rocklet.types import EndReason, ExecRequest, RockletError


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] != "Z"


def test_exit_code_stdout_stderr(engine: ExecEngine) -> None:
    r = engine.run(ExecRequest(command="echo out; echo err >&2; exit 3"))
    assert (r.end_reason, r.exit_code, r.stdout, r.stderr) == (EndReason.EXITED, 3, b"out\n", b"err\n")
    assert r.exec_id.startswith("ex-") and r.pid > 0


def test_argv_env_cwd_stdin(engine: ExecEngine, tmp_path: Path) -> None:
    r = engine.run(
        ExecRequest(
            argv=["/bin/sh", "-c", 'echo "$FOO"; pwd; cat'],
            env={"FOO": "bar"},
            cwd=str(tmp_path),
            stdin=b"in",
        )
    )
    assert r.stdout == f"bar\n{tmp_path}\nin".encode()


def test_relative_cwd_is_under_workdir(engine: ExecEngine, workdir: Path) -> None:
    (workdir / "sub").mkdir()
    assert engine.run(ExecRequest(command="pwd", cwd="sub")).stdout == f"{workdir}/sub\n".encode()


def test_hard_timeout_keeps_partial_output(engine: ExecEngine) -> None:
    r = engine.run(ExecRequest(command="echo started; sleep 30; echo never", timeout_ms=300))
    assert r.end_reason == EndReason.TIMEOUT
    assert r.stdout == b"started\n"
    assert r.duration_s < 10


def test_idle_timeout_separate_from_hard_timeout(engine: ExecEngine) -> None:
    # Prints steadily for a while (no idle timeout), then goes quiet.
    r = engine.run(
        ExecRequest(
            command="for i in 1 2 3 4 5; do echo $i; sleep 0.1; done; sleep 30",
            idle_timeout_ms=700,
            timeout_ms=20000,
        )
    )
    assert r.end_reason == EndReason.IDLE_TIMEOUT
    assert r.stdout == b"1\n2\n3\n4\n5\n"


def test_command_ignoring_sigterm_is_killed(engine: ExecEngine) -> None:
    r = engine.run(ExecRequest(command="trap '' TERM; echo stubborn; sleep 30", timeout_ms=200))
    assert r.end_reason == EndReason.TIMEOUT
    assert r.signal == signal.SIGKILL and r.exit_code == 128 + signal.SIGKILL
    assert r.stdout == b"stubborn\n"


def test_timeout_kills_the_whole_tree(engine: ExecEngine, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    r = engine.run(ExecRequest(command=f"sleep 60 & echo $! > {pidfile}; wait", timeout_ms=300))
    assert r.end_reason == EndReason.TIMEOUT
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def _interrupted_run(engine: ExecEngine, by_pid: bool):
    started = threading.Event()
    pid_box: list[int] = []

    def on_start(pid: int, exec_id: str) -> None:
        pid_box.append(pid)
        started.set()

    result: list = []
    t = threading.Thread(
        target=lambda: result.append(
            engine.run(ExecRequest(command="exec sleep 30", exec_id="job-1"), on_start=on_start)
        )
    )
    t.start()
    assert started.wait(10)
    time.sleep(0.1)
    delivered = (
        engine.signal(pid=pid_box[0], sig=signal.SIGINT)
        if by_pid
        else engine.signal("job-1", sig=signal.SIGINT)
    )
    t.join(10)
    return delivered, result[0]


@pytest.mark.parametrize("by_pid", [False, True])
def test_interrupt_by_exec_id_and_pid(engine: ExecEngine, by_pid: bool) -> None:
    delivered, result = _interrupted_run(engine, by_pid)
    assert delivered
    assert result.end_reason == EndReason.INTERRUPTED
    assert result.signal == signal.SIGINT


def test_signal_unknown_targets(engine: ExecEngine) -> None:
    with pytest.raises(RockletError) as e:
        engine.signal("nope")
    assert e.value.kind == "not_found" and e.value.field == "exec_id"
    with pytest.raises(RockletError) as e:
        engine.signal(pid=1)
    assert e.value.field == "pid"


def test_output_cap_spills_rest_to_file(engine: ExecEngine) -> None:
    r = engine.run(
        ExecRequest(command="head -c 300000 /dev/zero | tr '\\0' a; echo -n END", max_output_bytes=1000)
    )
    assert len(r.stdout) == 1000 and r.stdout_truncated and not r.stderr_truncated
    spilled = Path(r.stdout_spill_path).read_bytes()
    assert len(spilled) == 300003 and spilled.endswith(b"END")


def test_background_survives_between_calls_and_can_be_signalled(engine: ExecEngine) -> None:
    r = engine.run(ExecRequest(command="echo up; exec sleep 60", background=True, exec_id="bg-1"))
    assert r.end_reason == EndReason.BACKGROUND and r.pid > 0
    time.sleep(0.3)
    assert engine.run(ExecRequest(command="echo other")).stdout == b"other\n"
    assert _alive(r.pid)
    assert Path(r.stdout_spill_path).read_bytes() == b"up\n"
    assert "bg-1" in engine.running_ids()
    assert engine.signal("bg-1", sig=signal.SIGTERM)
    deadline = time.monotonic() + 5
    while _alive(r.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(r.pid)


def test_start_failure_is_typed(engine: ExecEngine) -> None:
    r = engine.run(ExecRequest(argv=["/no/such/program"]))
    assert r.end_reason == EndReason.START_FAILED and "No such file" in r.error
    r = engine.run(ExecRequest(command="true", cwd="/no/such/dir"))
    assert r.end_reason == EndReason.START_FAILED


@pytest.mark.parametrize(
    ("req", "field"),
    [
        (ExecRequest(), "spec.command"),
        (ExecRequest(command="a", argv=["b"]), "spec.command"),
        (ExecRequest(command="x" * (2 << 20)), "spec.command"),
        (ExecRequest(command="echo \0"), "spec.command"),
        (ExecRequest(command="true", env={"A=B": "c"}), "spec.env"),
        (ExecRequest(command="true", exec_id="bad id!"), "exec_id"),
    ],
)
def test_bad_requests_name_the_field(engine: ExecEngine, req: ExecRequest, field: str) -> None:
    with pytest.raises(RockletError) as e:
        engine.run(req)
    assert e.value.kind == "invalid" and e.value.field == field


def test_duplicate_running_exec_id(engine: ExecEngine) -> None:
    engine.run(ExecRequest(command="sleep 30", background=True, exec_id="dup"))
    with pytest.raises(RockletError) as e:
        engine.run(ExecRequest(command="true", exec_id="dup"))
    assert e.value.kind == "exists"
    engine.signal("dup", sig=signal.SIGKILL)
