"""Fixtures of the SDK's end-to-end tests: a real Admin and a real Worker (bubblewrap backend)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from ale_rock.local_cluster import LocalCluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (apt bubblewrap) is not installed")
    workdir: Path = tmp_path_factory.mktemp("rock-sdk")
    c = LocalCluster(workers=1, workdir=workdir, admin_config={"reaper_interval_s": 0.2})
    with c:
        yield c
