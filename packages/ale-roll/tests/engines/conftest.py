"""Shared fixtures for the engine tests: one tiny random-init model per session."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

HAS_VLLM = importlib.util.find_spec("vllm") is not None
HAS_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ale_roll.models import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir: Path):
    from ale_roll.models import load_tokenizer

    return load_tokenizer(tiny_model_dir)


@pytest.fixture
def prompt_ids(tiny_tokenizer) -> list[int]:
    return list(tiny_tokenizer.apply_chat_template(
        [{"role": "user", "content": "Guess a number between 1 and 20."}],
        add_generation_prompt=True, return_dict=False,
    ))


def _completion_logprobs(train_engine, prompt: list[int], completion: list[int]) -> torch.Tensor:
    ids = torch.tensor([list(prompt) + list(completion)])
    return train_engine.forward_logprobs(ids)[0, len(prompt):].cpu()


@pytest.fixture
def completion_logprobs():
    """``f(train_engine, prompt, completion)``: the train engine's logprobs of the completion tokens."""
    return _completion_logprobs
