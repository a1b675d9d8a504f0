"""The ale-rock Python SDK (sync :class:`Sandbox`, async :class:`AsyncSandbox`)."""

from ale_rock.sdk.async_sandbox import AsyncSandbox, AsyncSession
from ale_rock.sdk.client import AsyncClient, Client
from ale_rock.sdk.group import AsyncSandboxGroup, SandboxGroup
from ale_rock.sdk.sandbox import Sandbox, Session

__all__ = [
    "AsyncClient", "AsyncSandbox", "AsyncSandboxGroup", "AsyncSession", "Client", "Sandbox", "SandboxGroup",
    "Session",
]
