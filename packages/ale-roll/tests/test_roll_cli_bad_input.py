"""Bad config given to ``ale-roll train|sft|eval``: one line on stderr naming the file or override
and the key, exit status 2, no traceback, and no output directory made."""

from __future__ import annotations

from pathlib import Path

import pytest
from ale_proto.testing import assert_bad_input_error
from ale_roll.cli import app
from typer.testing import CliRunner

runner = CliRunner()
GOOD = "output_dir: OUT\nmodel: {tiny: {seed: 0}}\n"

CASES = [  # YAML text (None: no file), overrides, what the one line must name
    pytest.param(GOOD + "rollout: {batchsize: 4}\n", [],
                 ["run.yaml", "unknown key 'rollout.batchsize'", "did you mean 'rollout.batch_size'"], id="unknown-key"),
    pytest.param(GOOD + "rollout: [1, 2\n", [], ["run.yaml:4:1: invalid YAML"], id="bad-yaml"),
    pytest.param(None, [], ["run.yaml", "not found"], id="missing-file"),
    pytest.param(GOOD, ["rollout.batch_size=abc"],
                 ["override rollout.batch_size=abc", "rollout.batch_size:", "integer", "'abc'"], id="bad-value"),
    pytest.param(GOOD, ["algorithm.loss=ppo"], ["unknown loss 'ppo'"], id="bad-loss"),
]


@pytest.mark.parametrize("command", ["train", "sft", "eval"])
@pytest.mark.parametrize(("text", "overrides", "named"), CASES)
def test_bad_config_is_one_line_naming_it_and_exit_2(tmp_path: Path, command: str, text: str | None,
                                                      overrides: list[str], named: list[str]) -> None:
    out = tmp_path / "out"
    path = tmp_path / "run.yaml"
    if text is not None:
        path.write_text(text.replace("OUT", str(out)))
    res = runner.invoke(app, [command, "-c", str(path), *overrides])
    assert_bad_input_error(res, named)
    assert not out.exists()  # nothing is made for a config that does not validate
