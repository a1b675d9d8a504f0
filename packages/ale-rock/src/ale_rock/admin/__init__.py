"""The Admin: ale-rock's control plane (SandboxService + WorkerRegistryService on one port).

The gRPC servicers are thin; the logic lives in plain-Python modules: :mod:`.store` (durable
SQLite state), :mod:`.state` (the sandbox state machine), :mod:`.quotas` (admission control),
:mod:`.scheduler` (placement by free resources), :mod:`.auth` (API keys and join tokens) and
:mod:`.manager` (the lifecycle that ties them together).
"""

from ale_rock.admin.config import AdminConfig

__all__ = ["AdminConfig"]
