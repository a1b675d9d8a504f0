"""Repo-wide pytest policy.

Tests skip only on a stated missing resource (no bubblewrap, no Docker engine, not root). `make test`
installs and starts all of those, so there it sets ALE_REQUIRE_ALL=1 and a skip becomes a failure:
a missing install step cannot hide behind a green run.
"""

from __future__ import annotations

import os
import signal

import pytest

# A test run started as a background job of a non-interactive shell (`make test &`, a CI step
# launched that way) begins with SIGINT/SIGQUIT *ignored*, and every process a test spawns would
# inherit that: the rocklet tests that interrupt a command in-process would then wait forever. The
# rocklet process itself installs its own handlers (its children get the defaults on exec); give
# the test process the same footing.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGQUIT) is signal.SIG_IGN:
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    # Exempt: `k8s` tests need a real Kubernetes cluster (KUBECONFIG), which make test cannot
    # provide (kind, k3s, minikube and kube-apiserver cannot run on CI's machine); their scenarios
    # run there against the fake API server instead (docs/kubernetes.md).
    exempt = item.get_closest_marker("k8s") is not None
    if os.environ.get("ALE_REQUIRE_ALL") == "1" and report.skipped and not exempt:
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under ALE_REQUIRE_ALL=1 (make test provides every resource): {reason}"
