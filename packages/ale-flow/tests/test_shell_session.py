"""LocalShellSession: how the shell starts (signals, a gRPC process around it)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from concurrent import futures

import grpc
from ale_flow.shell_session import LocalShellSession


def test_ctrl_c_stops_a_command_even_when_the_parent_ignores_sigint(tmp_path):
    # A worker started with `cmd &` inherits SIGINT as ignored; bash cannot un-ignore it, so
    # without the reset a timed-out command survives Ctrl-C and is SIGKILLed (137) after the grace.
    code = textwrap.dedent(
        f"""
        import signal
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        from ale_flow.shell_session import LocalShellSession
        s = LocalShellSession({str(tmp_path)!r})
        r = s.run("sleep 30", 1.0, 1 << 16)
        print(r.end, r.exit_code)
        s.close()
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["timeout", "130"]  # 128 + SIGINT: the Ctrl-C itself stopped it


def test_sessions_start_while_grpc_threads_are_busy_in_the_same_process(tmp_path):
    # The Flow service runs agents inside a gRPC server. A shell started with a Python
    # preexec_fn forked with gRPC's locks held and aborted in the child (CI, 2026-12-01).
    def echo(request: bytes, context: grpc.ServicerContext) -> bytes:
        return request

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    handler = grpc.method_handlers_generic_handler("t.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)})
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    stop = threading.Event()

    def hammer() -> None:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            call = ch.unary_unary("/t.Echo/Echo")
            while not stop.is_set():
                call(b"x", timeout=10)

    threads = [threading.Thread(target=hammer, daemon=True) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for i in range(25):
            s = LocalShellSession(str(tmp_path))
            try:
                r = s.run(f"echo ok{i}", 10.0, 1 << 16)
                assert (r.end, r.exit_code, r.output) == ("exited", 0, f"ok{i}\n".encode())
            finally:
                s.close()
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)
        server.stop(None)
