"""Build the policy's model directory, tokenizer and engines from a RunConfig.

Backends are imported lazily by name, so a torch + HF run never imports deepspeed or vllm.
`word_vocab` gives a tiny model a word-level tokenizer (one token per word, so every game action is
one token — what made RL learn on a CPU, see docs/roll.md, "The example"); the embedding is resized to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ale_roll.config import RunConfig
from ale_roll.engines.base import InferenceEngine, TrainEngine
from ale_roll.engines.compute import ComputeThread, compute

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def word_tokenizer(words: list[str], unknown_runs: bool = False) -> Any:
    """A word-level transformers tokenizer: ChatML specials (ids 0–2), `[UNK]`, then `words`.

    An entry that the pre-tokenizer would split (spaces, or word and punctuation characters mixed:
    `<tool_call>`, `{"name": "shell", "arguments": {"command": "python3 lock.py`) is one token too,
    matched in the text before splitting: a fixed frame such as a tool call's JSON costs a model a
    few tokens, and the choices inside it (the arguments' words) stay one token each. Decoding joins
    tokens with a space, which JSON and the proxy's tool-call parser accept.

    ``unknown_runs``: a run of text with no entry in it (words, punctuation and the spaces between
    them) is one `[UNK]`, not one per word. An agent's prompt is mostly text a word-level model
    cannot read (its system prompt, the tool schema, the instruction's prose); as one token per run
    it costs the model a few positions instead of hundreds, and the entries between the runs (the
    digits, the lock's answers, the tool-call frame) keep their places."""
    from tokenizers import AddedToken, Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from ale_roll.models.tiny import CHAT_TEMPLATE

    vocab: dict[str, int] = {}
    for w in [*SPECIAL_TOKENS, "[UNK]", *words]:
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    pre = pre_tokenizers.Whitespace()
    # Entries the pre-tokenizer would split: added tokens keep their vocabulary id and match first.
    phrases = [w for w in words if len(pre.pre_tokenize_str(w)) != 1 and w not in SPECIAL_TOKENS]
    if unknown_runs:
        plain = [w for w in words if w not in phrases and w not in SPECIAL_TOKENS]
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(_runs_pattern(plain)), "isolated"),
            pre_tokenizers.Split(Regex(r"^\s+$"), "removed"),  # the spaces between the pieces
        ])
    else:
        tok.pre_tokenizer = pre
    tok.add_special_tokens(SPECIAL_TOKENS)
    tok.add_tokens([AddedToken(w, normalized=False) for w in phrases])
    # ChatML, so the InferenceService can serve it to agents (the ModelProxy applies the template).
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   unk_token="[UNK]", clean_up_tokenization_spaces=False, chat_template=CHAT_TEMPLATE)


def _runs_pattern(entries: list[str]) -> str:
    """A regex whose matches are the pieces of ``unknown_runs``: an entry as a whole token (the
    `Whitespace` pre-tokenizer's tokens: `\\w+` or `[^\\w\\s]+`), or a maximal run of tokens none of
    which is an entry, spaces between them included."""
    import re

    def alt(ws: list[str]) -> str:
        return "|".join(re.escape(w) for w in sorted(ws, key=len, reverse=True)) or r"(?!)"

    word = [w for w in entries if re.fullmatch(r"\w+", w)]
    punct = [w for w in entries if re.fullmatch(r"[^\w\s]+", w)]
    known = rf"(?:(?<!\w)(?:{alt(word)})(?!\w)|(?<![^\w\s])(?:{alt(punct)})(?![^\w\s]))"
    unknown = rf"(?!{known})(?:\w+|[^\w\s]+)"
    return rf"{known}|{unknown}(?:\s*{unknown})*"


