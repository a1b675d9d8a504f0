"""The built-in suite: its shape, and that every task validates on the local runner."""

from __future__ import annotations

import os
import time
from collections import Counter

import pytest
from ale_rock.tasks import Domain, Split, load_suite, validate_many


def test_suite_shape() -> None:
    tasks = load_suite()
    assert len(tasks) >= 40
    per_domain = Counter(t.spec.domain for t in tasks)
    assert set(per_domain) == set(Domain)
    assert min(per_domain.values()) >= 5, per_domain
    held = Counter(t.spec.domain for t in tasks if t.spec.split is Split.HELD_OUT)
    train = Counter(t.spec.domain for t in tasks if t.spec.split is Split.TRAIN)
    for d in Domain:
        assert held[d] >= 2 and train[d] >= 3, (d, held[d], train[d])


def test_suite_tasks_are_self_contained() -> None:
    for t in load_suite():
        assert t.spec.env is None and t.spec.dockerfile is None, t.id
        assert t.path is not None and t.path.name == t.id, t.id
        assert t.path.parent.name == t.spec.domain.value, t.id
        # hidden tests must not leak into what the agent gets
        assert not set(t.tests) & set(t.setup), t.id
        for name, data in {**t.tests, **t.solution, **t.setup}.items():
            if name.endswith((".py", ".sh")):
                assert b"pip install" not in data and b"import numpy" not in data, (t.id, name)


@pytest.mark.slow
def test_every_builtin_task_validates() -> None:
    tasks = load_suite()
    start = time.monotonic()
    reports = validate_many(tasks, jobs=2 * (os.cpu_count() or 1))
    bad = [r.summary() for r in reports if not r.ok]
    assert not bad, "\n".join(bad)
    assert all(len(r.reference[0].tests) >= 3 for r in reports)
    print(f"validated {len(reports)} tasks in {time.monotonic() - start:.1f}s")
