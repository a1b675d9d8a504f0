"""Timeouts of an agent episode's phases."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class EpisodeTimeouts(BaseModel):
    """Every phase of an episode runs under one of these (seconds). A phase past its timeout ends
    the episode as an ``timeout`` error; the sandbox is deleted and the proxy episode closed anyway."""

    model_config = ConfigDict(extra="forbid")

    setup_s: float | None = Field(default=None, gt=0)
    """Sandbox creation + task files + setup script; None: the task's ``limits.setup_s`` plus ``margin_s``."""
    open_s: float = Field(default=30.0, gt=0)
    """Opening the proxy episode."""
    agent_grace_s: float = Field(default=30.0, ge=0)
    """How long past its budget an agent may take to stop (the budget itself is the agent's: running
    out of it is a failure, not an error)."""
    close_s: float = Field(default=30.0, gt=0)
    """Closing the proxy episode (its key dies)."""
    records_s: float = Field(default=30.0, gt=0)
    """Reading the episode's call records back."""
    verify_s: float | None = Field(default=None, gt=0)
    """The hidden tests; None: the task's ``limits.test_s`` plus ``margin_s``."""
    cleanup_s: float = Field(default=30.0, gt=0)
    """Deleting the sandbox (and closing the proxy episode if an earlier phase failed)."""
    margin_s: float = Field(default=30.0, ge=0)
    """Added to the task's own limits where ``setup_s`` / ``verify_s`` are None (the sandbox
    enforces the limit; the margin covers the round trips around it)."""
