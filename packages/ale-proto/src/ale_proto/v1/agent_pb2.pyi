import datetime

from ale_proto.v1 import common_pb2 as _common_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AgentStopKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AGENT_STOP_KIND_UNSPECIFIED: _ClassVar[AgentStopKind]
    AGENT_STOP_KIND_COMPLETED: _ClassVar[AgentStopKind]
    AGENT_STOP_KIND_MAX_STEPS: _ClassVar[AgentStopKind]
    AGENT_STOP_KIND_MAX_TOKENS: _ClassVar[AgentStopKind]
    AGENT_STOP_KIND_MAX_COST: _ClassVar[AgentStopKind]
    AGENT_STOP_KIND_TIMEOUT: _ClassVar[AgentStopKind]
    AGENT_STOP_KIND_INTERRUPTED: _ClassVar[AgentStopKind]
    AGENT_STOP_KIND_LOOP_DETECTED: _ClassVar[AgentStopKind]
    AGENT_STOP_KIND_ERROR: _ClassVar[AgentStopKind]
    AGENT_STOP_KIND_HOOK: _ClassVar[AgentStopKind]
AGENT_STOP_KIND_UNSPECIFIED: AgentStopKind
AGENT_STOP_KIND_COMPLETED: AgentStopKind
AGENT_STOP_KIND_MAX_STEPS: AgentStopKind
AGENT_STOP_KIND_MAX_TOKENS: AgentStopKind
AGENT_STOP_KIND_MAX_COST: AgentStopKind
AGENT_STOP_KIND_TIMEOUT: AgentStopKind
AGENT_STOP_KIND_INTERRUPTED: AgentStopKind
AGENT_STOP_KIND_LOOP_DETECTED: AgentStopKind
AGENT_STOP_KIND_ERROR: AgentStopKind
AGENT_STOP_KIND_HOOK: AgentStopKind

class ModelEndpoint(_message.Message):
    __slots__ = ("base_url", "model", "api_key")
    BASE_URL_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    API_KEY_FIELD_NUMBER: _ClassVar[int]
    base_url: str
    model: str
    api_key: str
    def __init__(self, base_url: _Optional[str] = ..., model: _Optional[str] = ..., api_key: _Optional[str] = ...) -> None: ...

class RunAgentRequest(_message.Message):
    __slots__ = ("task", "workspace", "model", "max_steps", "mode", "settings", "run_id")
    class SettingsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TASK_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    task: str
    workspace: str
    model: ModelEndpoint
    max_steps: int
    mode: str
    settings: _containers.ScalarMap[str, str]
    run_id: str
    def __init__(self, task: _Optional[str] = ..., workspace: _Optional[str] = ..., model: _Optional[_Union[ModelEndpoint, _Mapping]] = ..., max_steps: _Optional[int] = ..., mode: _Optional[str] = ..., settings: _Optional[_Mapping[str, str]] = ..., run_id: _Optional[str] = ...) -> None: ...

class AgentToolEvent(_message.Message):
    __slots__ = ("call", "result", "blocked")
    CALL_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    BLOCKED_FIELD_NUMBER: _ClassVar[int]
    call: _common_pb2.ToolCall
    result: _common_pb2.Observation
    blocked: bool
    def __init__(self, call: _Optional[_Union[_common_pb2.ToolCall, _Mapping]] = ..., result: _Optional[_Union[_common_pb2.Observation, _Mapping]] = ..., blocked: _Optional[bool] = ...) -> None: ...

class AgentStopped(_message.Message):
    __slots__ = ("kind", "message", "trajectory_path", "steps", "tokens")
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TRAJECTORY_PATH_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    kind: AgentStopKind
    message: str
    trajectory_path: str
    steps: int
    tokens: int
    def __init__(self, kind: _Optional[_Union[AgentStopKind, str]] = ..., message: _Optional[str] = ..., trajectory_path: _Optional[str] = ..., steps: _Optional[int] = ..., tokens: _Optional[int] = ...) -> None: ...

class RunAgentResponse(_message.Message):
    __slots__ = ("run_id", "step", "time", "assistant_message", "tool", "compression", "reminder", "loop_detected", "stopped")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    ASSISTANT_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    REMINDER_FIELD_NUMBER: _ClassVar[int]
    LOOP_DETECTED_FIELD_NUMBER: _ClassVar[int]
    STOPPED_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    step: int
    time: _timestamp_pb2.Timestamp
    assistant_message: str
    tool: AgentToolEvent
    compression: str
    reminder: str
    loop_detected: str
    stopped: AgentStopped
    def __init__(self, run_id: _Optional[str] = ..., step: _Optional[int] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., assistant_message: _Optional[str] = ..., tool: _Optional[_Union[AgentToolEvent, _Mapping]] = ..., compression: _Optional[str] = ..., reminder: _Optional[str] = ..., loop_detected: _Optional[str] = ..., stopped: _Optional[_Union[AgentStopped, _Mapping]] = ...) -> None: ...

class InterruptAgentRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class InterruptAgentResponse(_message.Message):
    __slots__ = ("interrupted",)
    INTERRUPTED_FIELD_NUMBER: _ClassVar[int]
    interrupted: bool
    def __init__(self, interrupted: _Optional[bool] = ...) -> None: ...

class GetTrajectoryRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class GetTrajectoryResponse(_message.Message):
    __slots__ = ("trajectory",)
    TRAJECTORY_FIELD_NUMBER: _ClassVar[int]
    trajectory: _common_pb2.Trajectory
    def __init__(self, trajectory: _Optional[_Union[_common_pb2.Trajectory, _Mapping]] = ...) -> None: ...
