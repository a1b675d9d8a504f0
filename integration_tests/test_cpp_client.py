"""The C++ example client (examples/cpp, built from Debian's gRPC packages) drives a sandbox on a
live admin + worker over the same .proto files: create, exec ``echo``, write + read a file, stop;
typed errors; Struct kwargs/info on the EnvService."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CPP_DIR = ROOT / "examples" / "cpp"
# Cached across runs (make rebuilds only when client.cc or a .proto changed), so CI compiles once.
BUILD = ROOT / ".cache" / "cpp-client"
TOOLS = ("make", "g++", "protoc", "grpc_cpp_plugin", "pkg-config")


@pytest.fixture(scope="module")
def client_binary() -> Path:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} missing: run `make setup` (scripts/setup.sh installs them)")
    r = subprocess.run(["make", "-s", f"-j{os.cpu_count() or 2}", "-C", str(CPP_DIR), f"BUILD={BUILD}"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return BUILD / "ale_client"


def run(binary: Path, endpoints: dict[str, object], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary), "--target", str(endpoints["admin_address"]),
                           "--api-key", str(endpoints["api_key"]), *args],
                          capture_output=True, text=True, timeout=120)


def test_cpp_client_create_exec_read_stop(client_binary: Path, live_stack: dict[str, object]) -> None:
    # The worker registers shortly after it is healthy: retry only while no worker can take it.
    deadline = time.monotonic() + 60
    while True:
        r = run(client_binary, live_stack, "--text", "hi from c++")
        if r.returncode == 0 or time.monotonic() > deadline:
            break
        assert '"method": "CreateSandbox"' in r.stderr, r.stderr
        time.sleep(0.5)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["id"].startswith("sb-") and out["created_state"] == "SANDBOX_STATE_RUNNING"
    assert out["exit_code"] == 0 and out["stdout"] == "hi from c++\n"
    assert out["file"] == "hi from c++\n" and out["file_size"] == len("hi from c++\n") and out["eof"] is True
    assert out["stopped_state"] == "SANDBOX_STATE_STOPPED"


def test_cpp_client_reads_typed_errors(client_binary: Path, live_stack: dict[str, object]) -> None:
    r = run(client_binary, {**live_stack, "api_key": "wrong"})
    assert r.returncode == 2
    err = json.loads(r.stderr)["error"]
    assert err["method"] == "CreateSandbox" and err["code"] == "ERROR_CODE_UNAUTHENTICATED", err
    assert err["grpc_status"] == 16  # UNAUTHENTICATED


def test_cpp_client_struct_kwargs_and_info(client_binary: Path, live_stack: dict[str, object]) -> None:
    """google.protobuf.Struct both ways in C++ (protobuf's JSON utilities, as docs/clients.md says):
    kwargs reach the game's constructor and the info dict comes back as the game's own."""
    from ale_rock.envs import make

    kwargs = {"max_number": 100, "max_turns": 7}
    r = run(client_binary, live_stack, "--env", "game:GuessTheNumber-v0", "--kwargs", json.dumps(kwargs),
            "--seed", "3")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    obs, info = make("game:GuessTheNumber-v0", **kwargs).reset(seed=3)
    assert out == {"observation": obs, "info": info} and "between 1 and 100" in obs
