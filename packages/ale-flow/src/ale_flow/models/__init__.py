"""Model clients: the `Model` Protocol (`base`), the OpenAI-compatible client (`openai`), the
scripted model (`scripted`, and scripts read from files: `script_file`) and the `<tool_call>` text format (`textcalls`)."""

from __future__ import annotations

from ale_flow.models.base import Model, ModelError

__all__ = ["Model", "ModelError"]
