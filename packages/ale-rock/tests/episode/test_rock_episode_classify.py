"""Which failed model calls and phase exceptions are the infrastructure's, and of what kind."""

from __future__ import annotations

from ale_rock.envs.errors import SandboxLost
from ale_rock.episode import ErrorKind, classify_call, classify_exception
from ale_rock.proxy.records import CallRecord
from ale_rock.sdk import errors as sdk
from ale_rock.sdk.model_proxy import ModelProxyClientError
from ale_rock.tasks.evaluate import TaskPhaseError
from ale_rock.tasks.runner import CommandResult


def _failed(error: str, **kw: object) -> CallRecord:
    rec = CallRecord(index=0, episode_id="e", stop_reason="error", error=error)
    for k, v in kw.items():
        setattr(rec, k, v)
    return rec


def test_failed_calls_by_kind() -> None:
    assert classify_call(CallRecord(index=0, episode_id="e", prompt_token_ids=[1], stop_reason="stop")) is None
    assert classify_call(_failed("Incorrect API key provided: sk-x")) is ErrorKind.MODEL_UNAUTHORIZED
    assert classify_call(_failed("denied", status=403)) is ErrorKind.MODEL_UNAUTHORIZED
    assert classify_call(_failed("upstream failed after 5 attempts: ConnectError: [Errno 111] Connection refused")) \
        is ErrorKind.MODEL_UNREACHABLE
    assert classify_call(_failed("inference service: failed to connect to all addresses")) is ErrorKind.MODEL_UNREACHABLE
    assert classify_call(_failed("HTTP 503: overloaded")) is ErrorKind.MODEL_UNREACHABLE
    assert classify_call(_failed("", response={"error": {"code": 404}})) is ErrorKind.MODEL_ERROR
    # The agent's own mistakes are not the infrastructure's: no error for the episode.
    assert classify_call(_failed("max_tokens: must be positive", status=400)) is None
    assert classify_call(_failed("the episode's limit of 4 calls is reached", status=429)) is None
    assert classify_call(_failed("rate limited", status=429)) is ErrorKind.MODEL_UNREACHABLE
    # A context the model cannot hold: on the first call nothing was measured; later, the agent outgrew it.
    overflow = "inference service: the prompt has 3729 tokens; the model's context is 1024"
    assert classify_call(_failed(overflow)) is ErrorKind.MODEL_ERROR
    assert classify_call(_failed(overflow, index=3)) is None


def test_phase_exceptions_by_kind() -> None:
    assert classify_exception(SandboxLost("gone"), "agent").kind is ErrorKind.SANDBOX_LOST
    assert classify_exception(sdk.SandboxNotFound("gone"), "verify").kind is ErrorKind.SANDBOX_LOST
    assert classify_exception(ModelProxyClientError("down", "UNAVAILABLE"), "open").kind is ErrorKind.PROXY_FAILED
    assert classify_exception(TaskPhaseError("setup.sh", CommandResult(1, "x", False, 0.1)), "setup").kind \
        is ErrorKind.SETUP_FAILED
    assert classify_exception(sdk.QuotaExceeded("full"), "setup").kind is ErrorKind.SANDBOX_UNAVAILABLE
    assert classify_exception(ValueError("bad reward"), "verify").kind is ErrorKind.VERIFIER_FAILED
    err = classify_exception(KeyError("x"), "agent")
    assert err.kind is ErrorKind.INTERNAL and err.phase == "agent" and "KeyError" in err.message
