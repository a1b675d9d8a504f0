"""ALE — the Agentic Learning Ecosystem. The `ale` CLI runs ale-rock, ale-flow and ale-roll together."""

__version__ = "0.1.0"
__all__ = ["__version__"]
