"""The Node.js example client drives a sandbox on a live admin + worker over the same .proto files."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

NODE_DIR = Path(__file__).resolve().parents[1] / "examples" / "node"


def node(endpoints: dict[str, object], *args: str, check: bool = True) -> dict[str, object]:
    cmd = ["node", str(NODE_DIR / "client.js"), "--target", str(endpoints["admin_address"]),
           "--api-key", str(endpoints["api_key"]), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if check:
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)
    assert r.returncode != 0
    return json.loads(r.stderr)


@pytest.fixture(scope="module")
def endpoints(live_stack):
    if shutil.which("node") is None or not (NODE_DIR / "node_modules").exists():
        pytest.fail("node and examples/node/node_modules are required: run `make setup`")
    # The worker registers shortly after it is healthy; wait until a create succeeds.
    deadline = time.monotonic() + 60
    while True:
        r = subprocess.run(
            ["node", str(NODE_DIR / "client.js"), "--target", str(live_stack["admin_address"]),
             "--api-key", str(live_stack["api_key"]), "sandbox", "create"],
            capture_output=True, text=True, timeout=120,
        )
        if r.returncode == 0:
            node(live_stack, "sandbox", "rm", json.loads(r.stdout)["id"])
            return live_stack
        assert time.monotonic() < deadline, r.stderr
        time.sleep(0.5)


def test_create_exec_rm_from_node(endpoints) -> None:
    created = node(endpoints, "sandbox", "create")
    sid = str(created["id"])
    assert sid.startswith("sb-") and created["state"] == "SANDBOX_STATE_RUNNING"
    listed = node(endpoints, "sandbox", "ls")
    assert sid in [s["id"] for s in listed["sandboxes"]]  # type: ignore[index, union-attr]
    out = node(endpoints, "sandbox", "exec", sid, "--", "sh", "-c", "echo hi from node; exit 3")
    assert out["stdout"] == "hi from node\n" and out["exit_code"] == 3
    node(endpoints, "sandbox", "rm", sid)
    listed = node(endpoints, "sandbox", "ls")
    assert sid not in [s["id"] for s in listed["sandboxes"]]  # type: ignore[index, union-attr]


def test_typed_errors_reach_node(endpoints) -> None:
    err = node(endpoints, "sandbox", "exec", "sb-000000000000", "--", "true", check=False)
    assert err["error"]["code"] == "ERROR_CODE_NOT_FOUND"  # type: ignore[index]
    err = node(endpoints, "sandbox", "exec", "not an id", "--", "true", check=False)
    assert err["error"]["code"] == "ERROR_CODE_INVALID_ARGUMENT"  # type: ignore[index]
    assert err["error"]["field"] == "sandbox_id"  # type: ignore[index]


def test_wrong_api_key_is_unauthenticated(endpoints) -> None:
    bad = {**endpoints, "api_key": "wrong"}
    err = node(bad, "sandbox", "ls", check=False)
    assert err["error"]["code"] == "ERROR_CODE_UNAUTHENTICATED"  # type: ignore[index]


def test_exec_with_6_mb_of_output_arrives_whole(endpoints) -> None:
    """grpc-js refuses responses over 4 MiB by default: the example raises its receive limit, so an
    exec with max_output_bytes 8 MiB and 6 MB of output reaches Node whole (the issue lost it)."""
    sid = str(node(endpoints, "sandbox", "create")["id"])
    try:
        big = ["sh", "-c", "head -c 6000000 /dev/zero | tr '\\0' a"]
        out = node(endpoints, "--max-output-bytes", str(8 << 20), "sandbox", "exec", sid, "--", *big)
        assert out["exit_code"] == 0 and out["stdout_truncated"] is False
        assert out["stdout"] == "a" * 6_000_000
        # With grpc-js's default limit the same response is refused client-side: the option matters.
        err = node(endpoints, "--max-output-bytes", str(8 << 20), "--max-receive-bytes", str(4 << 20),
                   "sandbox", "exec", sid, "--", *big, check=False)
        assert err["error"]["code"] == "RESOURCE_EXHAUSTED"  # type: ignore[index]
    finally:
        node(endpoints, "sandbox", "rm", sid)


def test_struct_fields_round_trip_through_node(endpoints) -> None:
    """MakeRequest.kwargs goes out and ResetResponse/StepResponse.info come back as
    google.protobuf.Struct; the example's converters give the same values as the game in-process."""
    from ale_rock.envs import make

    kwargs = {"max_number": 100, "max_turns": 7}
    out = node(endpoints, "env", "make", "game:GuessTheNumber-v0", "--kwargs", json.dumps(kwargs),
               "--seed", "3", "--step", "10")
    env = make("game:GuessTheNumber-v0", **kwargs)
    obs, info = env.reset(seed=3)
    *_, step_info = env.step("10")
    assert out["observation"] == obs and "between 1 and 100" in obs
    assert out["info"] == info and out["steps"][0]["info"] == step_info  # type: ignore[index]
