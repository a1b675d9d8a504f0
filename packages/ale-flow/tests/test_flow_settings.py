"""Layered settings and project files: precedence, validation errors that name the source."""

from __future__ import annotations

import os

import pytest
from ale_flow.project import load_memory_files, load_project_files
from ale_flow.settings import SettingsError, load_settings


def test_layers_global_project_env_cli(tmp_path):
    home = tmp_path / "ale_home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "settings.yaml").write_text("mode: plan\nlimits:\n  max_steps: 7\n  max_malformed: 9\nmodel:\n  name: global-model\n")
    proj = tmp_path / "proj"
    (proj / ".ale").mkdir(parents=True)
    (proj / ".ale" / "settings.json").write_text('{"limits": {"max_steps": 8}, "model": {"base_url": "http://x/v1"}}')
    s = load_settings(proj, environ={"ALE_FLOW_LIMITS__MAX_STEPS": "9", "ALE_FLOW_MODEL__NAME": "env-model"})
    assert s.mode == "plan" and s.limits.max_steps == 9 and s.limits.max_malformed == 9
    assert s.model.name == "env-model" and s.model.base_url == "http://x/v1"
    s = load_settings(proj, cli={"limits": {"max_steps": 10}, "mode": "yolo"}, environ={"ALE_FLOW_LIMITS__MAX_STEPS": "9"})
    assert s.limits.max_steps == 10 and s.mode == "yolo"


def test_broken_yaml_names_the_file(tmp_path):
    proj = tmp_path / "p"
    (proj / ".ale").mkdir(parents=True)
    (proj / ".ale" / "settings.yaml").write_text("limits: [unclosed\n")
    with pytest.raises(SettingsError, match=r"settings.yaml:2:1: invalid YAML"):  # file and line
        load_settings(proj, environ={})


def test_invalid_field_names_file_and_field(tmp_path):
    proj = tmp_path / "p"
    (proj / ".ale").mkdir(parents=True)
    (proj / ".ale" / "settings.yaml").write_text("limits:\n  max_stepz: 3\nmode: turbo\n")
    with pytest.raises(SettingsError) as e:
        load_settings(proj, environ={})
    msg = str(e.value)
    assert ".ale/settings.yaml" in msg and "limits.max_stepz" in msg and "mode" in msg


def test_bad_env_value_is_reported(tmp_path):
    with pytest.raises(SettingsError, match=r"^environment variable ALE_FLOW_LIMITS__MAX_STEPS: limits.max_steps: .*integer.*'lots'"):
        load_settings(tmp_path, environ={"ALE_FLOW_LIMITS__MAX_STEPS": "lots"})


def test_top_level_must_be_mapping(tmp_path):
    (tmp_path / ".ale").mkdir()
    (tmp_path / ".ale" / "settings.yaml").write_text("- a\n- b\n")
    with pytest.raises(SettingsError, match="top level must be a mapping"):
        load_settings(tmp_path, environ={})


def test_hooks_settings_validate(tmp_path):
    (tmp_path / ".ale").mkdir()
    (tmp_path / ".ale" / "settings.yaml").write_text("hooks:\n  OnBoot:\n    - command: echo\n")
    with pytest.raises(SettingsError, match="hooks.OnBoot"):
        load_settings(tmp_path, environ={})


def test_memory_files_global_project_subdir(ws, tmp_path):
    home = tmp_path / "ale_home"
    home.mkdir(exist_ok=True)
    (home / "ALE.md").write_text("global rule")
    ws.write_bytes("ALE.md", b"project rule")
    ws.write_bytes("pkg/sub/ALE.md", b"subdir rule")
    ws.write_bytes("other/ALE.md", b"unrelated")
    found = load_memory_files(ws, "pkg/sub", home)
    assert [t for _, t in found] == ["global rule", "project rule", "subdir rule"]


def test_memory_reloads_when_shell_changes_directory(run_agent, ws):
    from ale_flow.models.scripted import Reply, ScriptedModel, call

    ws.write_bytes("svc/ALE.md", b"service-specific rule")
    model = ScriptedModel([Reply(calls=[call("shell", command="cd svc")]), "ok"])
    run_agent(model)
    assert "service-specific rule" not in model.seen[0][0]["content"]
    assert "service-specific rule" in model.seen[1][0]["content"]


def test_broken_agent_definition_is_reported_not_fatal(ws):
    ws.write_bytes(".ale/agents/bad.md", b"---\n[not: a mapping\n---\nbody")
    ws.write_bytes(".ale/agents/good.md", b"---\ntools: [grep]\n---\nprompt")
    pf = load_project_files(ws)
    assert "good" in pf.agents and pf.agents["good"].tools == ["grep"]
    assert pf.errors and "bad.md" in pf.errors[0]
    assert os.path.basename(ws.root) == "ws"
