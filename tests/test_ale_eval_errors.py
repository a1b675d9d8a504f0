"""`ale eval` against a broken model is not a score: through the real stack (LocalCluster,
bubblewrap sandboxes, ModelProxy, ale-flow inside the sandbox), a real HTTP server on loopback that
answers every call 401, and an InferenceService address where nothing listens. Each episode is an
error of its kind (not FAIL), Pass@1 is not 0%, and the command exits 3 (every episode errored)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ale_proto.serving import free_port
from ale_rock.testing.openai import RefusingOpenAI
from typer.testing import CliRunner

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (apt bubblewrap) is not installed")

TASK = "binary-search-bounds"


@pytest.fixture()
def unauthorized() -> Iterator[RefusingOpenAI]:
    with RefusingOpenAI() as fake:
        yield fake


def _eval(tmp_path: Path, *upstream: str) -> tuple[Any, dict[str, Any]]:
    from ale.cli import app

    out = tmp_path / "eval"
    args = ["eval", *upstream, "--task", TASK, "--runs", "1", "--concurrency", "1", "--max-turns", "2",
            "--task-timeout", "60", "--out", str(out)]  # fmt: skip
    r = CliRunner().invoke(app, args)
    return r, json.loads((out / "results.json").read_text())


def _assert_all_errored(r: Any, res: dict[str, Any], kind: str) -> None:
    assert r.exit_code == 3, r.output
    assert "ERROR " + kind in r.output and "FAIL" not in r.output and "0.0%" not in r.output, r.output
    assert "every episode errored" in r.output
    assert res["pass_at_1"] is None and (res["episodes"], res["errors"], res["failures"], res["scored"]) == (1, 1, 0, 0)
    assert res["errors_by_kind"] == {kind: 1} and res["sandboxes_left"] == 0
    (task,) = res["tasks"]
    assert (task["errors"], task["failures"], task["pass_at_1"]) == (1, 0, None)
    assert task["runs"][0]["status"] == "error" and task["runs"][0]["error_kind"] == kind
    assert task["runs"][0]["tests"] == []  # a broken model is not scored by the hidden tests


def test_an_unauthorized_endpoint_is_an_error_and_exits_3(unauthorized: RefusingOpenAI, tmp_path: Path) -> None:
    r, res = _eval(tmp_path, "--base-url", unauthorized.url, "--model", "m", "--api-key", "wrong-key")
    assert unauthorized.calls >= 1  # the model was really asked, and refused
    _assert_all_errored(r, res, "model_unauthorized")


def test_an_unreachable_inference_address_is_an_error_and_exits_3(tmp_path: Path) -> None:
    closed = f"127.0.0.1:{free_port()}"  # a port nothing listens on
    r, res = _eval(tmp_path, "--inference-address", closed)
    _assert_all_errored(r, res, "model_unreachable")
