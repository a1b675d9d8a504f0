"""Detection of loops (identical calls, repeated content, ping-pong) and tool failure streaks."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from ale_flow.types import ToolCall, ToolResult


class DetectionConfig(BaseModel):
    """Thresholds for loop and failure detection."""

    model_config = ConfigDict(extra="forbid")

    identical_calls: int = 4
    """Consecutive identical tool calls (same name and arguments) that count as a loop."""
    repeated_content: int = 3
    """Times the same assistant text may recur within the last 10 replies."""
    ping_pong_cycles: int = 3
    """A-B-A-B cycles of alternating calls that count as a loop."""
    failure_streak: int = 4
    """Consecutive failed tool calls that trigger an intervention."""
    max_interventions: int = 2
    """Interventions allowed before a further detection stops the run."""


@dataclass
class Verdict:
    kind: str  # "loop" | "failure"
    message: str
    stop: bool


@dataclass
class Detector:
    cfg: DetectionConfig
    signatures: list[str] = field(default_factory=list)
    contents: list[str] = field(default_factory=list)
    failures: int = 0
    interventions: int = 0

    def _verdict(self, kind: str, message: str) -> Verdict:
        self.interventions += 1
        stop = self.interventions > self.cfg.max_interventions
        # Reset the evidence so the model gets a fair chance after an intervention.
        self.signatures.clear()
        self.contents.clear()
        self.failures = 0
        return Verdict(kind, message, stop)

    def observe(self, content: str, calls: list[ToolCall], results: list[ToolResult]) -> Verdict | None:
        """Feed one step; returns a verdict when the model looks stuck."""
        text = " ".join(content.split())
        if text:
            self.contents = (self.contents + [text])[-10:]
        for c in calls:
            self.signatures.append(c.signature())
        self.signatures = self.signatures[-50:]
        for r in results:
            self.failures = self.failures + 1 if r.is_error else 0

        n = self.cfg.identical_calls
        if len(self.signatures) >= n and len(set(self.signatures[-n:])) == 1:
            name = self.signatures[-1].split(":", 1)[0]
            return self._verdict("loop", f"You called {name} with identical arguments {n} times in a row. It will not give a different result; change approach.")
        k = 2 * self.cfg.ping_pong_cycles
        tail = self.signatures[-k:]
        if len(tail) == k and len(set(tail)) == 2 and all(tail[i] != tail[i + 1] for i in range(k - 1)):
            return self._verdict("loop", "You are alternating between the same two tool calls without progress. Stop and rethink the approach.")
        if text and self.contents.count(text) >= self.cfg.repeated_content:
            return self._verdict("loop", "You keep writing the same reply. Make progress or finish with a final answer.")
        if self.failures >= self.cfg.failure_streak:
            return self._verdict("failure", f"The last {self.failures} tool calls failed. Read the errors carefully, check your assumptions (paths, arguments) and try a different approach.")
        return None
