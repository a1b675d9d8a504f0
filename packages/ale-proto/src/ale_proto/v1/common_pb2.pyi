import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ErrorCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_CODE_UNSPECIFIED: _ClassVar[ErrorCode]
    ERROR_CODE_INVALID_ARGUMENT: _ClassVar[ErrorCode]
    ERROR_CODE_NOT_FOUND: _ClassVar[ErrorCode]
    ERROR_CODE_ALREADY_EXISTS: _ClassVar[ErrorCode]
    ERROR_CODE_UNAUTHENTICATED: _ClassVar[ErrorCode]
    ERROR_CODE_PERMISSION_DENIED: _ClassVar[ErrorCode]
    ERROR_CODE_RESOURCE_EXHAUSTED: _ClassVar[ErrorCode]
    ERROR_CODE_FAILED_PRECONDITION: _ClassVar[ErrorCode]
    ERROR_CODE_DEADLINE_EXCEEDED: _ClassVar[ErrorCode]
    ERROR_CODE_UNAVAILABLE: _ClassVar[ErrorCode]
    ERROR_CODE_CANCELLED: _ClassVar[ErrorCode]
    ERROR_CODE_LOST: _ClassVar[ErrorCode]
    ERROR_CODE_INTERNAL: _ClassVar[ErrorCode]

class StopReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STOP_REASON_UNSPECIFIED: _ClassVar[StopReason]
    STOP_REASON_STOP: _ClassVar[StopReason]
    STOP_REASON_LENGTH: _ClassVar[StopReason]
    STOP_REASON_TOOL_CALL: _ClassVar[StopReason]
    STOP_REASON_TIMEOUT: _ClassVar[StopReason]
    STOP_REASON_ERROR: _ClassVar[StopReason]
    STOP_REASON_ABORTED: _ClassVar[StopReason]
ERROR_CODE_UNSPECIFIED: ErrorCode
ERROR_CODE_INVALID_ARGUMENT: ErrorCode
ERROR_CODE_NOT_FOUND: ErrorCode
ERROR_CODE_ALREADY_EXISTS: ErrorCode
ERROR_CODE_UNAUTHENTICATED: ErrorCode
ERROR_CODE_PERMISSION_DENIED: ErrorCode
ERROR_CODE_RESOURCE_EXHAUSTED: ErrorCode
ERROR_CODE_FAILED_PRECONDITION: ErrorCode
ERROR_CODE_DEADLINE_EXCEEDED: ErrorCode
ERROR_CODE_UNAVAILABLE: ErrorCode
ERROR_CODE_CANCELLED: ErrorCode
ERROR_CODE_LOST: ErrorCode
ERROR_CODE_INTERNAL: ErrorCode
STOP_REASON_UNSPECIFIED: StopReason
STOP_REASON_STOP: StopReason
STOP_REASON_LENGTH: StopReason
STOP_REASON_TOOL_CALL: StopReason
STOP_REASON_TIMEOUT: StopReason
STOP_REASON_ERROR: StopReason
STOP_REASON_ABORTED: StopReason

class Resources(_message.Message):
    __slots__ = ("cpu_millis", "memory_bytes", "disk_bytes", "max_pids", "max_open_files", "gpus")
    CPU_MILLIS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    DISK_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_PIDS_FIELD_NUMBER: _ClassVar[int]
    MAX_OPEN_FILES_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    cpu_millis: int
    memory_bytes: int
    disk_bytes: int
    max_pids: int
    max_open_files: int
    gpus: int
    def __init__(self, cpu_millis: _Optional[int] = ..., memory_bytes: _Optional[int] = ..., disk_bytes: _Optional[int] = ..., max_pids: _Optional[int] = ..., max_open_files: _Optional[int] = ..., gpus: _Optional[int] = ...) -> None: ...

