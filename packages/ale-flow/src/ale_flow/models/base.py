"""The model Protocol: what the loop needs from any chat model."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ale_flow.types import ModelResponse


class ModelError(Exception):
    """The model endpoint failed for good (after retries)."""


@runtime_checkable
class Model(Protocol):
    """A chat model that may call tools."""

    context_window: int
    """Tokens the model can attend to; compression triggers at a fraction of it."""

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelResponse:
        """One completion for OpenAI-format `messages`, offering OpenAI-format `tools`."""
        ...


def model_info(model: object) -> dict[str, str]:
    """`{"model", "provider"}` for trajectories: the name the endpoint was asked for (a model's
    optional `name`) and where it came from (optional `provider`); the class name otherwise."""
    cls = type(model).__name__
    return {"model": str(getattr(model, "name", None) or cls), "provider": str(getattr(model, "provider", None) or cls)}
