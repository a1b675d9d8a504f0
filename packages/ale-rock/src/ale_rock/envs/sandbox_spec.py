"""What one sandbox is asked for, and the operator's policy that bounds it.

A task's ``[environment]`` (image, work dir, env, CPUs, memory, egress allow-list) becomes a
:class:`SandboxSpec` in one place (``ale_rock.tasks.environment.sandbox_spec``); every path that
makes a sandbox for a task — ``ale-rock tasks run|validate``, the episode runner behind ``ale eval``
and ale-roll's agent-native training — passes that spec through the operator's
:class:`SandboxPolicy` before creating the sandbox. The task can only *narrow* what the policy
allows: a task asking for more CPU or memory than the policy's maximum, or for egress when the
policy gives tasks none, is **refused** (:class:`SandboxSpecRefused`, naming the task's field) —
never silently clamped, since a task sized for 4 CPUs that gets 2 is measured on something else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ale_rock.egress.admission import MODEL_PROXY_HOST

EgressRule = str | tuple[str, int]
"""``host`` (any port) or ``(host, port)``, as ``ale_rock.sdk.Sandbox.create(allow=...)`` takes it."""

_BASE_WORKDIR = "/workspace"
"""The one work dir ALE's base image has for the sandbox user."""


class SandboxSpecRefused(ValueError):
    """A task asked for more than the operator's policy allows; ``field`` names the task's setting."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


@dataclass(frozen=True)
class SandboxSpec:
    """The sandbox a task asks for; unset fields take the provider's (operator's) defaults."""

    image: str = ""
    """A ready or built image; "" = the provider's image (ALE's base image)."""
    workdir: str = ""
    """Absolute work dir; "" = the provider's (``/workspace``)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Environment variables of every process in the sandbox (the agent's included)."""
    cpu: float | None = None
    """CPUs (cgroup quota); None = the policy's default."""
    memory_bytes: int | None = None
    """Memory limit; None = the policy's default."""
    allow: tuple[EgressRule, ...] = ()
    """The task's egress allow-list; empty = no egress of the task's own."""
    read_only_root: bool = False
    """The sandbox's root is read-only and ``workdir`` its own mount (docker base image, other work dir)."""

    def for_backend(self, backend: str) -> SandboxSpec:
        """The spec as ``backend`` needs it: on docker, ALE's base image has only ``/workspace`` for
        the sandbox user, so another work dir on the base image comes as a read-only root with the
        work dir its own mount (which also matches the local backend)."""
        if backend == "docker" and not self.image and self.workdir and self.workdir != _BASE_WORKDIR:
            return replace(self, read_only_root=True)
        return self

    def create_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``Sandbox.create`` for the fields set (``image`` always)."""
        kw: dict[str, Any] = {"image": self.image}
        if self.workdir:
            kw["workdir"] = self.workdir
        if self.env:
            kw["env"] = dict(self.env)
        if self.cpu is not None:
            kw["cpu"] = self.cpu
        if self.memory_bytes is not None:
            kw["memory"] = self.memory_bytes
        if self.allow:
            kw["allow"] = list(self.allow)
        if self.read_only_root:
            kw["read_only_root"] = True
        return kw


class SandboxPolicy(BaseModel):
    """The operator's bounds on what a task's ``[environment]`` may ask for (per sandbox).

    A task's setting within the bounds is applied as asked; beyond them the sandbox is refused
    with :class:`SandboxSpecRefused` naming the setting (one behaviour everywhere: no clamping)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default_cpu: float | None = Field(default=None, gt=0)
    """CPUs of a sandbox whose task sets none; None: the server's default (1 CPU)."""
    default_memory_bytes: int | None = Field(default=None, gt=0)
    """Memory of a sandbox whose task sets none; None: the server's default."""
    max_cpu: float | None = Field(default=None, gt=0)
    """Most CPUs a task may ask for; None: only the server's limits (quotas, the workers' capacity)."""
    max_memory_bytes: int | None = Field(default=None, gt=0)
    """Most memory a task may ask for; None: only the server's limits."""
    task_egress: bool = True
    """Whether a task's ``allowlist`` opens egress to its hosts (through the worker's egress gateway,
    which still refuses loopback, private addresses and ALE's own services). False: a task with an
    allow-list is refused; tasks without one run as before."""
    reserved_hosts: tuple[str, ...] = (MODEL_PROXY_HOST,)
    """Hosts only the operator grants (the provider's own ``allow``): a task's allow-list naming one
    is refused, so a task cannot give itself the model proxy where the operator did not."""

    def admit(self, spec: SandboxSpec) -> SandboxSpec:
        """``spec`` with the defaults filled in; raises :class:`SandboxSpecRefused` beyond the bounds."""
        cpu = spec.cpu if spec.cpu is not None else self.default_cpu
        memory = spec.memory_bytes if spec.memory_bytes is not None else self.default_memory_bytes
        if spec.cpu is not None and self.max_cpu is not None and spec.cpu > self.max_cpu:
            raise SandboxSpecRefused(
                "[environment].cpus", f"the task asks for {spec.cpu:g} CPUs; this operator allows at most "
                f"{self.max_cpu:g} per sandbox")  # fmt: skip
        if spec.memory_bytes is not None and self.max_memory_bytes is not None and spec.memory_bytes > self.max_memory_bytes:
            raise SandboxSpecRefused(
                "[environment].memory_mb", f"the task asks for {spec.memory_bytes // 2**20} MiB; this operator "
                f"allows at most {self.max_memory_bytes // 2**20} MiB per sandbox")  # fmt: skip
        if spec.allow and not self.task_egress:
            raise SandboxSpecRefused(
                "[environment].allowed_hosts", "the task asks for egress "
                f"({', '.join(_rule_text(r) for r in spec.allow)}); this operator gives tasks no network")  # fmt: skip
        reserved = [r for r in spec.allow if _rule_host(r) in self.reserved_hosts]
        if reserved:
            raise SandboxSpecRefused(
                "[environment].allowed_hosts", f"{_rule_text(reserved[0])} is reserved to the operator; a task "
                "cannot allow it")  # fmt: skip
        return replace(spec, cpu=cpu, memory_bytes=memory)


def _rule_host(rule: EgressRule) -> str:
    return (rule if isinstance(rule, str) else rule[0]).lower().rstrip(".")


def _rule_text(rule: EgressRule) -> str:
    return rule if isinstance(rule, str) else f"{rule[0]}:{rule[1]}"
