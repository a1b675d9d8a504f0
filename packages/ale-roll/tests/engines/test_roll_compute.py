"""The process's one torch thread (ale_roll.engines.compute): where work runs, and in a real
Controller run, that every torch call of a multi-threaded CPU run lands on that one thread."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from ale_roll.config import build_config
from ale_roll.engines.compute import ComputeThread
from ale_roll.trainer.controller import Controller
from ale_roll.trainer.setup import build_policy


def test_work_from_many_callers_runs_on_one_thread_that_is_none_of_theirs() -> None:
    ct = ComputeThread(enabled=True)
    seen: list[int] = []
    callers = [threading.Thread(target=lambda: seen.append(ct.run(threading.get_ident))) for _ in range(4)]
    for t in callers:
        t.start()
    for t in callers:
        t.join(10)
    seen.append(ct.run(threading.get_ident))
    assert len(seen) == 5 and len(set(seen)) == 1
    assert seen[0] != threading.get_ident() and seen[0] not in {t.ident for t in callers}


def test_errors_reach_the_caller_and_a_nested_call_runs_inline() -> None:
    ct = ComputeThread(enabled=True)

    def boom() -> None:
        raise ValueError("from the compute thread")

    with pytest.raises(ValueError, match="from the compute thread"):
        ct.run(boom)
    # A call made on the thread itself must not queue behind itself (that would deadlock).
    assert ct.run(lambda: ct.run(threading.get_ident)) == ct.run(threading.get_ident)
    assert ct.run(ct.on_thread) is True and ct.on_thread() is False


def test_switched_off_it_runs_where_it_always_did() -> None:
    ct = ComputeThread(enabled=False)
    assert ct.run(threading.get_ident) == threading.get_ident()

    async def main() -> tuple[int, int]:
        return threading.get_ident(), await ct.arun(threading.get_ident)

    loop_thread, worker = asyncio.run(main())
    assert worker != loop_thread  # asyncio.to_thread, as before: the loop is never blocked


def test_configure_sets_torch_threads_on_the_thread() -> None:
    ct = ComputeThread(enabled=True)
    before = torch.get_num_threads()
    try:
        ct.configure(threads=1)
        assert ct.run(torch.get_num_threads) == 1
        ct.configure(threads=2)
        assert ct.run(torch.get_num_threads) == 2
    finally:
        torch.set_num_threads(before)


_REWARD = "def reward(prompts, completions, answer, **kwargs):\n    return [float(c.strip() == a) for c, a in zip(completions, answer)]\n"


def _config(out: Path, torch_threads: int) -> Any:
    (out / "compute_task.py").write_text(_REWARD)
    (out / "train.jsonl").write_text("".join(json.dumps({"prompt": f"say {w}", "answer": w}) + "\n"
                                             for w in ["yes", "no"] * 4))  # fmt: skip
    return build_config({
        "output_dir": str(out / "run"), "config_dir": str(out), "iterations": 2, "seed": 0,
        "model": {"tiny": {"arch": "llama", "vocab_size": 300, "hidden_size": 64, "num_layers": 1, "num_heads": 2,
                           "num_kv_heads": 2, "head_dim": 32, "intermediate_size": 64,
                           "max_position_embeddings": 64, "seed": 0}, "word_vocab": ["yes", "no", "say", ":"]},
        "engine": {"torch_threads": torch_threads},
        "env": {"data": str(out / "train.jsonl"), "reward_fn": "compute_task:reward"},
        "rollout": {"batch_size": 16, "group_size": 8, "episodes_in_flight": 16, "max_batch": 16, "max_turns": 1,
                    "max_new_tokens": 2, "async_ratio": 0, "observation_template": "{observation} :",
                    "env_threads": False, "filters": ["env_noise"]},
        "algorithm": {"loss": "ipa", "config": {"advantage": {"group_norm": True}}},
        "eval": {"episodes": 0}, "checkpoint": {"every": 1, "resume": False},
        "metrics": {"tensorboard": False, "plot": False, "progress": False},
    })  # fmt: skip


def _spy(obj: Any, names: tuple[str, ...], seen: dict[str, set[str]]) -> None:
    for name in names:
        fn: Callable[..., Any] = getattr(obj, name)

        def wrapped(*a: Any, _fn: Callable[..., Any] = fn, _name: str = name, **k: Any) -> Any:
            seen[_name].add(threading.current_thread().name)
            return _fn(*a, **k)

        setattr(obj, name, wrapped)


def _threads_of_a_run(out: Path, torch_threads: int) -> dict[str, set[str]]:
    """The threads each spied method ran on during a short run (the process's torch thread
    count is restored afterwards: the run sets it)."""
    before = torch.get_num_threads()
    try:
        cfg = _config(out, torch_threads)
        policy = build_policy(cfg)
        seen: dict[str, set[str]] = defaultdict(set)
        _spy(policy.inference, ("generate", "update_weights"), seen)
        _spy(policy.train, ("forward_logprobs", "backward", "step", "export_weights", "save_checkpoint"), seen)
        Controller(cfg, policy=policy).run()
        return dict(seen)
    finally:
        torch.set_num_threads(before)


def test_a_two_thread_cpu_run_does_all_its_torch_work_on_one_thread(tmp_path: Path) -> None:
    seen = _threads_of_a_run(tmp_path, torch_threads=2)
    assert {"generate", "update_weights", "backward", "step", "export_weights", "save_checkpoint"} <= set(seen)
    names = set().union(*seen.values())
    assert len(names) == 1 and names.pop().startswith("ale-torch"), seen


def test_a_one_thread_run_keeps_generation_and_training_apart(tmp_path: Path) -> None:
    # With one torch thread there is no OpenMP team to share, and an async run overlaps generation
    # (the batcher's driver) with training (a worker thread) on separate cores.
    seen = _threads_of_a_run(tmp_path, torch_threads=1)
    assert seen["generate"] == {"ale-microbatcher"}, seen
    assert not any(n.startswith("ale-torch") for n in seen["backward"] | seen["step"]), seen
