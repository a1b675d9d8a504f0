"""Units of the agent-native job: the teacher engine reads the episode from the prompt and plays the
lock's binary search; the report's agent_native section and the stage counts that leave errors out."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from ale_rock.envs.games.digit_lock import DigitLock, code_digits
from ale_roll.trainer.setup import word_tokenizer

from ale.job.agent_native import agent_native_section, write_tasks
from ale.job.lock_engine import CALL, LockTeacherEngine, episode_so_far, lock_vocab, next_guess
from ale.job.pipeline import summarize


def _prompt(tok, turns: list[tuple[str, str]]) -> list[int]:
    """ChatML as the proxy renders an episode: the instruction, then (tool call, tool response) pairs."""
    messages = [{"role": "system", "content": "You are an agent."},
                {"role": "user", "content": "Open the lock. python3 lock.py D D D answers higher, lower or correct."}]
    for guess, answer in turns:
        messages.append({"role": "assistant", "content": CALL.replace("GUESS", guess)})
        if answer:
            messages.append({"role": "user", "content": f"<tool_response>\n{answer}\n</tool_response>"})
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tok.encode(text, add_special_tokens=False)


def test_the_episode_is_read_back_from_the_tokens() -> None:
    tok = word_tokenizer(lock_vocab())
    ids = _prompt(tok, [("4 4 4", "higher lower correct"), ("7 1 4", "")])
    # The instruction's own "higher, lower or correct" is no answer; only tool responses are.
    assert episode_so_far(tok.decode(ids)) == [([4, 4, 4], ["higher", "lower", "correct"]), ([7, 1, 4], [])]


def test_the_teachers_search_opens_every_lock_in_five_guesses() -> None:
    rng = random.Random(0)
    for code in range(1000):
        env = DigitLock()
        env.reset(0)
        env.code = code_digits(code, 3, 10)
        history: list[tuple[list[int], list[str]]] = []
        for _ in range(5):
            guess = next_guess(history, 3, rng, slip=0.0)
            obs, reward, terminated, _, _ = env.step(" ".join(map(str, guess)))
            if terminated:
                assert reward == 1.0
                break
            history.append((guess, obs.split()[:3]))
        else:
            raise AssertionError(f"code {code:03d} not opened: {history}")


def test_the_engine_answers_a_tool_call_then_stops_once_open() -> None:
    tok = word_tokenizer(lock_vocab())
    engine = LockTeacherEngine(tok, slip=0.0)
    first = engine.reply(_prompt(tok, []))
    assert first == CALL.replace("GUESS", "4 4 4")
    # The reply is one token per word of the frame and digits: the policy can sample it.
    assert len(tok.encode(first, add_special_tokens=False)) == 7
    assert engine.reply(_prompt(tok, [("4 4 4", "higher lower correct")])) == CALL.replace("GUESS", "7 1 4")
    assert engine.reply(_prompt(tok, [("4 4 4", "open")])) == "open"
    five = [("1 1 1", "higher higher higher")] * 5
    assert engine.reply(_prompt(tok, five)) == "closed"
    out = engine.generate([_prompt(tok, [])], None, ["r0"])[0]
    assert out.token_ids == [*tok.encode(first, add_special_tokens=False), tok.eos_token_id]
    assert out.request_id == "r0" and out.stop_reason == "stop"


def test_the_same_prompt_gets_the_same_slip() -> None:
    tok = word_tokenizer(lock_vocab())
    engine = LockTeacherEngine(tok, slip=0.5)
    prompts = [_prompt(tok, [(f"{d} {d} {d}", "higher higher higher")]) for d in range(4)]
    assert [engine.reply(p) for p in prompts] == [engine.reply(p) for p in prompts]


def test_tasks_are_written_in_harbor_layout_with_disjoint_codes(tmp_path: Path) -> None:
    train, held = write_tasks(tmp_path, range(100, 140), heldout=30, max_turns=5)
    assert len(list(train.iterdir())) == 40 and len(list(held.iterdir())) == 30
    codes = {}
    for split in (train, held):
        codes[split.name] = {(d / "solution" / "solve.sh").read_text().split("lock.py")[1].strip() for d in split.iterdir()}
        assert all((d / "task.toml").exists() and (d / "tests" / "test.sh").exists() for d in split.iterdir())
    assert len(codes["heldout"]) == 30  # distinct held-out locks
    assert not codes["train"] & codes["heldout"]
    with pytest.raises(ValueError, match="eval.episodes"):
        write_tasks(tmp_path / "x", range(1), heldout=10_000, max_turns=5)


def test_stage_counts_leave_errored_episodes_out() -> None:
    rows = [{"step": 0, "eval/success_untrained": 0.0, "eval/episodes_untrained": 300.0, "eval/errors_untrained": 0.0,
             "eval/success": 0.25, "eval/episodes": 296.0, "eval/errors": 4.0},
            {"step": 3, "eval/success": 0.5, "eval/episodes": 300.0, "eval/errors": 0.0}]
    st = summarize([{"seed": 0, "rows": rows, "wall_s": 1.0}], eval_episodes=300)["stages"]
    assert st["sft"]["episodes"] == 296 and st["sft"]["successes"] == 74 and st["sft"]["errors"] == 4
    assert st["rl"]["episodes"] == 300 and st["rl"]["errors"] == 0 and st["untrained"]["episodes"] == 300


def test_agent_native_section_sums_the_rl_steps() -> None:
    rows = [{"rollout/episodes": 256.0, "time/step_s": 64.0, "agent_native/errors": 2.0, "agent_native/resampled": 2.0,
             "agent_native/tool_calls": 900.0},
            {"rollout/episodes": 256.0, "time/step_s": 64.0, "agent_native/tool_calls": 1000.0}]
    assert agent_native_section(rows) == {"episodes": 512, "episodes_per_s": 4.0, "errors": 2, "resampled": 2,
                                          "tool_calls": 1900}


def test_the_mode_picks_its_embedded_config_and_seeds() -> None:
    from ale.config import ConfigError, load_config
    from ale.job.pipeline import roll_raw

    gem, agent = load_config(None, ["job.mode=gem"]).job, load_config(None, []).job
    assert agent.mode == "agent_native"  # the default job plays the lock as an agent in sandboxes
    assert gem.seeds == [0, 1, 2] and agent.seeds == [0]
    assert roll_raw(gem)["rollout"].get("mode", "gem") == "gem"
    raw = roll_raw(agent)
    assert raw["rollout"]["mode"] == "agent_native" and raw["model"]["word_unknown_runs"] is True
    # The policy's vocabulary is the teacher's: the demos' words are the words the policy can say.
    assert raw["model"]["word_vocab"] == lock_vocab()
    assert load_config(None, ["job.mode=agent_native", "job.seeds=[3]"]).job.seeds == [3]
    # The teacher's demos: 240 in GEM mode, 480 agent-native, whatever the user sets in either.
    assert gem.synthesis.episodes == 240 and agent.synthesis.episodes == 480
    assert load_config(None, ["job.synthesis.episodes=240"]).job.synthesis.episodes == 240
    assert load_config(None, ["job.mode=gem", "job.synthesis.episodes=480"]).job.synthesis.episodes == 480
    # The agent-native config is validated up front too (its tasks and addresses come at run time).
    with pytest.raises(ConfigError, match="rollout.max_new_tokenz"):
        load_config(None, ["job.mode=agent_native", "job.roll.rollout.max_new_tokenz=3"])


def test_resampling_takes_the_synthesis_demos_as_its_experts(tmp_path: Path) -> None:
    from ale.config import load_config
    from ale.job.agent_native import AgentNativeJob
    from ale.job.pipeline import Endpoints

    def overrides(*extra: str) -> list[str]:
        job = load_config(None, ["job.mode=agent_native", *extra]).job  # validated up front
        ep = Endpoints("127.0.0.1:1", "", "", "", "", "", "127.0.0.1:2")
        return AgentNativeJob(tmp_path, job, ep, tmp_path, None).overrides(  # type: ignore[arg-type]
            0, tmp_path / "out", tmp_path / "demos.jsonl", tmp_path / "train", tmp_path / "heldout")

    assert not any(o.startswith("algorithm.resampling") for o in overrides())
    on = overrides("job.roll.algorithm.resampling.enabled=true")
    assert f"algorithm.resampling.expert_data={tmp_path / 'demos.jsonl'}" in on
    own = overrides("job.roll.algorithm.resampling.enabled=true", "job.roll.algorithm.resampling.expert_data=/x.jsonl")
    assert not any(o.startswith("algorithm.resampling") for o in own)  # the user's own experts stay


def test_the_model_is_prepared_before_the_demos_resampling_needs_exist(tmp_path: Path) -> None:
    from ale.config import load_config
    from ale.job.pipeline import prepare_model

    job = load_config(None, ["job.mode=agent_native", "job.roll.algorithm.resampling.enabled=true"]).job
    model_dir = prepare_model(tmp_path, job)
    assert (model_dir / "config.json").exists()
