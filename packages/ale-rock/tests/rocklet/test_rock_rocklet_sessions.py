"""Persistent shell sessions: state across calls, sentinels, interrupts, interactive input."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest
from ale_rock.rocklet.sessions import SessionManager
from ale_rock.rocklet.types import EndReason, RockletError


def test_cwd_and_variables_persist(sessions: SessionManager, tmp_path: Path) -> None:
    sid = sessions.create()
    r = sessions.run(sid, f"cd {tmp_path}; X=42; false")
    assert r.end_reason == EndReason.EXITED and r.exit_code == 1
    assert sessions.run(sid, "pwd; echo $X").stdout == f"{tmp_path}\n42\n".encode()


def test_multiline_and_no_trailing_newline(sessions: SessionManager) -> None:
    sid = sessions.create(session_id="multi")
    assert sid == "multi"
    assert sessions.run(sid, "for i in 1 2; do\n echo $i\ndone").stdout == b"1\n2\n"
    assert sessions.run(sid, "printf partial").stdout == b"partial"


def test_output_cannot_fake_the_sentinel(sessions: SessionManager) -> None:
    sid = sessions.create()
    r = sessions.run(sid, r"printf '\036ALE0000000000000000:0\036\n'; echo real; exit_code=7; (exit 7)")
    assert r.exit_code == 7 and b"real" in r.stdout


def test_timeout_interrupts_foreground_job_and_session_survives(sessions: SessionManager) -> None:
    sid = sessions.create()
    r = sessions.run(sid, "echo before; sleep 30", timeout_ms=500)
    assert r.end_reason == EndReason.TIMEOUT and b"before" in r.stdout
    assert sessions.run(sid, "echo after").stdout == b"after\n"


def test_idle_timeout(sessions: SessionManager) -> None:
    sid = sessions.create()
    r = sessions.run(sid, "echo a; sleep 30", idle_timeout_ms=400)
    assert r.end_reason == EndReason.IDLE_TIMEOUT and r.stdout.startswith(b"a\n")


def test_signal_foreground_sleep(sessions: SessionManager) -> None:
    sid = sessions.create()
    assert not sessions.signal(sid, signal.SIGINT)  # nothing in front yet

    def interrupt() -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not sessions.signal(sid, signal.SIGINT):
            time.sleep(0.05)

    t = threading.Thread(target=interrupt)
    t.start()
    started = time.monotonic()
    r = sessions.run(sid, "sleep 30")
    t.join()
    assert r.end_reason == EndReason.INTERRUPTED and r.exit_code == 130 and time.monotonic() - started < 15
    assert sessions.run(sid, "echo ok").stdout == b"ok\n"


def test_send_input_and_read_output(sessions: SessionManager) -> None:
    sid = sessions.create()
    s = sessions.get(sid)
    s.send(b"read v; echo got=$v\n")
    s.send(b"hello\n")
    out = b""
    deadline = time.monotonic() + 10
    while b"got=hello" not in out and time.monotonic() < deadline:
        out += s.read(500)[0]
    assert b"got=hello" in out


def test_output_cap_in_session(sessions: SessionManager) -> None:
    sid = sessions.create()
    r = sessions.run(sid, "seq 1 20000", max_output=100)
    assert len(r.stdout) == 100 and r.stdout_truncated
    assert Path(r.stdout_spill_path).read_bytes().endswith(b"20000\n")


def test_close_and_errors(sessions: SessionManager) -> None:
    sid = sessions.create()
    sessions.close(sid)
    with pytest.raises(RockletError) as e:
        sessions.run(sid, "true")
    assert e.value.kind == "not_found" and e.value.field == "session_id"
    with pytest.raises(RockletError) as e:
        sessions.create(session_id="bad id")
    assert e.value.field == "spec.session_id"
    with pytest.raises(RockletError) as e:
        sessions.create(shell="relative/sh")
    assert e.value.field == "spec.shell"


def test_exit_closes_session(sessions: SessionManager) -> None:
    sid = sessions.create()
    r = sessions.run(sid, "exit 3", timeout_ms=5000)
    assert (r.end_reason, r.exit_code) == (EndReason.EXITED, 3)
    assert sessions.get(sid).read(1000)[1] is True


def _flaky_shell(tmp_path: Path, failures: int) -> str:
    """A shell that prints ``boom`` and exits 7 on its first ``failures`` starts, then is bash."""
    script = tmp_path / "flaky-shell"
    script.write_text(
        "#!/bin/sh\n"
        f'n=$(cat {tmp_path}/starts 2>/dev/null || echo 0); echo $((n + 1)) > {tmp_path}/starts\n'
        f'if [ "$n" -lt {failures} ]; then echo boom; exit 7; fi\n'
        "exec /bin/bash --norc --noprofile --noediting -i\n"
    )
    script.chmod(0o755)
    return str(script)


def test_a_shell_that_fails_to_come_up_once_is_started_again(sessions: SessionManager, tmp_path: Path) -> None:
    sid = sessions.create(shell=_flaky_shell(tmp_path, failures=1))
    assert (tmp_path / "starts").read_text().strip() == "2"
    assert sessions.run(sid, "echo $((6 * 7))").stdout == b"42\n"


def test_a_shell_that_never_comes_up_says_how_it_failed(sessions: SessionManager, tmp_path: Path) -> None:
    with pytest.raises(RockletError) as e:
        sessions.create(shell=_flaky_shell(tmp_path, failures=99))
    assert "exited with 7" in e.value.message and "boom" in e.value.message, e.value.message
    assert e.value.field == "spec.shell"
    assert (tmp_path / "starts").read_text().strip() == "2"  # one retry, no more
