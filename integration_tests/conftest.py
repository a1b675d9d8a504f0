"""A live stack (admin + worker as separate processes on free ports) shared by integration tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ale.config import UpConfig
from ale.supervisor import Stack
from ale.up import plan_services


@pytest.fixture(scope="module")
def live_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    run_dir: Path = tmp_path_factory.mktemp("stack")
    stack = Stack(run_dir)
    specs, endpoints = plan_services(run_dir, UpConfig())
    try:
        for spec in specs:
            stack.start(spec)
            stack.wait_healthy(spec.name, timeout_s=120)
        yield {**endpoints, "stack": stack, "run_dir": run_dir}
    finally:
        stack.stop_all()
