"""``ale-rock proxy`` as a real process in front of a fake OpenAI-compatible server (real HTTP):
health and reflection on gRPC, one chat completion through an episode, SIGTERM → exit 0."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import grpc
from ale_proto.serving import free_port
from ale_proto.v1 import model_proxy_pb2, model_proxy_pb2_grpc
from ale_rock.cli import app
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from typer.testing import CliRunner


def argv() -> list[str]:
    script = Path(sys.executable).with_name("ale-rock")  # the installed console script
    return [str(script)] if script.exists() else [sys.executable, "-m", "ale_rock.cli"]


def read_line(proc: subprocess.Popen[str], timeout: float = 60.0) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "the proxy printed nothing in time"
    return proc.stdout.readline()


def test_proxy_process_serves_health_and_a_chat_then_stops_on_sigterm(openai_upstream: Any, tmp_path: Path) -> None:
    grpc_port, http_port = free_port(), free_port()
    env_key = {"ALE_PROXY_UPSTREAM_API_KEY": "upstream-secret"}
    proc = subprocess.Popen(
        [*argv(), "proxy", "--host", "127.0.0.1", "--grpc-port", str(grpc_port), "--http-port", str(http_port),
         "--base-url", openai_upstream.url, "--model", "fake-model"],
        stdout=subprocess.PIPE, stderr=(tmp_path / "proxy.log").open("w"), text=True,
        env={**os.environ, **env_key},
    )
    try:
        line = read_line(proc)
        assert f"grpc 127.0.0.1:{grpc_port}" in line and f"http://127.0.0.1:{http_port}" in line, line
        assert re.search(r"upstream: openai http://127\.0\.0\.1:\d+/v1", line), line

        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as ch:
            health = health_pb2_grpc.HealthStub(ch)
            for service in ("", "ale.v1.ModelProxyService"):
                status = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status
                assert status == health_pb2.HealthCheckResponse.SERVING
            listing = reflection_pb2_grpc.ServerReflectionStub(ch).ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10)
            names = {s.name for r in listing for s in r.list_services_response.service}
            assert "ale.v1.ModelProxyService" in names

            stub = model_proxy_pb2_grpc.ModelProxyServiceStub(ch)
            ep = stub.OpenEpisode(model_proxy_pb2.OpenEpisodeRequest(episode_id="ep-1"), timeout=10)
            assert ep.base_url == f"http://127.0.0.1:{http_port}/e/ep-1/v1"
            request = urllib.request.Request(
                ep.base_url + "/chat/completions",
                data=json.dumps({"messages": [{"role": "user", "content": "hi proxy"}]}).encode(),
                headers={"Authorization": f"Bearer {ep.api_key}", "Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=30) as resp:
                reply = json.loads(resp.read())
            assert reply["choices"][0]["message"]["content"] == "echo: hi proxy"
            assert reply["model"] == "fake-model"
            assert stub.CloseEpisode(model_proxy_pb2.CloseEpisodeRequest(episode_id="ep-1"), timeout=10).calls == 1

        [(path, auth, body)] = openai_upstream.seen
        assert (path, auth, body["model"]) == ("/v1/chat/completions", "Bearer upstream-secret", "fake-model")

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_proxy_refuses_two_upstreams() -> None:
    result = CliRunner().invoke(
        app, ["proxy", "--inference-address", "127.0.0.1:1", "--base-url", "http://127.0.0.1:2/v1"])
    assert result.exit_code == 2
    assert "not both" in result.output
