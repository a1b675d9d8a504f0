"""Model files: tiny random-init models for tests, loading (safetensors or GGUF) and saving."""

from ale_roll.models.io import load_model, load_tokenizer, resolve_model, save_model
from ale_roll.models.tiny import TinyModelConfig, build_tiny_model, train_tokenizer

__all__ = [
    "TinyModelConfig",
    "build_tiny_model",
    "load_model",
    "load_tokenizer",
    "resolve_model",
    "save_model",
    "train_tokenizer",
]
