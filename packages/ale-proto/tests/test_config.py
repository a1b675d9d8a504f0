"""ale_proto.config: the one loader (YAML + dotted overrides + env → pydantic) and one deep_merge."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest
from ale_proto.config import (
    ConfigError,
    deep_merge,
    env_layers,
    exit_on_error,
    load_config,
    parse_mapping,
    parse_overrides,
    read_mapping,
    require_env,
)
from pydantic import BaseModel, ConfigDict, Field


class Quota(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_sandboxes: int = 1


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cpu_millis: int = Field(default=1000, ge=0)
    memory_bytes: int = 0


class Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    pool_size: int = 2
    backend: Literal["local", "docker"] = "local"
    labels: dict[str, str] = Field(default_factory=dict)
    limits: Limits = Field(default_factory=Limits)
    quotas: dict[str, Quota] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)


def test_deep_merge_merges_mappings_replaces_the_rest_and_shares_nothing() -> None:
    base = {"a": {"b": 1, "c": [1]}, "d": 1}
    over = {"a": {"b": 2, "e": {"f": 3}}, "d": [4]}
    out = deep_merge(base, over)
    assert out == {"a": {"b": 2, "c": [1], "e": {"f": 3}}, "d": [4]}
    out["a"]["c"].append(2)
    out["a"]["e"]["f"] = 9
    out["d"].append(5)
    assert base == {"a": {"b": 1, "c": [1]}, "d": 1} and over == {"a": {"b": 2, "e": {"f": 3}}, "d": [4]}
    assert deep_merge({"a": {"b": 1}}, {"a": 5}) == {"a": 5}  # a scalar replaces a section


def test_overrides_are_dotted_and_parsed_as_yaml_scalars() -> None:
    assert parse_overrides(["a.b=16", "a.c=true", "d=[x, y]", "e=", "f=a=b", "g=null"]) == {
        "a": {"b": 16, "c": True}, "d": ["x", "y"], "e": "", "f": "a=b", "g": None}
    for bad in ["novalue", "=3", "a..b=1"]:
        with pytest.raises(ConfigError, match=r"not key=value"):
            parse_overrides([bad])
    with pytest.raises(ConfigError, match=r"^override a.b=1: a is not a section"):
        parse_overrides(["a=1", "a.b=1"])
    with pytest.raises(ConfigError, match=r"^override a=\[1: the value is not valid YAML"):
        parse_overrides(["a=[1"])


def test_files_missing_bad_yaml_not_a_mapping_json(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope.yaml: config file not found$"):
        read_mapping(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: 1\nb: [1, 2\nc: 3\n")
    with pytest.raises(ConfigError) as e:
        read_mapping(bad)
    assert str(e.value).startswith(f"{bad}:3:2: invalid YAML: ") and "\n" not in str(e.value)
    (tmp_path / "list.yaml").write_text("- a\n")
    with pytest.raises(ConfigError, match=r"list.yaml: the top level must be a mapping of keys, not a list"):
        read_mapping(tmp_path / "list.yaml")
    (tmp_path / "empty.yaml").write_text("")
    assert read_mapping(tmp_path / "empty.yaml") == {}
    (tmp_path / "s.json").write_text('{"a": {"b": 1}')
    with pytest.raises(ConfigError, match=r"s.json:1:15: invalid JSON"):
        read_mapping(tmp_path / "s.json")
    with pytest.raises(ConfigError, match=r"cannot read the config file"):
        read_mapping(tmp_path)  # a directory


def test_layers_file_env_overrides_in_order(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("name: file\npool_size: 3\nlabels: {a: file, b: file}\n")
    env = env_layers("T_", {"T_LABELS__B": "env", "T_POOL_SIZE": "4", "OTHER": "x"})
    cfg = load_config(Cfg, f, ["labels.a=cli", "tags=[p, q]"], base={"backend": "docker"}, env=env)
    assert cfg.name == "file" and cfg.pool_size == 4 and cfg.backend == "docker"
    assert cfg.labels == {"a": "cli", "b": "env"} and cfg.tags == ["p", "q"]
    flags = load_config(Cfg, None, {"name": "flag", "limits": {"cpu_millis": 5}}, data={"name": "data", "pool_size": 7})
    assert flags.name == "flag" and flags.pool_size == 7 and flags.limits.cpu_millis == 5


def test_errors_are_one_line_naming_the_source_and_key(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("name: n\npool_sise: 3\n")
    cases = [
        (f, [], [], f"{f}: unknown key 'pool_sise' (did you mean 'pool_size'?)"),
        (None, ["name=n", "pool_size=abc"], [],
         "override pool_size=abc: pool_size: expected a valid integer (got 'abc')"),
        (None, ["name=n", "limits.cpu_milis=1"], [],
         "override limits.cpu_milis=1: unknown key 'limits.cpu_milis' (did you mean 'limits.cpu_millis'?)"),
        (None, ["name=n", "quotas.team.max_sandboxs=1"], [],  # through a dict of sections
         "override quotas.team.max_sandboxs=1: unknown key 'quotas.team.max_sandboxs' (did you mean 'quotas.team.max_sandboxes'?)"),
        (None, ["name=n", "backend=kvm"], [], "override backend=kvm: backend: expected 'local' or 'docker' (got 'kvm')"),
        (None, ["name=n", "limits.cpu_millis=-1"], [],
         "override limits.cpu_millis=-1: limits.cpu_millis: expected greater than or equal to 0 (got -1)"),
        (None, [], [], "config: missing key 'name'"),
        (None, ["name=n"], env_layers("T_", {"T_POOL_SIZE": "many"}),
         "environment variable T_POOL_SIZE: pool_size: expected a valid integer (got 'many')"),
        (None, ["name=n", "a=1", "b=1", "c=1", "d=1"], [],
         "override a=1: unknown key 'a'; override b=1: unknown key 'b'; override c=1: unknown key 'c'; and 1 more"),
    ]
    for path, overrides, env, message in cases:
        with pytest.raises(ConfigError) as e:
            load_config(Cfg, path, overrides, env=env)
        assert str(e.value) == message


def test_require_env_names_the_variable() -> None:
    assert require_env("K", "the client", {"K": "v"}) == "v"
    with pytest.raises(ConfigError, match=r"^the client: set K \(environment variable is unset\)$"):
        require_env("K", "the client", {"K": ""})


def test_exit_on_error_prints_one_line_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e, exit_on_error():
        load_config(Cfg, None, ["name=n", "pool_size=x"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: override pool_size=x: ")
    with pytest.raises(SystemExit) as e, exit_on_error(KeyError, code=3):
        raise KeyError("first\nsecond")
    assert e.value.code == 3 and capsys.readouterr().err.count("\n") == 1
    with exit_on_error():  # nothing raised: nothing printed
        pass
    assert capsys.readouterr().err == ""


def test_text_and_given_mappings_are_checked_like_files() -> None:
    assert parse_mapping("a: 1\n", "req") == {"a": 1} and parse_mapping("", "req") == {}
    with pytest.raises(ConfigError, match=r"^config_yaml:2:1: invalid YAML: "):
        parse_mapping("a: [1\n", "config_yaml")
    with pytest.raises(ConfigError, match=r"^config_yaml: the top level must be a mapping of keys, not a list$"):
        parse_mapping("- 1\n", "config_yaml")
    with pytest.raises(ConfigError, match=r"^request: the top level must be a mapping of keys, not a str$"):
        load_config(Cfg, data="name", source="request")  # type: ignore[arg-type]
