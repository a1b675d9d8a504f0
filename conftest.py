"""Repo-wide pytest policy.

Tests skip only on a stated missing resource (no bubblewrap, no Docker engine, not root). `make test`
installs and starts all of those, so there it sets ALE_REQUIRE_ALL=1 and a skip becomes a failure:
a missing install step cannot hide behind a green run.
"""

from __future__ import annotations

import os

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("ALE_REQUIRE_ALL") == "1" and report.skipped:
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under ALE_REQUIRE_ALL=1 (make test provides every resource): {reason}"
