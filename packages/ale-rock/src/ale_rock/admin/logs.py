"""Structured logging for the ale-rock processes (the Admin and the worker): one JSON object per
line with ``ts``, ``level``, ``logger`` and ``msg``, plus the record's ``extra`` fields."""

from __future__ import annotations

import json
import logging
import sys
import time

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """Formats a record and its ``extra`` fields as one JSON line."""

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": round(time.time(), 3), "level": record.levelname.lower(), "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure(level: str = "INFO", json_logs: bool = True) -> None:
    """Route the ale_rock loggers to stderr (called by the CLI, never on import)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_logs else logging.Formatter("%(levelname)s %(name)s %(message)s"))
    root = logging.getLogger("ale_rock")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