def prepare_model_dir(cfg: RunConfig) -> Path:
    """The model directory: `model.path`, or a tiny random-init model built once under output_dir."""
    if cfg.model.path is not None:
        return cfg.resolve(cfg.model.path) if not Path(cfg.model.path).exists() else Path(cfg.model.path)
    out = Path(cfg.output_dir) / "init_model"
    if (out / "config.json").exists():
        return out
    from ale_roll.models import build_tiny_model, load_model, save_model

    tmp = out.with_name("init_model.tmp")
    build_tiny_model(tmp, cfg.model.tiny)
    if cfg.model.word_vocab is not None:
        model, _ = load_model(tmp)
        tok = word_tokenizer(cfg.model.word_vocab, unknown_runs=cfg.model.word_unknown_runs)
        model.resize_token_embeddings(len(tok))
        save_model(model, tok, tmp)
    tmp.rename(out)
    return out


@dataclass
class Policy:
    """The engines of one run."""

    model_dir: Path
    tokenizer: Any
    train: TrainEngine
    inference: InferenceEngine

    @property
    def pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return int(pad if pad is not None else 0)


def _train_engine(cfg: RunConfig, model_dir: Path) -> TrainEngine:
    from ale_roll.engines.torch_engine import OptimConfig
    from ale_roll.models import load_model

    model, _ = load_model(model_dir, dtype=cfg.model.dtype, device=cfg.engine.device)
    o = cfg.optimizer
    optim = OptimConfig(lr=o.lr, weight_decay=o.weight_decay, grad_clip=o.grad_clip)
    if cfg.engine.train == "torch":
        from ale_roll.engines.torch_engine import TorchTrainEngine

        return TorchTrainEngine(model, optim, device=cfg.engine.device)
    try:
        from ale_roll.engines.deepspeed_engine import DeepSpeedConfig, DeepSpeedTrainEngine
    except ImportError as e:
        raise RuntimeError(f"engine.train=deepspeed needs ale-roll[deepspeed]: {e}") from e
    ds = DeepSpeedConfig(zero_stage=cfg.engine.zero_stage, precision="bf16" if cfg.model.dtype == "bfloat16" else "fp32",
                         optim=optim, partition_single_rank=cfg.engine.zero_partition_single_rank)
    return DeepSpeedTrainEngine(model, ds)


def _inference_engine(cfg: RunConfig, model_dir: Path) -> InferenceEngine:
    if cfg.engine.inference_address:
        from ale_roll.engines.inference_client import InferenceClient

        client: InferenceEngine = InferenceClient(cfg.engine.inference_address, timeout_s=cfg.rollout.generate_timeout_s)
        return client
    if cfg.engine.inference == "vllm":
        from ale_roll.engines.vllm_engine import VLLMInferenceEngine

        return VLLMInferenceEngine(model_dir)
    from ale_roll.engines.hf_engine import HFInferenceEngine

    return HFInferenceEngine.from_pretrained(model_dir, dtype=cfg.model.dtype, device=cfg.engine.device)


def configure_compute(cfg: RunConfig) -> ComputeThread:
    """The process's compute thread, switched on or off and given `torch_threads` as `cfg` says."""
    import torch

    e = cfg.engine
    enabled = e.one_torch_thread
    if enabled is None:  # one OpenMP team matters only when ops run on several threads
        enabled = e.device.startswith("cpu") and (e.torch_threads or torch.get_num_threads()) > 1
    thread = compute()
    thread.configure(enabled=enabled, threads=e.torch_threads)
    return thread


def build_policy(cfg: RunConfig) -> Policy:
    """Model directory, tokenizer, train engine and inference engine for `cfg` (built on the compute
    thread, so the main thread never starts an OpenMP team of its own)."""
    return configure_compute(cfg).run(_build_policy, cfg)


def _build_policy(cfg: RunConfig) -> Policy:
    from ale_roll.models import load_tokenizer

    model_dir = prepare_model_dir(cfg)
    return Policy(model_dir, load_tokenizer(model_dir), _train_engine(cfg, model_dir), _inference_engine(cfg, model_dir))
