"""Request validation: every bad field is an INVALID_ARGUMENT that names it."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ale_proto.v1 import sandbox_pb2

from ale_rock.admin.config import AdminConfig
from ale_rock.admin.errors import invalid
from ale_rock.egress.admission import Endpoint, rule_problem

SANDBOX_ID = re.compile(r"^sb-[0-9a-f]{12}$")
SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
EXEC_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,255}$")
LABEL_KEY = re.compile(r"^[a-z0-9._/-]{1,63}$")
IMAGE = re.compile(r"^(/[^\x00]{0,4095}|[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254})$")
HOST = re.compile(r"^(\*|[A-Za-z0-9._:-]{1,253})$")
REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
COMMIT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:-]{0,254}$")
MAX_PATH = 4096
MAX_SMALL_FILE = 4 * 2**20
MAX_ENV_BYTES = 128 * 1024
MAX_LABELS = 64
MAX_PAGE = 1000


def sandbox_id(value: str, field: str = "sandbox_id") -> str:
    if not value:
        raise invalid(field, "is required")
    if not SANDBOX_ID.match(value):
        raise invalid(field, f"malformed sandbox id {value[:80]!r} (expected 'sb-' + 12 hex digits)")
    return value


def path(value: str, field: str = "path") -> str:
    if not value:
        raise invalid(field, "is required")
    if "\x00" in value:
        raise invalid(field, "contains a NUL byte")
    if len(value.encode()) > MAX_PATH:
        raise invalid(field, f"longer than {MAX_PATH} bytes")
    if not value.startswith("/"):
        raise invalid(field, f"must be an absolute path inside the sandbox, got {value[:80]!r}")
    return value


def _env(env: Mapping[str, str], field: str) -> None:
    total = 0
    for k, v in env.items():
        if not ENV_NAME.match(k):
            raise invalid(f"{field}[{k[:40]!r}]", "invalid environment variable name")
        if "\x00" in v:
            raise invalid(f"{field}[{k}]", "value contains a NUL byte")
        total += len(k) + len(v)
    if total > MAX_ENV_BYTES:
        raise invalid(field, f"environment larger than {MAX_ENV_BYTES} bytes")


def _labels(labels: Mapping[str, str], field: str) -> None:
    if len(labels) > MAX_LABELS:
        raise invalid(field, f"more than {MAX_LABELS} labels")
    for k, v in labels.items():
        if not LABEL_KEY.match(k):
            raise invalid(f"{field}[{k[:40]!r}]", "label keys are 1-63 characters of [a-z0-9._/-]")
        if len(v) > 256:
            raise invalid(f"{field}[{k}]", "label values are at most 256 characters")


def policy(p: sandbox_pb2.NetworkPolicy, field: str, protected: Sequence[Endpoint] = ()) -> None:
    """Rules must be well formed and must not name the host itself or an ALE service (``protected``)."""
    if len(p.allow) > 256:
        raise invalid(f"{field}.allow", "more than 256 rules")
    for i, rule in enumerate(p.allow):
        if not HOST.match(rule.host):
            raise invalid(f"{field}.allow[{i}].host", f"invalid host {rule.host[:80]!r}")
        if rule.port > 65535:
            raise invalid(f"{field}.allow[{i}].port", "must be at most 65535")
        if problem := rule_problem(rule.host, rule.port, protected):
            raise invalid(f"{field}.allow[{i}]", problem)  # reads "<field>: 127.0.0.1:7701 is loopback"


def create_spec(
    spec: sandbox_pb2.SandboxSpec, cfg: AdminConfig, protected: Sequence[Endpoint] = ()
) -> sandbox_pb2.SandboxSpec:
    """Validate a SandboxSpec and return a copy with the server's defaults filled in."""
    out = sandbox_pb2.SandboxSpec()
    out.CopyFrom(spec)
    if spec.image and not IMAGE.match(spec.image):
        raise invalid("spec.image", f"malformed image reference {spec.image[:80]!r}")
    res, dflt, mx = out.resources, cfg.default_resources, cfg.max_resources
    for name in ("cpu_millis", "memory_bytes", "disk_bytes", "max_pids", "max_open_files", "gpus"):
        value = getattr(res, name)
        if value > getattr(mx, name):
            raise invalid(f"spec.resources.{name}", f"{value} is over the maximum {getattr(mx, name)}")
        if value == 0:
            setattr(res, name, getattr(dflt, name))
    if out.resources.memory_bytes and out.resources.memory_bytes < 4 * 2**20:
        raise invalid("spec.resources.memory_bytes", "must be at least 4 MiB")
    policy(out.network, "spec.network", protected)
    _env(out.env, "spec.env")
    _labels(out.labels, "spec.labels")
    if out.workdir:
        path(out.workdir, "spec.workdir")
    else:
        out.workdir = "/workspace"
    if out.ttl_seconds > cfg.max_ttl_seconds:
        raise invalid("spec.ttl_seconds", f"over the maximum {cfg.max_ttl_seconds}")
    if out.ttl_seconds == 0:
        out.ttl_seconds = cfg.default_ttl_seconds
    if out.backend not in sandbox_pb2.SandboxBackend.values():
        raise invalid("spec.backend", f"unknown backend {out.backend}")
    if out.image and out.backend == sandbox_pb2.SANDBOX_BACKEND_LOCAL:
        raise invalid("spec.image", f"the local backend runs the host's runtime and starts no image; "
                                    f"{out.image[:80]!r} needs the docker backend")
    return out


