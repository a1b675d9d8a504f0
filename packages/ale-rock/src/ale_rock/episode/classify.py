"""Which failures are the infrastructure's: exceptions of a phase and failed model calls.

A failed call's record says what the upstream answered. Its HTTP status is read from the record
when the proxy stores one (a ``status`` field, or an OpenAI-style error body with a numeric
``code``), else from the error text; the text of a refused or unreachable upstream is recognised
by its usual words. A call the *agent* got wrong (a 4xx about its own request, its episode's call
budget) is the agent's doing, not an error of the episode.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ale_rock.episode.outcome import EpisodeError, ErrorKind

_STATUS = re.compile(r"\b(?:HTTP|status|code)\W{0,3}([1-5]\d\d)\b", re.IGNORECASE)
_UNAUTHORIZED = re.compile(
    r"\b(unauthori[sz]ed|invalid[_ ]api[_ ]key|incorrect api key|authentication|forbidden|permission denied)\b",
    re.IGNORECASE,
)
_UNREACHABLE = re.compile(
    r"(connect|unreachable|refused|unavailable|timed? ?out|deadline|failed after \d+ attempts|"
    r"name or service not known|no route to host|reset by peer)",
    re.IGNORECASE,
)
_AGENT_LIMIT = re.compile(r"limit of \d+ calls", re.IGNORECASE)
_AGENT_FAULT = re.compile(r"(invalid_value|param)", re.IGNORECASE)
_CONTEXT = re.compile(r"(context.length|context is \d+|too long|exceeds the context)", re.IGNORECASE)


def call_status(record: Any) -> int:
    """The HTTP status the upstream answered for a failed call (0 if unknown)."""
    for name in ("status", "http_status", "status_code"):
        value = getattr(record, name, 0)
        if isinstance(value, int) and 100 <= value <= 599:
            return value
    err = (getattr(record, "response", None) or {}).get("error")
    if isinstance(err, dict):
        for key in ("status", "code"):
            value = err.get(key)
            if isinstance(value, int) and 100 <= value <= 599:
                return value
    m = _STATUS.search(str(getattr(record, "error", "") or ""))
    return int(m.group(1)) if m else 0


def failed(record: Any) -> bool:
    """Whether the call failed (the agent got an HTTP error)."""
    return bool(getattr(record, "error", "")) or getattr(record, "stop_reason", "") == "error"


def classify_call(record: Any) -> ErrorKind | None:
    """The error kind of a failed call, or None when the call succeeded or failed by the agent's doing."""
    if not failed(record):
        return None
    text = str(getattr(record, "error", "") or "")
    status = call_status(record)
    if status in (401, 403) or (not status and _UNAUTHORIZED.search(text)):
        return ErrorKind.MODEL_UNAUTHORIZED
    if status in (408, 502, 503, 504) or (not status and _UNREACHABLE.search(text)):
        return ErrorKind.MODEL_UNREACHABLE
    if status == 429:
        # The episode's own call budget is the agent's limit; an upstream's rate limit is not.
        return None if _AGENT_LIMIT.search(text) else ErrorKind.MODEL_UNREACHABLE
    if _CONTEXT.search(text):
        # The agent's context outgrew the model: its own doing after its first call; on the first
        # call the model cannot serve this agent at all (a setup error, nothing was measured).
        return ErrorKind.MODEL_ERROR if getattr(record, "index", 0) == 0 else None
    if status in (400, 413, 422) or (not status and _AGENT_FAULT.search(text)):
        return None  # the agent's request was refused: its own mistake, recorded for training
    return ErrorKind.MODEL_ERROR


def first_call_error(records: Sequence[Any]) -> EpisodeError | None:
    """The first model call the infrastructure failed, as an error of the agent phase."""
    for rec in records:
        kind = classify_call(rec)
        if kind is not None:
            status = call_status(rec)
            detail = f"HTTP {status}: " if status and str(status) not in str(rec.error)[:12] else ""
            return EpisodeError(kind, f"model call {rec.index} failed: {detail}{str(rec.error)[:500]}", "agent")
    return None


def classify_exception(e: BaseException, phase: str) -> EpisodeError:
    """An exception raised by a phase, as a typed error."""
    from ale_rock.envs import errors as env
    from ale_rock.sdk import errors as sdk
    from ale_rock.sdk.model_proxy import ModelProxyClientError

    if isinstance(e, EpisodeError):
        return e
    msg = f"{type(e).__name__}: {e}"
    if isinstance(e, sdk.SandboxLost | sdk.SandboxNotFound):
        return EpisodeError(ErrorKind.SANDBOX_LOST, msg, phase)
    if isinstance(e, ModelProxyClientError):
        return EpisodeError(ErrorKind.PROXY_FAILED, msg, phase)
    # The env layer refused the request (one hierarchy with the SDK's errors): not the sandbox's fault.
    env_refused = isinstance(e, env.EnvNotFound | env.InvalidAction | env.EpisodeNotActive | env.EnvDeadlineExceeded)
    if phase == "setup":
        from ale_rock.tasks.evaluate import TaskPhaseError

        if isinstance(e, TaskPhaseError) or env_refused:
            return EpisodeError(ErrorKind.SETUP_FAILED, msg, phase)
        if isinstance(e, sdk.SandboxError | OSError):
            return EpisodeError(ErrorKind.SANDBOX_UNAVAILABLE, msg, phase)
        return EpisodeError(ErrorKind.SETUP_FAILED, msg, phase)
    if not env_refused and isinstance(e, sdk.Unavailable | sdk.FailedPrecondition):
        return EpisodeError(ErrorKind.SANDBOX_LOST, msg, phase)
    if phase == "verify":
        return EpisodeError(ErrorKind.VERIFIER_FAILED, msg, phase)
    return EpisodeError(ErrorKind.INTERNAL, msg, phase)
