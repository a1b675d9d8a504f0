"""Episode keys without a hand-written gRPC client: the authenticated HTTP admin routes, and
``ale-rock proxy episode open|close`` (in-process CLI against a real proxy)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import httpx
import pytest
from ale_rock.cli import app
from ale_rock.proxy import load_records
from typer.testing import CliRunner

openai = pytest.importorskip("openai")
TOKEN = "admin-s3cret"


@pytest.fixture()
def admin_proxy(tiny_inference: tuple[str, Any]) -> Any:
    from ale_rock.proxy import ModelProxyConfig, serve_model_proxy

    srv = serve_model_proxy(ModelProxyConfig(admin_token=TOKEN, default_target=tiny_inference[0],
                                             default_model="tiny"))
    yield srv
    srv.stop(0)


def test_http_admin_route_hands_out_episode_keys(admin_proxy: Any, proxy_server: Any) -> None:
    url = admin_proxy.http_url + "/admin/v1/episodes"
    with httpx.Client(timeout=30) as h:
        assert h.post(url, json={}).status_code == 401
        assert h.post(url, json={}, headers={"Authorization": "Bearer wrong"}).status_code == 401
        # A proxy started without an admin token has the routes off.
        assert h.post(proxy_server.http_url + "/admin/v1/episodes", json={},
                      headers={"Authorization": "Bearer x"}).status_code == 403
        auth = {"Authorization": f"Bearer {TOKEN}"}
        bad = h.post(url, json={"max_calls": "x"}, headers=auth)
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "max_calls"
        ep = h.post(url, json={"episode_id": "ep-http", "max_calls": 2}, headers=auth).json()
        assert ep["base_url"] == f"{admin_proxy.http_url}/e/ep-http/v1" and ep["model"] == "tiny"
        assert h.post(url, json={"episode_id": "ep-http"}, headers=auth).status_code == 409
        c = openai.OpenAI(base_url=ep["base_url"], api_key=ep["api_key"], max_retries=0, timeout=30)
        c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
        closed = h.post(f"{url}/ep-http/close", headers=auth)
        assert closed.json() == {"episode_id": "ep-http", "calls": 1}
        with pytest.raises(openai.AuthenticationError):  # the key died with the episode
            c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}])
        recs = h.get(f"{url}/ep-http/records", headers=auth).json()
        assert recs["closed"] and [r["index"] for r in recs["records"]] == [0]
        assert recs["records"][0]["prompt_token_ids"]
        assert h.get(f"{url}/ep-http/records").status_code == 401
        assert h.post(f"{url}/nope/close", headers=auth).status_code == 404


def test_cli_episode_open_and_close(admin_proxy: Any, tmp_path: Path) -> None:
    runner = CliRunner()
    env = {"ALE_PROXY_ADDRESS": admin_proxy.grpc_address}
    out = runner.invoke(app, ["proxy", "episode", "open", "--id", "ep-cli", "--max-calls", "5"], env=env)
    assert out.exit_code == 0, out.output
    exports = dict(shlex.split(line.removeprefix("export "))[0].split("=", 1) for line in out.output.splitlines())
    assert exports["ALE_EPISODE_ID"] == "ep-cli" and exports["OPENAI_BASE_URL"].endswith("/e/ep-cli/v1")
    c = openai.OpenAI(base_url=exports["OPENAI_BASE_URL"], api_key=exports["OPENAI_API_KEY"], max_retries=0)
    c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    again = runner.invoke(app, ["proxy", "episode", "open", "--id", "ep-cli"], env=env)
    assert again.exit_code == 1 and "exists" in again.output
    path = tmp_path / "recs.jsonl"
    out = runner.invoke(app, ["proxy", "episode", "close", "ep-cli", "--records", str(path)], env=env)
    assert out.exit_code == 0 and "1 calls" in out.output, out.output
    (rec,) = load_records(path)
    assert rec.episode_id == "ep-cli" and rec.completion_token_ids
    assert runner.invoke(app, ["proxy", "episode", "close", "ep-cli"]).exit_code == 2  # no address
