"""A real egress gateway and a real bubblewrap LocalBackend bound to it, as generators the backend
and egress conftests turn into their module fixtures."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ale_rock.backends.local import LocalBackend, LocalBackendConfig
from ale_rock.egress.gateway import EgressGateway


def running_gateway(socket_dir: Path) -> Iterator[EgressGateway]:
    """An egress gateway on ``socket_dir/egress.sock`` until the generator is closed."""
    g = EgressGateway()
    g.start(socket_dir / "egress.sock")
    try:
        yield g
    finally:
        g.stop()


def local_backend(state_dir: Path, gateway: EgressGateway, **config: Any) -> Iterator[LocalBackend]:
    """A LocalBackend (one warm slot, fast kills; ``config`` overrides) sending egress to ``gateway``;
    skips where bubblewrap or root is missing."""
    if shutil.which("bwrap") is None or os.geteuid() != 0:
        pytest.skip("needs bubblewrap and root")
    cfg = {"pool_size": 1, "kill_grace_s": 0.5, **config}
    b = LocalBackend(LocalBackendConfig(state_dir=state_dir, egress_socket=str(gateway.socket_path), **cfg))
    try:
        yield b
    finally:
        b.close()
