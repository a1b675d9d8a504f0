from ale_proto.v1 import common_pb2 as _common_pb2
from ale_proto.v1 import sandbox_pb2 as _sandbox_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WorkerInfo(_message.Message):
    __slots__ = ("worker_id", "address", "capacity", "backends", "labels", "version", "max_sandboxes")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    BACKENDS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    MAX_SANDBOXES_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    address: str
    capacity: _common_pb2.Resources
    backends: _containers.RepeatedScalarFieldContainer[_sandbox_pb2.SandboxBackend]
    labels: _containers.ScalarMap[str, str]
    version: str
    max_sandboxes: int
    def __init__(self, worker_id: _Optional[str] = ..., address: _Optional[str] = ..., capacity: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., backends: _Optional[_Iterable[_Union[_sandbox_pb2.SandboxBackend, str]]] = ..., labels: _Optional[_Mapping[str, str]] = ..., version: _Optional[str] = ..., max_sandboxes: _Optional[int] = ...) -> None: ...

class RegisterWorkerRequest(_message.Message):
    __slots__ = ("worker", "running_sandbox_ids")
    WORKER_FIELD_NUMBER: _ClassVar[int]
    RUNNING_SANDBOX_IDS_FIELD_NUMBER: _ClassVar[int]
    worker: WorkerInfo
    running_sandbox_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, worker: _Optional[_Union[WorkerInfo, _Mapping]] = ..., running_sandbox_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class RegisterWorkerResponse(_message.Message):
    __slots__ = ("heartbeat_interval_ms", "keep_sandbox_ids")
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    KEEP_SANDBOX_IDS_FIELD_NUMBER: _ClassVar[int]
    heartbeat_interval_ms: int
    keep_sandbox_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, heartbeat_interval_ms: _Optional[int] = ..., keep_sandbox_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class WorkerSandboxStatus(_message.Message):
    __slots__ = ("sandbox_id", "state", "message")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    state: _sandbox_pb2.SandboxState
    message: str
    def __init__(self, sandbox_id: _Optional[str] = ..., state: _Optional[_Union[_sandbox_pb2.SandboxState, str]] = ..., message: _Optional[str] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("worker_id", "free", "sandboxes")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    FREE_FIELD_NUMBER: _ClassVar[int]
    SANDBOXES_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    free: _common_pb2.Resources
    sandboxes: _containers.RepeatedCompositeFieldContainer[WorkerSandboxStatus]
    def __init__(self, worker_id: _Optional[str] = ..., free: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., sandboxes: _Optional[_Iterable[_Union[WorkerSandboxStatus, _Mapping]]] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("heartbeat_interval_ms", "known")
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    KNOWN_FIELD_NUMBER: _ClassVar[int]
    heartbeat_interval_ms: int
    known: bool
    def __init__(self, heartbeat_interval_ms: _Optional[int] = ..., known: _Optional[bool] = ...) -> None: ...

class DeregisterWorkerRequest(_message.Message):
    __slots__ = ("worker_id",)
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ...) -> None: ...

class DeregisterWorkerResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StartSandboxRequest(_message.Message):
    __slots__ = ("sandbox_id", "namespace", "spec")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    namespace: str
    spec: _sandbox_pb2.SandboxSpec
    def __init__(self, sandbox_id: _Optional[str] = ..., namespace: _Optional[str] = ..., spec: _Optional[_Union[_sandbox_pb2.SandboxSpec, _Mapping]] = ...) -> None: ...

class StartSandboxResponse(_message.Message):
    __slots__ = ("state", "message")
    STATE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    state: _sandbox_pb2.SandboxState
    message: str
    def __init__(self, state: _Optional[_Union[_sandbox_pb2.SandboxState, str]] = ..., message: _Optional[str] = ...) -> None: ...

class WorkerServiceStopSandboxRequest(_message.Message):
    __slots__ = ("sandbox_id", "grace_period_ms")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    GRACE_PERIOD_MS_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    grace_period_ms: int
    def __init__(self, sandbox_id: _Optional[str] = ..., grace_period_ms: _Optional[int] = ...) -> None: ...

class WorkerServiceStopSandboxResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RemoveSandboxRequest(_message.Message):
    __slots__ = ("sandbox_id",)
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    def __init__(self, sandbox_id: _Optional[str] = ...) -> None: ...

class RemoveSandboxResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListWorkerSandboxesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListWorkerSandboxesResponse(_message.Message):
    __slots__ = ("sandboxes",)
    SANDBOXES_FIELD_NUMBER: _ClassVar[int]
    sandboxes: _containers.RepeatedCompositeFieldContainer[WorkerSandboxStatus]
    def __init__(self, sandboxes: _Optional[_Iterable[_Union[WorkerSandboxStatus, _Mapping]]] = ...) -> None: ...

class WorkerServiceCommitSandboxRequest(_message.Message):
    __slots__ = ("sandbox_id", "name", "format")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    name: str
    format: _sandbox_pb2.CommitFormat
    def __init__(self, sandbox_id: _Optional[str] = ..., name: _Optional[str] = ..., format: _Optional[_Union[_sandbox_pb2.CommitFormat, str]] = ...) -> None: ...

class WorkerServiceCommitSandboxResponse(_message.Message):
    __slots__ = ("image", "size_bytes", "digest")
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    image: str
    size_bytes: int
    digest: str
    def __init__(self, image: _Optional[str] = ..., size_bytes: _Optional[int] = ..., digest: _Optional[str] = ...) -> None: ...

class WorkerServiceGetSandboxStatsRequest(_message.Message):
    __slots__ = ("sandbox_id",)
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    def __init__(self, sandbox_id: _Optional[str] = ...) -> None: ...

class WorkerServiceGetSandboxStatsResponse(_message.Message):
    __slots__ = ("stats",)
    STATS_FIELD_NUMBER: _ClassVar[int]
    stats: _sandbox_pb2.SandboxStats
    def __init__(self, stats: _Optional[_Union[_sandbox_pb2.SandboxStats, _Mapping]] = ...) -> None: ...

class WorkerServiceSetNetworkPolicyRequest(_message.Message):
    __slots__ = ("sandbox_id", "policy")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    policy: _sandbox_pb2.NetworkPolicy
    def __init__(self, sandbox_id: _Optional[str] = ..., policy: _Optional[_Union[_sandbox_pb2.NetworkPolicy, _Mapping]] = ...) -> None: ...

class WorkerServiceSetNetworkPolicyResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
