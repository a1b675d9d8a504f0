"""ale-rock: ALE's sandbox manager (Admin, Workers, Rocklet, backends) and its Python SDK.

>>> from ale_rock import Sandbox                      # doctest: +SKIP
>>> with Sandbox.create(cpu=0.5, memory="256Mi") as sb:
...     print(sb.exec("echo hello").stdout)

Names are resolved lazily (PEP 562) so that the ``ale-rock`` CLI and the servers start without
importing the SDK's gRPC stack until they need it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ale_rock.sdk import (
        AsyncClient,
        AsyncSandbox,
        AsyncSandboxGroup,
        AsyncSession,
        Client,
        Sandbox,
        SandboxGroup,
        Session,
    )
    from ale_rock.sdk.errors import (
        ChecksumMismatch,
        DeadlineExceeded,
        FailedPrecondition,
        InvalidArgument,
        PermissionDenied,
        QuotaExceeded,
        SandboxError,
        SandboxLost,
        SandboxNotFound,
        SandboxStartFailed,
        Unauthenticated,
        Unavailable,
    )
    from ale_rock.sdk.types import ExecEvent, ExecResult, FileEntry, SandboxChange, SandboxInfo, SandboxStats

__version__ = "0.1.0"

_WHERE = {
    **dict.fromkeys(
        ["AsyncClient", "AsyncSandbox", "AsyncSandboxGroup", "AsyncSession", "Client", "Sandbox", "SandboxGroup",
         "Session"], "ale_rock.sdk"),
    **dict.fromkeys(
        ["ChecksumMismatch", "DeadlineExceeded", "FailedPrecondition", "InvalidArgument", "PermissionDenied",
         "QuotaExceeded", "SandboxError", "SandboxLost", "SandboxNotFound", "SandboxStartFailed", "Unauthenticated",
         "Unavailable"], "ale_rock.sdk.errors"),
    **dict.fromkeys(
        ["ExecEvent", "ExecResult", "FileEntry", "SandboxChange", "SandboxInfo", "SandboxStats"], "ale_rock.sdk.types"),
}

__all__ = [
    "AsyncClient", "AsyncSandbox", "AsyncSandboxGroup", "AsyncSession", "ChecksumMismatch", "Client",
    "DeadlineExceeded", "ExecEvent", "ExecResult", "FailedPrecondition", "FileEntry", "InvalidArgument",
    "PermissionDenied", "QuotaExceeded", "Sandbox", "SandboxChange", "SandboxError", "SandboxGroup", "SandboxInfo",
    "SandboxLost", "SandboxNotFound", "SandboxStartFailed", "SandboxStats", "Session", "Unauthenticated",
    "Unavailable", "__version__",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'ale_rock' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
