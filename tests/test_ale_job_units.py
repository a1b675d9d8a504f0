"""Units of the default job: the sandbox lock script agrees with the environment, the teacher, the
filter's stages, the confidence intervals and the report arithmetic."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

from ale_rock.envs.games.digit_lock import DigitLock, code_digits

from ale.job.filtering import STAGES, run_filter
from ale.job.lock_task import SCRIPT, setup_commands
from ale.job.pipeline import deep_merge, episode_rate, summarize
from ale.job.report import render_table, render_verdict
from ale.job.stats import wilson
from ale.job.synthesis import Episode
from ale.job.teacher import LockTeacher, TeacherNoise


def lock_script(tmp: Path, code: list[int], max_turns: int) -> Path:
    """Install the task under tmp instead of /workspace (the script's paths rewritten)."""
    cmd = setup_commands(code, max_turns).replace("/workspace", str(tmp))
    subprocess.run(["bash", "-c", cmd], check=True)
    script = tmp / "lock.py"
    script.write_text(SCRIPT.replace("/workspace", str(tmp)))
    return script


def test_sandbox_script_gives_the_environments_feedback(tmp_path: Path) -> None:
    rng = random.Random(0)
    for seed in range(6):
        env = DigitLock()
        _, info = env.reset(seed)
        code = code_digits(info["code"], 3, 10)
        d = tmp_path / f"s{seed}"
        d.mkdir()
        script = lock_script(d, code, env.max_turns)
        for _ in range(env.max_turns):
            guess = " ".join(str(rng.randrange(10)) for _ in range(3)) if rng.random() < 0.8 else "1 2"
            obs, _, term, trunc, _ = env.step(guess)
            out = subprocess.run([sys.executable, str(script), *guess.split()], capture_output=True, text=True).stdout
            if obs.startswith("invalid"):
                assert out.startswith("invalid")
            else:
                assert out.strip() == obs.removesuffix(" closed"), (guess, code)
            if term or trunc:
                break


def test_teacher_without_noise_is_the_binary_search() -> None:
    teacher = LockTeacher(1, TeacherNoise(0, 0, 0, 0))
    first = teacher.complete([{"role": "user", "content": "open it"}], [])
    assert first.tool_calls[0].arguments["command"] == "python3 /workspace/lock.py 4 4 4"
    nxt = teacher.complete([{"role": "tool", "content": "lower higher correct"}], [])
    assert nxt.tool_calls[0].arguments["command"] == "python3 /workspace/lock.py 1 7 4"
    done = teacher.complete([{"role": "tool", "content": "open"}], [])
    assert not done.tool_calls and "open" in done.content


def episode(seed: int, actions: list[str], outputs: list[str], **kw: object) -> Episode:
    e = Episode(seed=seed, code=[1, 2, 3], actions=actions, outputs=outputs,
                commands=[f"python3 /workspace/lock.py {a}" for a in actions])
    for k, v in kw.items():
        setattr(e, k, v)
    return e


def test_filter_stages_count_what_they_drop() -> None:
    good = episode(1, ["4 4 4", "1 2 3"], ["lower lower lower", "open"])
    eps = [
        good,
        episode(2, ["4 4 4", "1 2 3"], ["lower lower lower", "open"], malformed=1),       # malformed call
        episode(3, ["4 4", "1 2 3"], ["invalid: ...", "open"]),                          # invalid guess
        episode(4, ["4 4 4", "4 4 4", "1 2 3"], ["lower lower lower"] * 2 + ["open"]),   # repair loop
        episode(5, ["4 4 4"], ["lower lower lower"]),                                    # never opened
        episode(6, ["4 4 4", "1 2 3"], ["lower lower lower", "open"]),                   # fails re-check
        episode(1, ["4 4 4", "1 2 3"], ["lower lower lower", "open"]),                   # duplicate of good
    ]
    kept, counts = run_filter(eps, recheck=lambda es: [e.seed != 6 for e in es])
    assert list(counts) == list(STAGES)
    assert counts == {"collected": 7, "tool_calls_ok": 5, "finished": 3, "rechecked": 2, "deduped": 1}
    assert kept == [good]


def test_in_sandboxes_turns_a_failure_into_its_item_result() -> None:
    from ale.job.synthesis import in_sandboxes

    class FakeClient:  # stands in for the SDK client: `new_sandbox` is patched below
        pass

    import ale.job.synthesis as synthesis

    made: list[object] = []

    class Box:
        def delete(self) -> None:
            made.append("deleted")

    original = synthesis.new_sandbox
    synthesis.new_sandbox = lambda client, label: Box()  # type: ignore[assignment]
    try:
        def fn(box: object, item: int) -> int:
            if item == 3:
                raise RuntimeError("sandbox lost")
            return item * 10
        out = in_sandboxes(FakeClient(), list(range(6)), fn, lambda item, e: -1, concurrency=2, label="t")
    finally:
        synthesis.new_sandbox = original  # type: ignore[assignment]
    assert out == [0, 10, 20, -1, 40, 50]
    assert made.count("deleted") == 3  # the failed lane's box, then one per lane at the end


def test_wilson_interval() -> None:
    lo, hi = wilson(50, 100)
    assert abs(lo - 0.4038) < 1e-3 and abs(hi - 0.5962) < 1e-3
    assert wilson(0, 400)[0] == 0.0 and 0 < wilson(0, 400)[1] < 0.01
    assert wilson(0, 0) == (0.0, 1.0)


def test_summarize_pools_seeds_and_counts_untrained_once() -> None:
    def rows(sft: float, rl: float) -> list[dict[str, float]]:
        return [{"step": 0, "eval/success_untrained": 0.0, "eval/success": sft},
                {"step": 1, "rollout/tokens": 10.0, "reward/mean": 0.1},
                {"step": 2, "eval/success": rl, "rollout/tokens": 10.0}]
    out = summarize([{"seed": 0, "rows": rows(0.2, 0.5), "wall_s": 1.0},
                     {"seed": 1, "rows": rows(0.3, 0.4), "wall_s": 1.0}], eval_episodes=400)
    st = out["stages"]
    assert st["untrained"]["episodes"] == 400 and st["sft"]["episodes"] == 800 and st["rl"]["episodes"] == 800
    assert st["sft"]["successes"] == 200 and st["rl"]["successes"] == 360
    assert st["rl"]["ci95"][0] <= st["rl"]["success"] <= st["rl"]["ci95"][1]
    assert out["rl_beats_sft"] is True and out["rl_above_sft"] is True
    assert st["rl"]["tokens"] == 40
    assert "RL beats SFT beyond the 95% intervals" in render_verdict(out)


def test_the_two_verdicts_part_where_the_intervals_overlap() -> None:
    # SFT 0.903 [0.865, 0.932] and RL 0.943 [0.911, 0.964] on 300 episodes each (a measured run):
    # RL's interval is above SFT's success, not above SFT's interval.
    rows = [{"step": 0, "eval/success_untrained": 0.0, "eval/success": 271 / 300},
            {"step": 1, "eval/success": 283 / 300}]
    out = summarize([{"seed": 0, "rows": rows, "wall_s": 1.0}], eval_episodes=300)
    assert out["rl_above_sft"] is True and out["rl_beats_sft"] is False
    assert "RL's 95% interval is above SFT's success" in render_verdict(out) and "0.911 > 0.903" in render_verdict(out)
    rows[1]["eval/success"] = 275 / 300  # 0.917 [0.880, 0.943]: its interval reaches below 0.903
    out = summarize([{"seed": 0, "rows": rows, "wall_s": 1.0}], eval_episodes=300)
    assert out["rl_above_sft"] is False and out["rl_beats_sft"] is False
    assert "not above" in render_verdict(out)


def test_summarize_gives_no_verdict_when_rl_was_not_run() -> None:
    # job.roll.iterations=0: SFT is evaluated, RL never is. The report must not say "RL does not
    # beat SFT" over an RL stage of 0 episodes, and the table must not show its 0.000.
    rows = [{"step": 0, "eval/success_untrained": 0.0, "eval/success": 0.54, "eval/episodes": 300.0}]
    out = summarize([{"seed": 0, "rows": rows, "wall_s": 1.0}], eval_episodes=300)
    assert out["stages"]["rl"]["episodes"] == 0 and out["stages"]["sft"]["episodes"] == 300
    assert out["rl_beats_sft"] is None and out["rl_above_sft"] is None
    assert "no verdict" in render_verdict(out)
    from rich.console import Console

    console = Console(record=True, width=120)
    console.print(render_table(out))
    rl_line = next(line for line in console.export_text().splitlines() if line.strip("│ ").startswith("rl"))
    assert "0.000" not in rl_line and "-" in rl_line


def test_episode_rate_skips_the_first_step() -> None:
    rows = [{"step": 1, "time/step_s": 10.0, "rollout/episodes": 1.0},
            {"step": 2, "time/step_s": 1.0, "rollout/episodes": 100.0},
            {"step": 3, "time/step_s": 1.0, "rollout/episodes": 100.0}]
    assert episode_rate(rows, 2) == {"episodes": 200, "seconds": 2.0, "steps": 2, "episodes_per_s": 100.0}


def test_deep_merge_leaves_the_base_alone() -> None:
    base = {"rollout": {"batch_size": 256, "group_size": 8}, "iterations": 40}
    merged = deep_merge(base, {"rollout": {"batch_size": 32}})
    assert merged == {"rollout": {"batch_size": 32, "group_size": 8}, "iterations": 40}
    assert base["rollout"]["batch_size"] == 256


def test_the_table_names_how_held_out_episodes_decoded() -> None:
    rows = [{"step": 0, "eval/success_untrained": 0.0, "eval/success": 0.2, "eval/episodes": 300.0},
            {"step": 3, "eval/success": 0.3, "eval/episodes": 300.0}]
    report = summarize([{"seed": 0, "rows": rows, "wall_s": 1.0}], eval_episodes=300)
    assert "greedy" in str(render_table(report).title)
    report["eval_temperature"] = 1.0  # what the jobs set from the roll config's eval.temperature
    assert "sampled at T=1," in str(render_table(report).title)