def exec_spec(spec: sandbox_pb2.ExecSpec, cfg: AdminConfig, field: str = "spec", stream: bool = False) -> None:
    if bool(spec.command) == bool(spec.argv):
        raise invalid(f"{field}.command", "exactly one of command and argv must be set")
    size = len(spec.command.encode()) + sum(len(a.encode()) for a in spec.argv)
    if size > cfg.max_command_bytes:
        raise invalid(f"{field}.command", f"command is {size} bytes, over the limit {cfg.max_command_bytes}")
    if "\x00" in spec.command or any("\x00" in a for a in spec.argv):
        raise invalid(f"{field}.command", "contains a NUL byte")
    if spec.argv and not spec.argv[0]:
        raise invalid(f"{field}.argv[0]", "program name is empty")
    _env(spec.env, f"{field}.env")
    if spec.cwd:
        path(spec.cwd, f"{field}.cwd")
    if len(spec.stdin) > MAX_SMALL_FILE:
        raise invalid(f"{field}.stdin", f"over {MAX_SMALL_FILE} bytes; upload a file instead")
    if stream and spec.background:
        raise invalid(f"{field}.background", "not allowed for a streamed exec")


def exec_id(value: str, field: str = "exec_id") -> None:
    if value and not EXEC_ID.match(value):
        raise invalid(field, f"malformed exec id {value[:80]!r}")


def session_id(value: str, field: str = "session_id", required: bool = True) -> None:
    if not value:
        if required:
            raise invalid(field, "is required")
        return
    if not SESSION_ID.match(value):
        raise invalid(field, f"malformed session id {value[:80]!r}")


def session_spec(spec: sandbox_pb2.SessionSpec) -> None:
    session_id(spec.session_id, "spec.session_id", required=False)
    if spec.shell:
        path(spec.shell, "spec.shell")
    if spec.cwd:
        path(spec.cwd, "spec.cwd")
    _env(spec.env, "spec.env")


def session_command(cmd: sandbox_pb2.SessionCommand, cfg: AdminConfig) -> None:
    if not cmd.command:
        raise invalid("command.command", "is required")
    if len(cmd.command.encode()) > cfg.max_command_bytes:
        raise invalid("command.command", f"over the limit of {cfg.max_command_bytes} bytes")
    if "\x00" in cmd.command:
        raise invalid("command.command", "contains a NUL byte")


def page_size(page: sandbox_pb2.ListFilesRequest | object, field: str = "page.page_size") -> None:
    size = getattr(getattr(page, "page", None), "page_size", 0)
    if size > MAX_PAGE:
        raise invalid(field, f"at most {MAX_PAGE}")


def small_size(value: int, field: str) -> None:
    if value > MAX_SMALL_FILE:
        raise invalid(field, f"at most {MAX_SMALL_FILE} bytes")


def request_id(value: str) -> None:
    if value and not REQUEST_ID.match(value):
        raise invalid("request_id", "1-128 characters of [A-Za-z0-9._:-]")


def commit_name(value: str) -> None:
    if value and not COMMIT_NAME.match(value):
        raise invalid("name", f"malformed snapshot name {value[:80]!r}")


def signal(value: int) -> None:
    if not 0 <= value <= 64:
        raise invalid("signal", "must be a signal number between 1 and 64 (0 means SIGINT)")
