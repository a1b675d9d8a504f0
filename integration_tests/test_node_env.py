"""The Node.js example client plays a text game on the EnvService the live Admin hosts on its own
port (authenticated with the Admin's API key), and sees exactly what the same game in-process shows."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

NODE_DIR = Path(__file__).resolve().parents[1] / "examples" / "node"
GAME = "game:GuessTheNumber-v0"


def node_env(stack: dict[str, Any], *args: str, key: str | None = None) -> subprocess.CompletedProcess[str]:
    cmd = ["node", str(NODE_DIR / "client.js"), "--target", str(stack["admin_address"]),
           "--api-key", key if key is not None else str(stack["api_key"]), "env", "make", GAME, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def stack(live_stack: dict[str, Any]) -> dict[str, Any]:
    if shutil.which("node") is None or not (NODE_DIR / "node_modules").exists():
        pytest.fail("node and examples/node/node_modules are required: run `make setup`")
    return live_stack


def in_process(seed: int, actions: list[str]) -> tuple[str, list[tuple[str, float, bool, bool]]]:
    from ale_rock.envs import make

    env = make(GAME)
    obs, _ = env.reset(seed=seed)
    steps = []
    for a in actions:
        o, r, term, trunc, _ = env.step(a)
        steps.append((o, float(r), term, trunc))
        if term or trunc:
            break
    return obs, steps


def test_node_plays_the_admin_hosted_game(stack: dict[str, Any]) -> None:
    r = node_env(stack, "--seed", "3", "--step", "10", "--step", "\\boxed{5}")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    obs, steps = in_process(3, ["10", "\\boxed{5}"])
    assert out["observation"] == obs and "between 1 and 20" in obs
    got = [(s["observation"], s["reward"], s["terminated"], s["truncated"]) for s in out["steps"]]
    assert got == steps
    # Finish the game from Node: bisect on the hints the service returns, then win with reward 1.
    lo, hi, guesses = 1, 20, []
    for _ in range(5):
        guesses.append(str((lo + hi) // 2))
        r = node_env(stack, "--seed", "3", *[x for g in guesses for x in ("--step", g)])
        assert r.returncode == 0, r.stderr
        last = json.loads(r.stdout)["steps"][-1]
        if last["terminated"]:
            break
        lo, hi = (int(guesses[-1]) + 1, hi) if "higher" in last["observation"] else (lo, int(guesses[-1]) - 1)
    assert last["terminated"] and last["reward"] == 1.0
    assert re.search(r"Correct! The number was \d+", last["observation"])


def test_node_env_needs_the_admin_api_key(stack: dict[str, Any]) -> None:
    r = node_env(stack, "--seed", "3", key="wrong")
    assert r.returncode != 0
    assert json.loads(r.stderr)["error"]["code"] == "ERROR_CODE_UNAUTHENTICATED"
