import datetime

from ale_proto.v1 import common_pb2 as _common_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SandboxState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SANDBOX_STATE_UNSPECIFIED: _ClassVar[SandboxState]
    SANDBOX_STATE_PENDING: _ClassVar[SandboxState]
    SANDBOX_STATE_RUNNING: _ClassVar[SandboxState]
    SANDBOX_STATE_STOPPED: _ClassVar[SandboxState]
    SANDBOX_STATE_DELETED: _ClassVar[SandboxState]
    SANDBOX_STATE_FAILED: _ClassVar[SandboxState]
    SANDBOX_STATE_LOST: _ClassVar[SandboxState]

class SandboxBackend(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SANDBOX_BACKEND_UNSPECIFIED: _ClassVar[SandboxBackend]
    SANDBOX_BACKEND_LOCAL: _ClassVar[SandboxBackend]
    SANDBOX_BACKEND_DOCKER: _ClassVar[SandboxBackend]
    SANDBOX_BACKEND_KUBERNETES: _ClassVar[SandboxBackend]

class CommitFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COMMIT_FORMAT_UNSPECIFIED: _ClassVar[CommitFormat]
    COMMIT_FORMAT_IMAGE: _ClassVar[CommitFormat]
    COMMIT_FORMAT_ARCHIVE: _ClassVar[CommitFormat]

class ExecEndReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EXEC_END_REASON_UNSPECIFIED: _ClassVar[ExecEndReason]
    EXEC_END_REASON_EXITED: _ClassVar[ExecEndReason]
    EXEC_END_REASON_SIGNALED: _ClassVar[ExecEndReason]
    EXEC_END_REASON_TIMEOUT: _ClassVar[ExecEndReason]
    EXEC_END_REASON_IDLE_TIMEOUT: _ClassVar[ExecEndReason]
    EXEC_END_REASON_INTERRUPTED: _ClassVar[ExecEndReason]
    EXEC_END_REASON_BACKGROUND: _ClassVar[ExecEndReason]
    EXEC_END_REASON_START_FAILED: _ClassVar[ExecEndReason]
SANDBOX_STATE_UNSPECIFIED: SandboxState
SANDBOX_STATE_PENDING: SandboxState
SANDBOX_STATE_RUNNING: SandboxState
SANDBOX_STATE_STOPPED: SandboxState
SANDBOX_STATE_DELETED: SandboxState
SANDBOX_STATE_FAILED: SandboxState
SANDBOX_STATE_LOST: SandboxState
SANDBOX_BACKEND_UNSPECIFIED: SandboxBackend
SANDBOX_BACKEND_LOCAL: SandboxBackend
SANDBOX_BACKEND_DOCKER: SandboxBackend
SANDBOX_BACKEND_KUBERNETES: SandboxBackend
COMMIT_FORMAT_UNSPECIFIED: CommitFormat
COMMIT_FORMAT_IMAGE: CommitFormat
COMMIT_FORMAT_ARCHIVE: CommitFormat
EXEC_END_REASON_UNSPECIFIED: ExecEndReason
EXEC_END_REASON_EXITED: ExecEndReason
EXEC_END_REASON_SIGNALED: ExecEndReason
EXEC_END_REASON_TIMEOUT: ExecEndReason
EXEC_END_REASON_IDLE_TIMEOUT: ExecEndReason
EXEC_END_REASON_INTERRUPTED: ExecEndReason
EXEC_END_REASON_BACKGROUND: ExecEndReason
EXEC_END_REASON_START_FAILED: ExecEndReason

class EgressRule(_message.Message):
    __slots__ = ("host", "port")
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    host: str
    port: int
    def __init__(self, host: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class NetworkPolicy(_message.Message):
    __slots__ = ("allow",)
    ALLOW_FIELD_NUMBER: _ClassVar[int]
    allow: _containers.RepeatedCompositeFieldContainer[EgressRule]
    def __init__(self, allow: _Optional[_Iterable[_Union[EgressRule, _Mapping]]] = ...) -> None: ...

class SandboxSpec(_message.Message):
    __slots__ = ("image", "resources", "network", "env", "workdir", "ttl_seconds", "idle_timeout_seconds", "backend", "read_only_root", "labels")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    WORKDIR_FIELD_NUMBER: _ClassVar[int]
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    IDLE_TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_ROOT_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    image: str
    resources: _common_pb2.Resources
    network: NetworkPolicy
    env: _containers.ScalarMap[str, str]
    workdir: str
    ttl_seconds: int
    idle_timeout_seconds: int
    backend: SandboxBackend
    read_only_root: bool
    labels: _containers.ScalarMap[str, str]
    def __init__(self, image: _Optional[str] = ..., resources: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., network: _Optional[_Union[NetworkPolicy, _Mapping]] = ..., env: _Optional[_Mapping[str, str]] = ..., workdir: _Optional[str] = ..., ttl_seconds: _Optional[int] = ..., idle_timeout_seconds: _Optional[int] = ..., backend: _Optional[_Union[SandboxBackend, str]] = ..., read_only_root: _Optional[bool] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Sandbox(_message.Message):
    __slots__ = ("id", "namespace", "spec", "state", "worker_id", "message", "create_time", "update_time", "expire_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    namespace: str
    spec: SandboxSpec
    state: SandboxState
    worker_id: str
    message: str
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    expire_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., namespace: _Optional[str] = ..., spec: _Optional[_Union[SandboxSpec, _Mapping]] = ..., state: _Optional[_Union[SandboxState, str]] = ..., worker_id: _Optional[str] = ..., message: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateSandboxRequest(_message.Message):
    __slots__ = ("spec", "wait", "request_id")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    spec: SandboxSpec
    wait: bool
    request_id: str
    def __init__(self, spec: _Optional[_Union[SandboxSpec, _Mapping]] = ..., wait: _Optional[bool] = ..., request_id: _Optional[str] = ...) -> None: ...

class CreateSandboxResponse(_message.Message):
    __slots__ = ("sandbox",)
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    sandbox: Sandbox
    def __init__(self, sandbox: _Optional[_Union[Sandbox, _Mapping]] = ...) -> None: ...

class GetSandboxRequest(_message.Message):
    __slots__ = ("sandbox_id",)
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    def __init__(self, sandbox_id: _Optional[str] = ...) -> None: ...

class GetSandboxResponse(_message.Message):
    __slots__ = ("sandbox",)
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    sandbox: Sandbox
    def __init__(self, sandbox: _Optional[_Union[Sandbox, _Mapping]] = ...) -> None: ...

class ListSandboxesRequest(_message.Message):
    __slots__ = ("page", "states", "label_selector")
    class LabelSelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PAGE_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    page: _common_pb2.PageRequest
    states: _containers.RepeatedScalarFieldContainer[SandboxState]
    label_selector: _containers.ScalarMap[str, str]
    def __init__(self, page: _Optional[_Union[_common_pb2.PageRequest, _Mapping]] = ..., states: _Optional[_Iterable[_Union[SandboxState, str]]] = ..., label_selector: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ListSandboxesResponse(_message.Message):
    __slots__ = ("sandboxes", "page")
    SANDBOXES_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    sandboxes: _containers.RepeatedCompositeFieldContainer[Sandbox]
    page: _common_pb2.PageResponse
    def __init__(self, sandboxes: _Optional[_Iterable[_Union[Sandbox, _Mapping]]] = ..., page: _Optional[_Union[_common_pb2.PageResponse, _Mapping]] = ...) -> None: ...

class WatchSandboxesRequest(_message.Message):
    __slots__ = ("sandbox_ids", "send_initial")
    SANDBOX_IDS_FIELD_NUMBER: _ClassVar[int]
    SEND_INITIAL_FIELD_NUMBER: _ClassVar[int]
    sandbox_ids: _containers.RepeatedScalarFieldContainer[str]
    send_initial: bool
    def __init__(self, sandbox_ids: _Optional[_Iterable[str]] = ..., send_initial: _Optional[bool] = ...) -> None: ...

class WatchSandboxesResponse(_message.Message):
    __slots__ = ("sandbox", "previous_state")
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_STATE_FIELD_NUMBER: _ClassVar[int]
    sandbox: Sandbox
    previous_state: SandboxState
    def __init__(self, sandbox: _Optional[_Union[Sandbox, _Mapping]] = ..., previous_state: _Optional[_Union[SandboxState, str]] = ...) -> None: ...

class StopSandboxRequest(_message.Message):
    __slots__ = ("sandbox_id", "grace_period_ms")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    GRACE_PERIOD_MS_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    grace_period_ms: int
    def __init__(self, sandbox_id: _Optional[str] = ..., grace_period_ms: _Optional[int] = ...) -> None: ...

class StopSandboxResponse(_message.Message):
    __slots__ = ("sandbox",)
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    sandbox: Sandbox
    def __init__(self, sandbox: _Optional[_Union[Sandbox, _Mapping]] = ...) -> None: ...

class DeleteSandboxRequest(_message.Message):
    __slots__ = ("sandbox_id",)
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    def __init__(self, sandbox_id: _Optional[str] = ...) -> None: ...

class DeleteSandboxResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CommitSandboxRequest(_message.Message):
    __slots__ = ("sandbox_id", "name", "format")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    name: str
    format: CommitFormat
    def __init__(self, sandbox_id: _Optional[str] = ..., name: _Optional[str] = ..., format: _Optional[_Union[CommitFormat, str]] = ...) -> None: ...

class CommitSandboxResponse(_message.Message):
    __slots__ = ("image", "size_bytes", "digest")
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    image: str
    size_bytes: int
    digest: str
    def __init__(self, image: _Optional[str] = ..., size_bytes: _Optional[int] = ..., digest: _Optional[str] = ...) -> None: ...

class SandboxStats(_message.Message):
    __slots__ = ("cpu_seconds", "memory_bytes", "memory_peak_bytes", "pids", "disk_bytes", "safety_event_count", "recent_safety_events", "time")
    CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_PEAK_BYTES_FIELD_NUMBER: _ClassVar[int]
    PIDS_FIELD_NUMBER: _ClassVar[int]
    DISK_BYTES_FIELD_NUMBER: _ClassVar[int]
    SAFETY_EVENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    RECENT_SAFETY_EVENTS_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    cpu_seconds: float
    memory_bytes: int
    memory_peak_bytes: int
    pids: int
    disk_bytes: int
    safety_event_count: int
    recent_safety_events: _containers.RepeatedCompositeFieldContainer[_common_pb2.SafetyEvent]
    time: _timestamp_pb2.Timestamp
    def __init__(self, cpu_seconds: _Optional[float] = ..., memory_bytes: _Optional[int] = ..., memory_peak_bytes: _Optional[int] = ..., pids: _Optional[int] = ..., disk_bytes: _Optional[int] = ..., safety_event_count: _Optional[int] = ..., recent_safety_events: _Optional[_Iterable[_Union[_common_pb2.SafetyEvent, _Mapping]]] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetSandboxStatsRequest(_message.Message):
    __slots__ = ("sandbox_id",)
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    def __init__(self, sandbox_id: _Optional[str] = ...) -> None: ...

class GetSandboxStatsResponse(_message.Message):
    __slots__ = ("stats",)
    STATS_FIELD_NUMBER: _ClassVar[int]
    stats: SandboxStats
    def __init__(self, stats: _Optional[_Union[SandboxStats, _Mapping]] = ...) -> None: ...

class ExecSpec(_message.Message):
    __slots__ = ("command", "argv", "env", "cwd", "timeout_ms", "idle_timeout_ms", "max_output_bytes", "stdin", "background")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    IDLE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    BACKGROUND_FIELD_NUMBER: _ClassVar[int]
    command: str
    argv: _containers.RepeatedScalarFieldContainer[str]
    env: _containers.ScalarMap[str, str]
    cwd: str
    timeout_ms: int
    idle_timeout_ms: int
    max_output_bytes: int
    stdin: bytes
    background: bool
    def __init__(self, command: _Optional[str] = ..., argv: _Optional[_Iterable[str]] = ..., env: _Optional[_Mapping[str, str]] = ..., cwd: _Optional[str] = ..., timeout_ms: _Optional[int] = ..., idle_timeout_ms: _Optional[int] = ..., max_output_bytes: _Optional[int] = ..., stdin: _Optional[bytes] = ..., background: _Optional[bool] = ...) -> None: ...

class ExecResult(_message.Message):
    __slots__ = ("end_reason", "exit_code", "signal", "stdout", "stderr", "stdout_truncated", "stderr_truncated", "stdout_spill_path", "stderr_spill_path", "duration_s", "pid", "exec_id", "error", "stdout_total_bytes", "stderr_total_bytes", "spill_truncated", "oom_killed")
    END_REASON_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    STDOUT_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    STDERR_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    STDOUT_SPILL_PATH_FIELD_NUMBER: _ClassVar[int]
    STDERR_SPILL_PATH_FIELD_NUMBER: _ClassVar[int]
    DURATION_S_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    EXEC_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    STDOUT_TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    STDERR_TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    SPILL_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    OOM_KILLED_FIELD_NUMBER: _ClassVar[int]
    end_reason: ExecEndReason
    exit_code: int
    signal: int
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    stdout_spill_path: str
    stderr_spill_path: str
    duration_s: float
    pid: int
    exec_id: str
    error: str
    stdout_total_bytes: int
    stderr_total_bytes: int
    spill_truncated: bool
    oom_killed: bool
    def __init__(self, end_reason: _Optional[_Union[ExecEndReason, str]] = ..., exit_code: _Optional[int] = ..., signal: _Optional[int] = ..., stdout: _Optional[bytes] = ..., stderr: _Optional[bytes] = ..., stdout_truncated: _Optional[bool] = ..., stderr_truncated: _Optional[bool] = ..., stdout_spill_path: _Optional[str] = ..., stderr_spill_path: _Optional[str] = ..., duration_s: _Optional[float] = ..., pid: _Optional[int] = ..., exec_id: _Optional[str] = ..., error: _Optional[str] = ..., stdout_total_bytes: _Optional[int] = ..., stderr_total_bytes: _Optional[int] = ..., spill_truncated: _Optional[bool] = ..., oom_killed: _Optional[bool] = ...) -> None: ...

class ExecRequest(_message.Message):
    __slots__ = ("sandbox_id", "spec", "exec_id")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    EXEC_ID_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    spec: ExecSpec
    exec_id: str
    def __init__(self, sandbox_id: _Optional[str] = ..., spec: _Optional[_Union[ExecSpec, _Mapping]] = ..., exec_id: _Optional[str] = ...) -> None: ...

class ExecResponse(_message.Message):
    __slots__ = ("result",)
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: ExecResult
    def __init__(self, result: _Optional[_Union[ExecResult, _Mapping]] = ...) -> None: ...

class ExecStreamRequest(_message.Message):
    __slots__ = ("sandbox_id", "spec", "exec_id")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    EXEC_ID_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    spec: ExecSpec
    exec_id: str
    def __init__(self, sandbox_id: _Optional[str] = ..., spec: _Optional[_Union[ExecSpec, _Mapping]] = ..., exec_id: _Optional[str] = ...) -> None: ...

class ExecStarted(_message.Message):
    __slots__ = ("pid", "exec_id")
    PID_FIELD_NUMBER: _ClassVar[int]
    EXEC_ID_FIELD_NUMBER: _ClassVar[int]
    pid: int
    exec_id: str
    def __init__(self, pid: _Optional[int] = ..., exec_id: _Optional[str] = ...) -> None: ...

class ExecStreamResponse(_message.Message):
    __slots__ = ("started", "stdout", "stderr", "exit")
    STARTED_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    EXIT_FIELD_NUMBER: _ClassVar[int]
    started: ExecStarted
    stdout: bytes
    stderr: bytes
    exit: ExecResult
    def __init__(self, started: _Optional[_Union[ExecStarted, _Mapping]] = ..., stdout: _Optional[bytes] = ..., stderr: _Optional[bytes] = ..., exit: _Optional[_Union[ExecResult, _Mapping]] = ...) -> None: ...

class SignalProcessRequest(_message.Message):
    __slots__ = ("sandbox_id", "exec_id", "pid", "session_id", "signal", "all_processes")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    EXEC_ID_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    ALL_PROCESSES_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    exec_id: str
    pid: int
    session_id: str
    signal: int
    all_processes: bool
    def __init__(self, sandbox_id: _Optional[str] = ..., exec_id: _Optional[str] = ..., pid: _Optional[int] = ..., session_id: _Optional[str] = ..., signal: _Optional[int] = ..., all_processes: _Optional[bool] = ...) -> None: ...

class SignalProcessResponse(_message.Message):
    __slots__ = ("delivered",)
    DELIVERED_FIELD_NUMBER: _ClassVar[int]
    delivered: bool
    def __init__(self, delivered: _Optional[bool] = ...) -> None: ...

class SessionSpec(_message.Message):
    __slots__ = ("session_id", "shell", "env", "cwd")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SHELL_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    shell: str
    env: _containers.ScalarMap[str, str]
    cwd: str
    def __init__(self, session_id: _Optional[str] = ..., shell: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., cwd: _Optional[str] = ...) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ("sandbox_id", "spec")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    spec: SessionSpec
    def __init__(self, sandbox_id: _Optional[str] = ..., spec: _Optional[_Union[SessionSpec, _Mapping]] = ...) -> None: ...

class CreateSessionResponse(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class SessionCommand(_message.Message):
    __slots__ = ("command", "timeout_ms", "idle_timeout_ms", "max_output_bytes")
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    IDLE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    command: str
    timeout_ms: int
    idle_timeout_ms: int
    max_output_bytes: int
    def __init__(self, command: _Optional[str] = ..., timeout_ms: _Optional[int] = ..., idle_timeout_ms: _Optional[int] = ..., max_output_bytes: _Optional[int] = ...) -> None: ...

class RunInSessionRequest(_message.Message):
    __slots__ = ("sandbox_id", "session_id", "command")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    session_id: str
    command: SessionCommand
    def __init__(self, sandbox_id: _Optional[str] = ..., session_id: _Optional[str] = ..., command: _Optional[_Union[SessionCommand, _Mapping]] = ...) -> None: ...

class RunInSessionResponse(_message.Message):
    __slots__ = ("result",)
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: ExecResult
    def __init__(self, result: _Optional[_Union[ExecResult, _Mapping]] = ...) -> None: ...

class SendSessionInputRequest(_message.Message):
    __slots__ = ("sandbox_id", "session_id", "data", "interrupt")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    INTERRUPT_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    session_id: str
    data: bytes
    interrupt: bool
    def __init__(self, sandbox_id: _Optional[str] = ..., session_id: _Optional[str] = ..., data: _Optional[bytes] = ..., interrupt: _Optional[bool] = ...) -> None: ...

class SendSessionInputResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReadSessionOutputRequest(_message.Message):
    __slots__ = ("sandbox_id", "session_id", "wait_ms")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    session_id: str
    wait_ms: int
    def __init__(self, sandbox_id: _Optional[str] = ..., session_id: _Optional[str] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class ReadSessionOutputResponse(_message.Message):
    __slots__ = ("output", "closed")
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    CLOSED_FIELD_NUMBER: _ClassVar[int]
    output: bytes
    closed: bool
    def __init__(self, output: _Optional[bytes] = ..., closed: _Optional[bool] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ("sandbox_id", "session_id")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    session_id: str
    def __init__(self, sandbox_id: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FileInfo(_message.Message):
    __slots__ = ("path", "size", "mode", "is_dir", "is_symlink", "modify_time")
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    IS_DIR_FIELD_NUMBER: _ClassVar[int]
    IS_SYMLINK_FIELD_NUMBER: _ClassVar[int]
    MODIFY_TIME_FIELD_NUMBER: _ClassVar[int]
    path: str
    size: int
    mode: int
    is_dir: bool
    is_symlink: bool
    modify_time: _timestamp_pb2.Timestamp
    def __init__(self, path: _Optional[str] = ..., size: _Optional[int] = ..., mode: _Optional[int] = ..., is_dir: _Optional[bool] = ..., is_symlink: _Optional[bool] = ..., modify_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class UploadHeader(_message.Message):
    __slots__ = ("sandbox_id", "path", "mode", "is_tar", "size", "sha256")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    IS_TAR_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    path: str
    mode: int
    is_tar: bool
    size: int
    sha256: str
    def __init__(self, sandbox_id: _Optional[str] = ..., path: _Optional[str] = ..., mode: _Optional[int] = ..., is_tar: _Optional[bool] = ..., size: _Optional[int] = ..., sha256: _Optional[str] = ...) -> None: ...

class UploadFileRequest(_message.Message):
    __slots__ = ("header", "chunk")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    header: UploadHeader
    chunk: bytes
    def __init__(self, header: _Optional[_Union[UploadHeader, _Mapping]] = ..., chunk: _Optional[bytes] = ...) -> None: ...

class UploadFileResponse(_message.Message):
    __slots__ = ("size", "sha256")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    size: int
    sha256: str
    def __init__(self, size: _Optional[int] = ..., sha256: _Optional[str] = ...) -> None: ...

class DownloadFileRequest(_message.Message):
    __slots__ = ("sandbox_id", "path", "chunk_size")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    CHUNK_SIZE_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    path: str
    chunk_size: int
    def __init__(self, sandbox_id: _Optional[str] = ..., path: _Optional[str] = ..., chunk_size: _Optional[int] = ...) -> None: ...

class DownloadFileResponse(_message.Message):
    __slots__ = ("info", "chunk", "sha256")
    INFO_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    info: FileInfo
    chunk: bytes
    sha256: str
    def __init__(self, info: _Optional[_Union[FileInfo, _Mapping]] = ..., chunk: _Optional[bytes] = ..., sha256: _Optional[str] = ...) -> None: ...

class ReadFileRequest(_message.Message):
    __slots__ = ("sandbox_id", "path", "offset", "limit")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    path: str
    offset: int
    limit: int
    def __init__(self, sandbox_id: _Optional[str] = ..., path: _Optional[str] = ..., offset: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class ReadFileResponse(_message.Message):
    __slots__ = ("data", "size", "eof")
    DATA_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    EOF_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    size: int
    eof: bool
    def __init__(self, data: _Optional[bytes] = ..., size: _Optional[int] = ..., eof: _Optional[bool] = ...) -> None: ...

class WriteFileRequest(_message.Message):
    __slots__ = ("sandbox_id", "path", "data", "mode", "append")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    APPEND_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    path: str
    data: bytes
    mode: int
    append: bool
    def __init__(self, sandbox_id: _Optional[str] = ..., path: _Optional[str] = ..., data: _Optional[bytes] = ..., mode: _Optional[int] = ..., append: _Optional[bool] = ...) -> None: ...

class WriteFileResponse(_message.Message):
    __slots__ = ("size",)
    SIZE_FIELD_NUMBER: _ClassVar[int]
    size: int
    def __init__(self, size: _Optional[int] = ...) -> None: ...

class ListFilesRequest(_message.Message):
    __slots__ = ("sandbox_id", "path", "recursive", "page")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    RECURSIVE_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    path: str
    recursive: bool
    page: _common_pb2.PageRequest
    def __init__(self, sandbox_id: _Optional[str] = ..., path: _Optional[str] = ..., recursive: _Optional[bool] = ..., page: _Optional[_Union[_common_pb2.PageRequest, _Mapping]] = ...) -> None: ...

class ListFilesResponse(_message.Message):
    __slots__ = ("files", "page")
    FILES_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    files: _containers.RepeatedCompositeFieldContainer[FileInfo]
    page: _common_pb2.PageResponse
    def __init__(self, files: _Optional[_Iterable[_Union[FileInfo, _Mapping]]] = ..., page: _Optional[_Union[_common_pb2.PageResponse, _Mapping]] = ...) -> None: ...

class SetNetworkPolicyRequest(_message.Message):
    __slots__ = ("sandbox_id", "policy")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    policy: NetworkPolicy
    def __init__(self, sandbox_id: _Optional[str] = ..., policy: _Optional[_Union[NetworkPolicy, _Mapping]] = ...) -> None: ...

class SetNetworkPolicyResponse(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: NetworkPolicy
    def __init__(self, policy: _Optional[_Union[NetworkPolicy, _Mapping]] = ...) -> None: ...

class GetNetworkPolicyRequest(_message.Message):
    __slots__ = ("sandbox_id",)
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    def __init__(self, sandbox_id: _Optional[str] = ...) -> None: ...

class GetNetworkPolicyResponse(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: NetworkPolicy
    def __init__(self, policy: _Optional[_Union[NetworkPolicy, _Mapping]] = ...) -> None: ...
