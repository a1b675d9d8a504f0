"""`ale-roll recipe`: every stage from one config (examples/rome_recipe.yaml, shrunk), the table and
recipe.json, the stage-2 masks, and resume after a failure and after SIGKILL mid-stage."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from ale_roll.cli import app
from ale_roll.recipe import STAGES, Recipe, format_table, load_recipe_config, run_recipe
from ale_roll.recipe import data as recipe_data
from ale_roll.types import flatten_trajectory
from typer.testing import CliRunner

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "rome_recipe.yaml"
# The example's stages, shrunk: a smaller random-init model, a few steps per stage, small RL batches.
SMALL = ["model.tiny.hidden_size=64", "model.tiny.intermediate_size=128", "model.tiny.num_heads=2",
         "model.tiny.num_kv_heads=2",
         "iterations=2", "rollout.batch_size=32", "rollout.episodes_in_flight=32", "rollout.max_batch=64",
         "checkpoint.every=1", "recipe.data.generate.episodes=40", "recipe.cpt.steps=4", "recipe.sft1.steps=4",
         "recipe.sft2.steps=4", "recipe.cpt.checkpoint_every=2", "recipe.sft1.checkpoint_every=2",
         "recipe.sft2.checkpoint_every=2", "eval.episodes=8", "recipe.eval_episodes=8"]


def _cfg(out: Path, *extra: str) -> Any:
    return load_recipe_config(EXAMPLE, [f"output_dir={out}", *SMALL, *extra])


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("recipe") / "run"
    return out, run_recipe(_cfg(out))


def test_all_stages_run_from_one_config_into_the_table_and_json(full_run: tuple[Path, dict[str, Any]]) -> None:
    out, summary = full_run
    assert [r["stage"] for r in summary["stages"]] == list(STAGES)
    assert json.loads((out / "recipe.json").read_text())["stages"] == summary["stages"]
    rows = {r["stage"]: r for r in summary["stages"]}
    for stage in ("cpt", "sft1", "sft2"):
        assert rows[stage]["steps"] == 4 and rows[stage]["loss_start"] is not None, rows[stage]
        assert 0.0 <= rows[stage]["heldout_success"] <= 1.0
        assert (out / stage / "model" / "config.json").exists()
        assert not (out / stage / "checkpoints").exists()  # dropped once the marker is written
    assert rows["rl"]["steps"] == 2 and rows["rl"]["loss_start"] is not None
    assert rows["data"]["heldout_success"] is not None  # the starting model's, the baseline
    assert rows["eval"]["heldout_success"] is not None and rows["eval"]["model"].endswith("rl/model")
    # Each stage started from the previous one's model.
    rec = Recipe(_cfg(out))
    assert rec.model_of("sft1") == out / "cpt" / "model" and rec.model_of("rl") == out / "sft2" / "model"
    table = format_table(summary).splitlines()
    assert "loss start→end" in table[0] and "held-out success" in table[0]
    assert [line.split()[0] for line in table[2:]] == list(STAGES)


def test_rerun_skips_every_finished_stage(full_run: tuple[Path, dict[str, Any]]) -> None:
    out, first = full_run
    again = run_recipe(_cfg(out), on_step=lambda stage, step: pytest.fail(f"{stage} trained again"))
    assert all(r["skipped"] for r in again["stages"])
    assert [{k: v for k, v in r.items() if k != "skipped"} for r in again["stages"]] == \
           [{k: v for k, v in r.items() if k != "skipped"} for r in first["stages"]]


def test_stage_views_cpt_all_tokens_sft1_unmasked_sft2_masked(full_run: tuple[Path, dict[str, Any]]) -> None:
    out, _ = full_run
    from ale_roll.rollout.replay import load_trajectories

    broad = load_trajectories(out / "data" / "broad.jsonl")
    flags = [(u.error, u.relevant) for t in broad for u in t.turns]
    assert (True, True) in flags and (False, False) in flags  # the generator made both kinds of bad turn
    assert all(u.sft_weight == 1 for t in recipe_data.broad_view(broad) for u in t.turns)
    hq = recipe_data.high_quality_view(broad)
    assert hq and all(t.metadata["success"] for t in hq) and len(hq) < len(broad)
    masked = [u for t in hq for u in t.turns if u.sft_weight == 0]
    assert masked, "stage 2 should keep some error/irrelevant turns, masked"
    row = flatten_trajectory(recipe_data.cpt_view(broad[:1])[0])
    full = flatten_trajectory(broad[0]).input_ids
    assert row.input_ids == full and row.sft_mask == [0] + [1] * (len(full) - 1)


def test_injected_failure_mid_stage_resumes_that_stage(full_run: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    out = tmp_path / "run"
    for stage in ("data", "cpt", "sft1"):  # finished stages of the module's run
        shutil.copytree(full_run[0] / stage, out / stage)
    cfg = _cfg(out, "recipe.sft2.steps=6", "iterations=0")

    def fail(stage: str, step: int) -> None:
        if stage == "sft2" and step == 5:
            raise RuntimeError("injected")

    with pytest.raises(RuntimeError, match="injected"):
        run_recipe(cfg, on_step=fail)
    assert not (out / "sft2" / "stage.json").exists() and (out / "sft1" / "stage.json").exists()
    seen: list[tuple[str, int]] = []
    summary = run_recipe(cfg, on_step=lambda stage, step: seen.append((stage, step)))
    rows = {r["stage"]: r for r in summary["stages"]}
    assert rows["sft1"]["skipped"] and rows["cpt"]["skipped"] and not rows["sft2"]["skipped"]
    assert rows["sft2"]["resumed_from"] == 4 and seen == [("sft2", 5), ("sft2", 6)]
    steps = [r["step"] for r in map(json.loads, (out / "sft2" / "metrics.jsonl").read_text().splitlines())]
    assert steps == [1, 2, 3, 4, 5, 6]  # the failed attempt's step 5 was dropped and replayed


def test_sigkill_mid_stage_then_rerun_resumes_that_stage(full_run: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    out = tmp_path / "run"
    # The finished data, CPT and SFT-1 stages of the module's run: the killed process starts at SFT-2.
    for stage in ("data", "cpt", "sft1"):
        shutil.copytree(full_run[0] / stage, out / stage)
    args = [f"output_dir={out}", *SMALL, "recipe.sft2.steps=60", "recipe.sft2.checkpoint_every=3", "iterations=1"]
    proc = subprocess.Popen([sys.executable, "-m", "ale_roll.cli", "recipe", "-c", str(EXAMPLE), *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    ckpts = out / "sft2" / "checkpoints"
    try:
        deadline = time.monotonic() + 60
        while not (ckpts.is_dir() and any(p.name.startswith("step-") and not p.name.endswith(".tmp")
                                          for p in ckpts.iterdir())):
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "no sft2 checkpoint within 60 s"
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "sft2" / "stage.json").exists(), "the stage finished before the kill"
    done = {s: (out / s / "stage.json").stat().st_mtime_ns for s in ("data", "cpt", "sft1")}
    res = CliRunner().invoke(app, ["recipe", "-c", str(EXAMPLE), *args])
    assert res.exit_code == 0, (res.output, res.exception)
    summary = json.loads((out / "recipe.json").read_text())
    rows = {r["stage"]: r for r in summary["stages"]}
    assert [s for s in STAGES if rows[s]["skipped"]] == ["data", "cpt", "sft1"]
    assert rows["sft2"]["resumed_from"] and rows["sft2"]["resumed_from"] % 3 == 0
    assert {s: (out / s / "stage.json").stat().st_mtime_ns for s in done} == done  # not redone
    assert "sft2" in res.stdout and "held-out success" in res.stdout


def test_bad_recipe_key_is_one_line_and_exit_2(tmp_path: Path) -> None:
    from ale_proto.testing import assert_bad_input_error

    res = CliRunner().invoke(app, ["recipe", "-c", str(EXAMPLE), f"output_dir={tmp_path / 'o'}", "recipe.sft3.steps=1"])
    assert_bad_input_error(res, ["override recipe.sft3.steps=1", "unknown key 'recipe.sft3'"], quiet_stdout=True)
    assert not (tmp_path / "o").exists()
