"""The objects the ``kubernetes`` backend creates, as plain dicts (the API's camelCase JSON).

Plain dicts, not the client's models: they are what the API server and ``kubernetes-validate`` see,
the fake API server stores them as they are, and building them needs no client import.
"""

from __future__ import annotations

import json
from typing import Any

from ale_rock.backends.base import SandboxConfig
from ale_rock.backends.kubernetes_config import KubernetesBackendConfig

LABEL_BACKEND = "ale.backend"
LABEL_WORKER = "ale.worker"
LABEL_SANDBOX = "ale.sandbox_id"
LABEL_POOL = "ale.pool"
LABEL_STATE = "ale.state"  # "warm" (pool, unclaimed) or "claimed"
LABEL_TTL = "ale.ttl_s"  # a TTL in seconds for callers of the backend that set no ttl_seconds
ROCKLET_MODULE = "ale_rock.backends.kubernetes_rocklet"
CONTAINER = "sandbox"
ALE_MOUNT = "/ale"  # the emptyDir the init container fills with the Rocklet


def pool_key(image: str, cpu_millis: int, memory_bytes: int) -> str:
    """The ``ale.pool`` label value of one (image, cpu, memory) pool (a label value: 63 chars)."""
    import hashlib

    return hashlib.sha256(f"{image}\0{cpu_millis}\0{memory_bytes}".encode()).hexdigest()[:32]


def rocklet_settings(config: SandboxConfig) -> str:
    """The Rocklet's settings (``RockletSettings`` as JSON): no egress socket, the pod's network
    policy is the egress control."""
    return json.dumps({"workdir": config.workdir, "env": dict(config.env), "spill_dir": "/tmp/.ale",
                       "own_sandbox": True})  # the pod's container has its own pid namespace


def pod_manifest(
    kc: KubernetesBackendConfig,
    name: str,
    config: SandboxConfig,
    token: str,
    labels: dict[str, str],
    owner: dict[str, Any] | None,
) -> dict[str, Any]:
    """One sandbox pod: the Rocklet (copied in by an init container) is its main process."""
    limits = config.limits
    resources = {  # requests = limits: the Guaranteed QoS class, never overcommitted or evicted first
        "cpu": f"{limits.cpu_millis}m",
        "memory": str(limits.memory_bytes),
        "ephemeral-storage": str(limits.disk_bytes),
    }
    ttl = config.ttl_seconds or int(config.labels.get(LABEL_TTL, "0") or 0) or kc.default_ttl_s
    locked = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "runAsUser": kc.run_as_uid,
        "runAsGroup": kc.run_as_uid,
        "readOnlyRootFilesystem": config.read_only_root,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": kc.namespace,
            "labels": {LABEL_BACKEND: "kubernetes", LABEL_WORKER: kc.worker, **labels},
        },
        "spec": {
            "restartPolicy": "Never",  # a sandbox that dies is LOST, never silently restarted empty
            "automountServiceAccountToken": False,  # the sandbox gets no API credential
            "enableServiceLinks": False,
            "activeDeadlineSeconds": ttl,
            "terminationGracePeriodSeconds": 5,
            "securityContext": {"fsGroup": kc.run_as_uid, "seccompProfile": {"type": "RuntimeDefault"}},
            "initContainers": [
                {
                    "name": "rocklet-inject",
                    "image": kc.rocklet_image,
                    "command": ["cp", "-a", f"{kc.rocklet_dir}/.", ALE_MOUNT],
                    "volumeMounts": [{"name": "ale", "mountPath": ALE_MOUNT}],
                    "resources": {"requests": resources, "limits": resources},
                    "securityContext": {**locked, "readOnlyRootFilesystem": True},
                }
            ],
            "containers": [
                {
                    "name": CONTAINER,
                    "image": config.image,
                    "command": [f"{ALE_MOUNT}/bin/python", "-m", ROCKLET_MODULE],
                    "workingDir": config.workdir,
                    "env": [
                        {
                            "name": "ALE_ROCKLET_HOST",
                            "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
                        },
                        {"name": "ALE_ROCKLET_PORT", "value": str(kc.rocklet_port)},
                        {"name": "ALE_ROCKLET_TOKEN", "value": token},
                        {"name": "ALE_ROCKLET_SETTINGS", "value": rocklet_settings(config)},
                    ],
                    "ports": [{"name": "rocklet", "containerPort": kc.rocklet_port, "protocol": "TCP"}],
                    "readinessProbe": {"grpc": {"port": kc.rocklet_port}, "periodSeconds": 1},
                    "resources": {"requests": resources, "limits": resources},
                    "securityContext": locked,
                    "volumeMounts": [
                        {"name": "ale", "mountPath": ALE_MOUNT, "readOnly": True},
                        {"name": "work", "mountPath": config.workdir},
                        {"name": "tmp", "mountPath": "/tmp"},
                    ],
                }
            ],
            "volumes": [
                {"name": "ale", "emptyDir": {}},
                {"name": "work", "emptyDir": {"sizeLimit": str(limits.disk_bytes)}},
                {"name": "tmp", "emptyDir": {"sizeLimit": str(256 * 2**20)}},
            ],
        },
    }
    if kc.runtime_class:
        pod["spec"]["runtimeClassName"] = kc.runtime_class
    if owner is not None:
        pod["metadata"]["ownerReferences"] = [owner]
    return pod


def network_policy(kc: KubernetesBackendConfig) -> dict[str, Any]:
    """Deny all egress of sandbox pods but TCP to the ModelProxy (no DNS either: a resolver is a
    tunnel out; sandboxes get the proxy's address, not a name); ingress only from the workers, on
    the Rocklet port."""
    ns_selector = {"matchLabels": {"kubernetes.io/metadata.name": kc.proxy_namespace}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "ale-sandboxes", "namespace": kc.namespace},
        "spec": {
            "podSelector": {"matchLabels": {LABEL_BACKEND: "kubernetes"}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {
                    "from": [  # workers in this namespace (pod-mode workers live by their pods) or the services'
                        {"podSelector": {"matchLabels": kc.worker_selector}},
                        {
                            "namespaceSelector": ns_selector,
                            "podSelector": {"matchLabels": kc.worker_selector},
                        },
                    ],
                    "ports": [{"protocol": "TCP", "port": kc.rocklet_port}],
                }
            ],
            "egress": [
                {
                    "to": [
                        {"namespaceSelector": ns_selector, "podSelector": {"matchLabels": kc.proxy_selector}}
                    ],
                    "ports": [{"protocol": "TCP", "port": kc.proxy_port}],
                }
            ],
        },
    }
