"""deploy/k8s validates offline against the Kubernetes 1.37 schema (kubernetes-validate ships its
schemas; the check runs in a network namespace of its own where we can make one), and so do the
pods and the NetworkPolicy the kubernetes backend creates. Plus what a schema cannot say: the
privileges of each pod, and that every Secret a pod reads exists."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("kubernetes_validate", reason="needs requirements-dev.txt (kubernetes-validate)")

from ale_rock.backends.base import Limits, SandboxConfig  # noqa: E402
from ale_rock.backends.kubernetes_config import KubernetesBackendConfig  # noqa: E402
from ale_rock.backends.kubernetes_spec import network_policy, pod_manifest  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
VERSION = "1.37.0"
DAEMONSET_CAPS = {"SETUID", "SETGID", "SYS_ADMIN", "CHOWN", "FOWNER", "DAC_OVERRIDE", "KILL"}

_VALIDATE = """
import json, sys, kubernetes_validate
bad = []
for i, doc in enumerate(json.load(sys.stdin)):
    try:
        kubernetes_validate.validate(doc, sys.argv[1], strict=True)
    except Exception as e:
        bad.append(f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}: {e}")
print(json.dumps(bad))
"""


def _docs() -> list[dict[str, Any]]:
    out = []
    for path in sorted(K8S.glob("*.yaml")):
        out += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return out


def _generated() -> list[dict[str, Any]]:
    kc = KubernetesBackendConfig(worker="w1", runtime_class="gvisor")
    cfg = SandboxConfig(
        image="python:3.11", limits=Limits(cpu_millis=500), env={"A": "1"}, labels={"ale.ttl_s": "60"}
    )
    owner = {"apiVersion": "v1", "kind": "Pod", "name": "w", "uid": "0b8f2d3e-1111-4222-8333-444455556666"}
    return [
        pod_manifest(kc, "ale-w1-abc", cfg, "ab" * 24, {"ale.sandbox_id": "sb-1"}, owner),
        network_policy(kc),
    ]


def test_manifests_and_generated_objects_validate_offline() -> None:
    docs = _docs() + _generated()
    assert {d["kind"] for d in docs} >= {
        "Namespace", "Secret", "PersistentVolumeClaim", "Deployment", "Service", "DaemonSet", "Job",
        "Role", "RoleBinding", "ServiceAccount", "ConfigMap", "Pod", "NetworkPolicy",
    }  # fmt: skip
    cmd = [sys.executable, "-c", _VALIDATE, VERSION]
    if os.geteuid() == 0 and shutil.which("unshare"):
        cmd = ["unshare", "-n", *cmd]  # no network at all: the schemas must be the bundled ones
    out = subprocess.run(cmd, input=json.dumps(docs), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


def test_the_validator_rejects_a_broken_manifest() -> None:
    """The check above can fail: a misspelt field is refused in strict mode."""
    import kubernetes_validate

    pod = _generated()[0]
    pod["spec"]["containers"][0]["securityContxt"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, VERSION, strict=True)


def _pod_specs() -> dict[str, dict[str, Any]]:
    specs = {}
    for d in _docs():
        if d["kind"] in ("Deployment", "DaemonSet", "Job"):
            specs[f"{d['kind']}/{d['metadata']['name']}"] = d["spec"]["template"]["spec"]
    specs["sandbox pod"] = _generated()[0]["spec"]
    return specs


def test_privileges_are_the_documented_ones() -> None:
    for name, spec in _pod_specs().items():
        for c in spec.get("initContainers", []) + spec["containers"]:
            sc = c.get("securityContext", {})
            assert sc.get("privileged") is not True, name
            caps = sc.get("capabilities", {})
            assert caps.get("drop") == ["ALL"], name
            if name == "DaemonSet/ale-worker":
                assert set(caps["add"]) == DAEMONSET_CAPS  # docs/kubernetes.md explains each
            else:
                assert not caps.get("add"), name
                assert sc.get("allowPrivilegeEscalation") is False, name
        assert spec.get("hostNetwork") is not True and spec.get("hostPID") is not True, name
        assert not any("hostPath" in v for v in spec.get("volumes", [])), name
    sandbox = _pod_specs()["sandbox pod"]
    c = sandbox["containers"][0]
    assert c["securityContext"]["runAsNonRoot"] is True and sandbox["automountServiceAccountToken"] is False
    assert c["resources"]["requests"] == c["resources"]["limits"]


def test_every_secret_a_pod_reads_exists() -> None:
    secrets = {
        (d["metadata"]["namespace"], d["metadata"]["name"]): set(d["stringData"])
        for d in _docs()
        if d["kind"] == "Secret"
    }
    for d in _docs():
        if d["kind"] not in ("Deployment", "DaemonSet", "Job"):
            continue
        ns = d["metadata"]["namespace"]
        for c in d["spec"]["template"]["spec"]["containers"]:
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["key"] in secrets.get((ns, ref["name"]), set()), (d["metadata"]["name"], ref)


def test_every_image_is_one_make_images_builds() -> None:
    roles = {p.name.removesuffix(".Dockerfile") for p in (REPO / "deploy" / "images").glob("*.Dockerfile")}
    for d in _docs():
        if d["kind"] in ("Deployment", "DaemonSet", "Job"):
            for c in d["spec"]["template"]["spec"]["containers"]:
                name, _, tag = c["image"].partition(":")
                assert name.startswith("ale-") and name.removeprefix("ale-") in roles and tag, c["image"]
