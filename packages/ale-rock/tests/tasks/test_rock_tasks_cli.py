"""`ale-rock tasks` sub-commands through typer's runner."""

from __future__ import annotations

import json
from pathlib import Path

from ale_rock.tasks import builtin_suite_dir
from ale_rock.tasks.cli import app
from typer.testing import CliRunner

runner = CliRunner()


def test_list_json_and_filters() -> None:
    res = runner.invoke(app, ["list", "--json"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in res.output.splitlines()]
    assert len(rows) >= 40 and {"id", "domain", "split", "difficulty", "title", "path"} <= set(rows[0])
    res = runner.invoke(app, ["list", "--json", "--domain", "security", "--split", "held_out"])
    rows = [json.loads(x) for x in res.output.splitlines()]
    assert rows and all(r["domain"] == "security" and r["split"] == "held_out" for r in rows)


def test_list_table() -> None:
    res = runner.invoke(app, ["list"])
    assert res.exit_code == 0 and "tasks" in res.output


def test_list_piped_prints_full_ids_tab_separated() -> None:
    # CliRunner's stdout is not a terminal, as in `ale-rock tasks list | grep ...`.
    ids = [json.loads(x)["id"] for x in runner.invoke(app, ["list", "--json"]).stdout.splitlines()]
    res = runner.invoke(app, ["list"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0].split("\t") == ["id", "format", "domain", "split", "difficulty", "title"]
    rows = [line.split("\t") for line in lines[1:]]
    assert all(len(r) == 6 for r in rows)
    assert [r[0] for r in rows] == ids and any(len(i) > 12 for i in ids)  # ids a narrow table would cut


def test_validate_one_task_ok() -> None:
    task_dir = builtin_suite_dir() / "data_processing" / "csv-sales-rollup"
    res = runner.invoke(app, ["validate", str(task_dir)])
    assert res.exit_code == 0, res.output
    assert "OK   csv-sales-rollup" in res.output and "1/1 tasks valid" in res.output


def test_validate_broken_task_fails(tmp_path: Path) -> None:
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "task.yaml").write_text("id: bad\ndomain: nowhere\n")
    res = runner.invoke(app, ["validate", str(tmp_path)])
    assert res.exit_code == 1
    assert "field 'domain'" in res.output and "0/1 tasks valid" in res.output


def test_validate_nothing_found(tmp_path: Path) -> None:
    assert runner.invoke(app, ["validate", str(tmp_path)]).exit_code == 2


def test_generate_then_validate(tmp_path: Path) -> None:
    res = runner.invoke(app, ["generate", str(tmp_path), "--seeds", "2", "--start", "100"])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gen-column-stat-100", "gen-count-level-101"]
    res = runner.invoke(app, ["validate", str(tmp_path)])
    assert res.exit_code == 0 and "2/2 tasks valid" in res.output, res.output
