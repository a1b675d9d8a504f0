"""The ale-flow agent's start inside a sandbox: its zip carries bytecode that zipimport loads
without compiling, and the OpenAI client to a plain-http proxy loads no CA store."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from ale.eval import agent


def test_the_zip_runs_from_bytecode_without_writing_any(tmp_path: Path) -> None:
    z = tmp_path / "ale_flow.zip"
    z.write_bytes(agent.agent_zip())
    code = ("import sys, ale_flow.cli, ale_flow.models.openai as m; "
            "print(m.__file__); print(sorted({x.__file__[-4:] for n, x in sys.modules.items() "
            "if n.startswith('ale_flow') and getattr(x, '__file__', None)}))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                       env={"PYTHONPATH": str(z), "PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    origin, kinds = r.stdout.splitlines()
    # Every ale-flow module came from the zip's .pyc (none compiled from its .py).
    assert origin == f"{z}/ale_flow/models/openai.pyc" and kinds == "['.pyc']", r.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ale_flow.zip"]


def test_a_bytecode_of_another_python_falls_back_to_the_source(tmp_path: Path) -> None:
    import io
    import zipfile

    src = io.BytesIO(agent.agent_zip())
    out = io.BytesIO()
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item)
            zout.writestr(item, b"\0\0\r\n" + data[4:] if item.filename.endswith(".pyc") else data)
    (tmp_path / "z.zip").write_bytes(out.getvalue())
    r = subprocess.run([sys.executable, "-c", "import ale_flow.cli; print(ale_flow.cli.__file__)"],
                       capture_output=True, text=True, timeout=60, env={"PYTHONPATH": str(tmp_path / "z.zip")})
    assert r.returncode == 0 and r.stdout.strip().endswith("ale_flow/cli.py"), r.stderr


def test_plain_http_skips_the_ca_store_and_https_keeps_it() -> None:
    import ssl

    from ale_flow.models.openai import OpenAIConfig, OpenAIModel

    plain = OpenAIModel(OpenAIConfig(base_url="http://model-proxy/v1", model="m"))
    tls = OpenAIModel(OpenAIConfig(base_url="https://api.example.com/v1", model="m"))
    try:
        ctx: Any = plain._client._transport._pool._ssl_context  # type: ignore[attr-defined]
        # Still verifying (an https redirect fails closed), with nothing loaded.
        assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname and ctx.cert_store_stats()["x509_ca"] == 0
        tls_ctx: Any = tls._client._transport._pool._ssl_context  # type: ignore[attr-defined]
        assert tls_ctx.cert_store_stats()["x509_ca"] > 0
    finally:
        plain.close()
        tls.close()


def test_a_detached_agent_is_seen_ending_at_once_and_late_polls_slow_down(tmp_path: Path) -> None:
    from ale_rock.envs.sandbox import LocalDirProvider

    from ale.eval.detached import DetachedExecProvider

    inner = LocalDirProvider()
    calls: list[str] = []
    real_exec = inner.exec

    def exec_(sid: str, command: str, timeout_s: float) -> Any:
        calls.append(command)
        return real_exec(sid, command, timeout_s)

    inner.exec = exec_  # type: ignore[method-assign,assignment]
    provider = DetachedExecProvider(inner, inline_s=0.5, fast_s=0.6, slow_poll_s=0.2, jobs_dir=f"{tmp_path}/jobs")
    sid = provider.create()
    try:
        out = provider.exec(sid, "sleep 0.3; echo done", 30)
        assert (out.exit_code, out.output) == (0, "done\n")
        assert out.duration_s < 0.9  # seen within a check or two (0.05 s), not at a poll a second later
        polls = [c for c in calls if c.startswith("n=0;")]
        assert len(polls) == 1 and "sleep 0.05;" in polls[0]  # one call waited for the end
        calls.clear()
        provider.exec(sid, "sleep 1.0", 30)
        polls = [c for c in calls if c.startswith("n=0;")]
        assert "sleep 0.05;" in polls[0] and "sleep 0.2;" in polls[-1]  # past fast_s, slower checks
    finally:
        provider.delete(sid)
