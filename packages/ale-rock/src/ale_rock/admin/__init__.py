"""The Admin: ale-rock's control plane (SandboxService + WorkerRegistryService on one port).

The gRPC servicers are thin; the logic lives in plain-Python modules: :mod:`.store` (durable
SQLite state), :mod:`.state` (the sandbox state machine), :mod:`.quotas` (admission control),
:mod:`.scheduler` (placement by free resources), :mod:`.auth` (API keys and join tokens). The
state in memory lives in small parts with one job each — :mod:`.worker_registry` (registration,
heartbeats, lost workers), :mod:`.lifecycle` (sandbox states), :mod:`.feed` (watch fan-out),
:mod:`.records` (the store's cache), :mod:`.reconcile` (worker reports applied to sandboxes) —
composed by :mod:`.manager`; :mod:`.forward` relays the calls that run inside a sandbox to its
worker.
"""

from ale_rock.admin.config import AdminConfig

__all__ = ["AdminConfig"]
