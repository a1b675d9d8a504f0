"""Tiny random-init causal LMs with a locally trained tokenizer, for tests and CPU runs.

No model hub is reachable, so tests build their model from a config: a Qwen2 or Llama of a few
hundred thousand parameters and a byte-level BPE tokenizer trained in well under a second on a small
built-in corpus. The directory it writes loads with transformers *and* vLLM (head_dim >= 32, fp32).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# ChatML, the template Qwen2 and SmolLM2 use; tokens below are added as special tokens.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

_CORPUS = """\
The quick brown fox jumps over the lazy dog. A agent reads the task, calls a tool and observes.
Guess a number between 1 and 20. Higher. Lower. Correct! You win. The answer is 7.
def add(a, b):\n    return a + b\nprint(add(2, 3))\nimport os\nfor i in range(10): pass
User: what is the weather? Assistant: I will call the weather tool. Observation: sunny, 21 C.
ls -la /tmp && cat README.md | grep test ; echo done ; git diff --stat ; pytest -q tests
0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 + - * / = ( ) [ ] { } < > , . ; : ! ? ' "
"""


class TinyModelConfig(BaseModel):
    """Shape of a tiny random-init model."""

    model_config = ConfigDict(extra="forbid")

    arch: Literal["qwen2", "llama"] = "qwen2"
    """Architecture family; both load in transformers and vLLM."""
    vocab_size: int = Field(default=512, ge=300)
    """Target BPE vocabulary (256 bytes + merges + special tokens); the model's embedding is rounded up to a multiple of 64."""
    hidden_size: int = 128
    """Width of the residual stream; must equal num_heads * head_dim."""
    num_layers: int = 2
    """Number of decoder layers."""
    num_heads: int = 4
    """Attention heads."""
    num_kv_heads: int = 2
    """Key/value heads (grouped-query attention); must divide num_heads."""
    head_dim: int = Field(default=32, ge=32)
    """Per-head width; vLLM's CPU attention needs at least 32."""
    intermediate_size: int = 256
    """MLP width."""
    max_position_embeddings: int = 1024
    """Longest sequence the model accepts."""
    tie_word_embeddings: bool = True
    """Share input embedding and output head (as small Qwen2 models do)."""
    seed: int = 0
    """Seed of the random initialisation: same seed, same weights."""


def train_tokenizer(vocab_size: int = 512, corpus: str | None = None):  # -> PreTrainedTokenizerFast
    """Train a byte-level BPE tokenizer with ChatML special tokens; returns a transformers tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    text = corpus if corpus is not None else _CORPUS
    tok.train_from_iterator(text.splitlines() * 4, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
    )


def build_tiny_model(directory: str | Path, config: TinyModelConfig | None = None, **overrides: object) -> Path:
    """Write a random-init model (safetensors, fp32) and its tokenizer to ``directory``.

    ``overrides`` are fields of :class:`TinyModelConfig`, e.g. ``build_tiny_model(d, arch="llama")``.
    """
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig, LlamaConfig, Qwen2Config

    cfg = (config or TinyModelConfig()).model_copy(update=overrides)
    cfg = TinyModelConfig.model_validate(cfg.model_dump())  # re-validate the overrides
    if cfg.hidden_size != cfg.num_heads * cfg.head_dim:
        raise ValueError(f"hidden_size ({cfg.hidden_size}) must equal num_heads * head_dim")
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)

    tokenizer = train_tokenizer(cfg.vocab_size)
    vocab = -(-len(tokenizer) // 64) * 64
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    common = dict(
        vocab_size=vocab,
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        head_dim=cfg.head_dim,
        max_position_embeddings=cfg.max_position_embeddings,
        tie_word_embeddings=cfg.tie_word_embeddings,
        eos_token_id=eos,
        pad_token_id=pad,
        bos_token_id=None,
        dtype="float32",
    )
    hf_cfg = Qwen2Config(**common) if cfg.arch == "qwen2" else LlamaConfig(**common)
    with torch.random.fork_rng():
        torch.manual_seed(cfg.seed)
        model = AutoModelForCausalLM.from_config(hf_cfg, dtype=torch.float32)
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=pad, bos_token_id=None)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out
