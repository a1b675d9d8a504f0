"""Bad settings given to ``ale-flow``: one line on stderr naming the file, key or variable, exit
status 2, no traceback (the loader is ale_proto.config's, shared by every ALE command)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ale_flow.cli import app
from ale_proto.testing import assert_bad_input_error
from typer.testing import CliRunner

runner = CliRunner()

CASES = [  # project settings file (None: none), environment, -c overrides, what the one line must name
    pytest.param("limits:\n  max_stepz: 3\n", {}, [],
                 ["settings.yaml", "'limits.max_stepz'", "did you mean 'limits.max_steps'"], id="file-unknown-key"),
    pytest.param("limits: {max_steps: 3\nmode: plan\n", {}, [], ["settings.yaml:2:5: invalid YAML"], id="file-bad-yaml"),
    pytest.param("mode: turbo\n", {}, [], ["settings.yaml", "mode:", "'turbo'"], id="file-bad-value"),
    pytest.param(None, {"ALE_FLOW_LIMITS__MAX_STEPS": "lots"}, [],
                 ["ALE_FLOW_LIMITS__MAX_STEPS", "limits.max_steps", "integer", "'lots'"], id="env-bad-value"),
    pytest.param(None, {"ALE_FLOW_TOOLZ__PARALLEL": "true"}, [],
                 ["ALE_FLOW_TOOLZ__PARALLEL", "unknown key 'toolz'", "did you mean 'tools'"], id="env-unknown-key"),
    pytest.param(None, {}, ["-c", "limits.max_stepz=3"],
                 ["command line", "'limits.max_stepz'", "did you mean 'limits.max_steps'"], id="override-unknown-key"),
    pytest.param(None, {}, ["-c", "tools.parallel=sometimes"], ["tools.parallel", "boolean", "'sometimes'"],
                 id="override-bad-value"),
    pytest.param(None, {}, ["-c", "tools.enabled=[shell"], ["-c", "tools.enabled=[shell", "not valid YAML"],
                 id="override-bad-yaml"),
    pytest.param(None, {}, ["-c", "nonsense"], ["-c", "'nonsense'", "not key=value"], id="override-not-key-value"),
]


@pytest.mark.parametrize(("settings", "env", "extra", "named"), CASES)
def test_bad_settings_are_one_line_naming_them_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: str | None, env: dict[str, str], extra: list[str],
    named: list[str],
) -> None:
    monkeypatch.setenv("ALE_HOME", str(tmp_path / "home"))  # no user-level settings in the way
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    if settings is not None:
        (tmp_path / ".ale").mkdir()
        (tmp_path / ".ale" / "settings.yaml").write_text(settings)
    res = runner.invoke(app, ["-p", "x", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                              "-w", str(tmp_path), *extra])
    assert_bad_input_error(res, named)
