"""Bad config given to ``ale up``: one line on stderr naming the file or override and the key, exit
status 2, no traceback — and no run directory made, ``runs/latest`` left where it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from ale_proto.testing import assert_bad_input_error
from typer.testing import CliRunner

from ale.cli import app

runner = CliRunner()

CASES = [  # YAML text of -c (None: no -c), overrides, what the one line must name
    pytest.param("services: {worker_pool_sise: 1}\n", [],
                 ["up.yaml", "unknown key 'services.worker_pool_sise'", "did you mean 'services.worker_pool_size'"],
                 id="unknown-key"),
    pytest.param("smoke:\n  sandboxes: [1\n", [], ["up.yaml:3:1: invalid YAML"], id="bad-yaml"),
    pytest.param("", ["--config", "{d}/missing.yaml"], ["missing.yaml", "not found"], id="missing-file"),
    pytest.param(None, ["smoke.sandboxes=abc"], ["override smoke.sandboxes=abc", "integer", "'abc'"], id="bad-value"),
    pytest.param(None, ["job.roll.rollout.batchsize=3"],  # the job's ale-roll config is checked up front too
                 ["job.roll", "unknown key 'rollout.batchsize'", "did you mean 'rollout.batch_size'"],
                 id="bad-roll-key"),
    pytest.param(None, ["job.roll_config={d}/nope.yaml"], ["nope.yaml", "not found"], id="missing-roll-config"),
]


@pytest.mark.parametrize(("text", "args", "named"), CASES)
def test_bad_config_is_one_line_and_makes_no_run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     text: str | None, args: list[str], named: list[str]) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "old").mkdir()
    (runs / "latest").symlink_to("old")
    monkeypatch.setenv("ALE_RUNS", str(runs))
    argv = ["up"]
    if text:
        (tmp_path / "up.yaml").write_text(text)
        argv += ["-c", str(tmp_path / "up.yaml")]
    res = runner.invoke(app, argv + [a.replace("{d}", str(tmp_path)) for a in args])
    assert_bad_input_error(res, named)
    assert sorted(p.name for p in runs.iterdir()) == ["latest", "old"]
    assert (runs / "latest").readlink() == Path("old")
