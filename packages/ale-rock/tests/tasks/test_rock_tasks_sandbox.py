"""Built-in tasks validate inside real sandboxes: Admin + Worker + bubblewrap, through the SDK."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from ale_rock.tasks import TaskRunner, builtin_suite_dir, load_task, validate_task
from ale_rock.tasks.sandbox_runner import SandboxRunner

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (apt bubblewrap) is not installed")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from ale_rock.local_cluster import LocalCluster

    with LocalCluster(workers=1, workdir=tmp_path_factory.mktemp("rock-tasks")) as c:
        yield c


def test_runner_basics_in_a_sandbox(cluster) -> None:  # type: ignore[no-untyped-def]
    with SandboxRunner.create(cluster.client()) as r:
        assert isinstance(r, TaskRunner)
        r.upload({"d/x.txt": b"hi\n"})
        res = r.run("cat d/x.txt; pwd; exit 4", timeout_s=20)
        assert res.exit_code == 4 and "hi" in res.output and "/workspace" in res.output
        assert r.run("sleep 20", timeout_s=0.5).timed_out
        r.run("mkdir -p locked && chmod 500 locked", timeout_s=20)
        r.reset()
        assert r.run("ls -A | wc -l", timeout_s=20).output.strip() == "0"


@pytest.mark.parametrize(
    "rel", ["data_processing/csv-sales-rollup", "sysadmin/fix-permissions", "security/sql-injection-fix"]
)
def test_task_validates_in_a_sandbox(cluster, rel: str) -> None:  # type: ignore[no-untyped-def]
    task = load_task(Path(builtin_suite_dir()) / rel)
    with SandboxRunner.create(cluster.client()) as r:
        rep = validate_task(task, r)
    assert rep.ok, rep.summary()