class ErrorDetail(_message.Message):
    __slots__ = ("code", "field", "message", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    code: ErrorCode
    field: str
    message: str
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, code: _Optional[_Union[ErrorCode, str]] = ..., field: _Optional[str] = ..., message: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class PageRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class PageResponse(_message.Message):
    __slots__ = ("next_page_token", "total_size")
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    total_size: int
    def __init__(self, next_page_token: _Optional[str] = ..., total_size: _Optional[int] = ...) -> None: ...

class Labels(_message.Message):
    __slots__ = ("values",)
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.ScalarMap[str, str]
    def __init__(self, values: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ("id", "name", "arguments_json")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    arguments_json: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., arguments_json: _Optional[str] = ...) -> None: ...

class Observation(_message.Message):
    __slots__ = ("tool_call_id", "content", "is_error", "token_ids")
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    tool_call_id: str
    content: str
    is_error: bool
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, tool_call_id: _Optional[str] = ..., content: _Optional[str] = ..., is_error: _Optional[bool] = ..., token_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class Turn(_message.Message):
    __slots__ = ("prompt_token_ids", "completion_token_ids", "completion_logprobs", "policy_version", "stop_reason", "completion_text", "tool_calls", "observations", "error", "irrelevant", "chunk_index", "reward", "latency_s")
    PROMPT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    OBSERVATIONS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    IRRELEVANT_FIELD_NUMBER: _ClassVar[int]
    CHUNK_INDEX_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    LATENCY_S_FIELD_NUMBER: _ClassVar[int]
    prompt_token_ids: _containers.RepeatedScalarFieldContainer[int]
    completion_token_ids: _containers.RepeatedScalarFieldContainer[int]
    completion_logprobs: _containers.RepeatedScalarFieldContainer[float]
    policy_version: int
    stop_reason: StopReason
    completion_text: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[ToolCall]
    observations: _containers.RepeatedCompositeFieldContainer[Observation]
    error: bool
    irrelevant: bool
    chunk_index: int
    reward: float
    latency_s: float
    def __init__(self, prompt_token_ids: _Optional[_Iterable[int]] = ..., completion_token_ids: _Optional[_Iterable[int]] = ..., completion_logprobs: _Optional[_Iterable[float]] = ..., policy_version: _Optional[int] = ..., stop_reason: _Optional[_Union[StopReason, str]] = ..., completion_text: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[ToolCall, _Mapping]]] = ..., observations: _Optional[_Iterable[_Union[Observation, _Mapping]]] = ..., error: _Optional[bool] = ..., irrelevant: _Optional[bool] = ..., chunk_index: _Optional[int] = ..., reward: _Optional[float] = ..., latency_s: _Optional[float] = ...) -> None: ...

class TestResult(_message.Message):
    __slots__ = ("name", "passed", "output", "duration_s")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PASSED_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    DURATION_S_FIELD_NUMBER: _ClassVar[int]
    name: str
    passed: bool
    output: str
    duration_s: float
    def __init__(self, name: _Optional[str] = ..., passed: _Optional[bool] = ..., output: _Optional[str] = ..., duration_s: _Optional[float] = ...) -> None: ...

class Reward(_message.Message):
    __slots__ = ("value", "success", "tests", "source")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    TESTS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    value: float
    success: bool
    tests: _containers.RepeatedCompositeFieldContainer[TestResult]
    source: str
    def __init__(self, value: _Optional[float] = ..., success: _Optional[bool] = ..., tests: _Optional[_Iterable[_Union[TestResult, _Mapping]]] = ..., source: _Optional[str] = ...) -> None: ...

class SafetyEvent(_message.Message):
    __slots__ = ("kind", "time", "command", "detail")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        KIND_UNSPECIFIED: _ClassVar[SafetyEvent.Kind]
        KIND_EGRESS_BLOCKED: _ClassVar[SafetyEvent.Kind]
        KIND_FILE_DENIED: _ClassVar[SafetyEvent.Kind]
        KIND_LIMIT_HIT: _ClassVar[SafetyEvent.Kind]
        KIND_ACTION_BLOCKED: _ClassVar[SafetyEvent.Kind]
    KIND_UNSPECIFIED: SafetyEvent.Kind
    KIND_EGRESS_BLOCKED: SafetyEvent.Kind
    KIND_FILE_DENIED: SafetyEvent.Kind
    KIND_LIMIT_HIT: SafetyEvent.Kind
    KIND_ACTION_BLOCKED: SafetyEvent.Kind
    KIND_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    kind: SafetyEvent.Kind
    time: _timestamp_pb2.Timestamp
    command: str
    detail: str
    def __init__(self, kind: _Optional[_Union[SafetyEvent.Kind, str]] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., command: _Optional[str] = ..., detail: _Optional[str] = ...) -> None: ...

class Trajectory(_message.Message):
    __slots__ = ("id", "task_id", "initial_state", "group_id", "turns", "reward", "start_policy_version", "stop_reason", "safety_events", "start_time", "end_time", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    INITIAL_STATE_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    START_POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    SAFETY_EVENTS_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    id: str
    task_id: str
    initial_state: str
    group_id: str
    turns: _containers.RepeatedCompositeFieldContainer[Turn]
    reward: Reward
    start_policy_version: int
    stop_reason: StopReason
    safety_events: _containers.RepeatedCompositeFieldContainer[SafetyEvent]
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, id: _Optional[str] = ..., task_id: _Optional[str] = ..., initial_state: _Optional[str] = ..., group_id: _Optional[str] = ..., turns: _Optional[_Iterable[_Union[Turn, _Mapping]]] = ..., reward: _Optional[_Union[Reward, _Mapping]] = ..., start_policy_version: _Optional[int] = ..., stop_reason: _Optional[_Union[StopReason, str]] = ..., safety_events: _Optional[_Iterable[_Union[SafetyEvent, _Mapping]]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...
