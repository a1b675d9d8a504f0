import datetime

from ale_proto.v1 import common_pb2 as _common_pb2
from ale_proto.v1 import sandbox_pb2 as _sandbox_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BuildState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BUILD_STATE_UNSPECIFIED: _ClassVar[BuildState]
    BUILD_STATE_BUILDING: _ClassVar[BuildState]
    BUILD_STATE_READY: _ClassVar[BuildState]
    BUILD_STATE_FAILED: _ClassVar[BuildState]
BUILD_STATE_UNSPECIFIED: BuildState
BUILD_STATE_BUILDING: BuildState
BUILD_STATE_READY: BuildState
BUILD_STATE_FAILED: BuildState

class MakeRequest(_message.Message):
    __slots__ = ("env_id", "kwargs", "step_timeout_ms", "episode_budget_s", "resources", "labels")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ENV_ID_FIELD_NUMBER: _ClassVar[int]
    KWARGS_FIELD_NUMBER: _ClassVar[int]
    STEP_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    EPISODE_BUDGET_S_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    env_id: str
    kwargs: _struct_pb2.Struct
    step_timeout_ms: int
    episode_budget_s: int
    resources: _common_pb2.Resources
    labels: _containers.ScalarMap[str, str]
    def __init__(self, env_id: _Optional[str] = ..., kwargs: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., step_timeout_ms: _Optional[int] = ..., episode_budget_s: _Optional[int] = ..., resources: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class MakeResponse(_message.Message):
    __slots__ = ("env_handle", "sandbox_id", "action_description", "tools")
    ENV_HANDLE_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    env_handle: str
    sandbox_id: str
    action_description: str
    tools: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    def __init__(self, env_handle: _Optional[str] = ..., sandbox_id: _Optional[str] = ..., action_description: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ...) -> None: ...

class ResetRequest(_message.Message):
    __slots__ = ("env_handle", "seed")
    ENV_HANDLE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    env_handle: str
    seed: int
    def __init__(self, env_handle: _Optional[str] = ..., seed: _Optional[int] = ...) -> None: ...

class ResetResponse(_message.Message):
    __slots__ = ("observation", "info")
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    observation: str
    info: _struct_pb2.Struct
    def __init__(self, observation: _Optional[str] = ..., info: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class StepRequest(_message.Message):
    __slots__ = ("env_handle", "action")
    ENV_HANDLE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    env_handle: str
    action: str
    def __init__(self, env_handle: _Optional[str] = ..., action: _Optional[str] = ...) -> None: ...

class StepResponse(_message.Message):
    __slots__ = ("observation", "reward", "terminated", "truncated", "info", "safety_events", "final_reward")
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    TERMINATED_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    SAFETY_EVENTS_FIELD_NUMBER: _ClassVar[int]
    FINAL_REWARD_FIELD_NUMBER: _ClassVar[int]
    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: _struct_pb2.Struct
    safety_events: _containers.RepeatedCompositeFieldContainer[_common_pb2.SafetyEvent]
    final_reward: _common_pb2.Reward
    def __init__(self, observation: _Optional[str] = ..., reward: _Optional[float] = ..., terminated: _Optional[bool] = ..., truncated: _Optional[bool] = ..., info: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., safety_events: _Optional[_Iterable[_Union[_common_pb2.SafetyEvent, _Mapping]]] = ..., final_reward: _Optional[_Union[_common_pb2.Reward, _Mapping]] = ...) -> None: ...

class CloseRequest(_message.Message):
    __slots__ = ("env_handle",)
    ENV_HANDLE_FIELD_NUMBER: _ClassVar[int]
    env_handle: str
    def __init__(self, env_handle: _Optional[str] = ...) -> None: ...

class CloseResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EnvCall(_message.Message):
    __slots__ = ("make", "reset", "step", "close")
    MAKE_FIELD_NUMBER: _ClassVar[int]
    RESET_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    CLOSE_FIELD_NUMBER: _ClassVar[int]
    make: MakeRequest
    reset: ResetRequest
    step: StepRequest
    close: CloseRequest
    def __init__(self, make: _Optional[_Union[MakeRequest, _Mapping]] = ..., reset: _Optional[_Union[ResetRequest, _Mapping]] = ..., step: _Optional[_Union[StepRequest, _Mapping]] = ..., close: _Optional[_Union[CloseRequest, _Mapping]] = ...) -> None: ...

class EnvCallResult(_message.Message):
    __slots__ = ("make", "reset", "step", "close", "error")
    MAKE_FIELD_NUMBER: _ClassVar[int]
    RESET_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    CLOSE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    make: MakeResponse
    reset: ResetResponse
    step: StepResponse
    close: CloseResponse
    error: _common_pb2.ErrorDetail
    def __init__(self, make: _Optional[_Union[MakeResponse, _Mapping]] = ..., reset: _Optional[_Union[ResetResponse, _Mapping]] = ..., step: _Optional[_Union[StepResponse, _Mapping]] = ..., close: _Optional[_Union[CloseResponse, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ErrorDetail, _Mapping]] = ...) -> None: ...

class EnvServiceBatchRequest(_message.Message):
    __slots__ = ("calls",)
    CALLS_FIELD_NUMBER: _ClassVar[int]
    calls: _containers.RepeatedCompositeFieldContainer[EnvCall]
    def __init__(self, calls: _Optional[_Iterable[_Union[EnvCall, _Mapping]]] = ...) -> None: ...

class EnvServiceBatchResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[EnvCallResult]
    def __init__(self, results: _Optional[_Iterable[_Union[EnvCallResult, _Mapping]]] = ...) -> None: ...

class ListEnvsRequest(_message.Message):
    __slots__ = ("page", "prefix")
    PAGE_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    page: _common_pb2.PageRequest
    prefix: str
    def __init__(self, page: _Optional[_Union[_common_pb2.PageRequest, _Mapping]] = ..., prefix: _Optional[str] = ...) -> None: ...

class EnvDescription(_message.Message):
    __slots__ = ("env_id", "description", "tags")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ENV_ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    env_id: str
    description: str
    tags: _containers.ScalarMap[str, str]
    def __init__(self, env_id: _Optional[str] = ..., description: _Optional[str] = ..., tags: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ListEnvsResponse(_message.Message):
    __slots__ = ("envs", "page")
    ENVS_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    envs: _containers.RepeatedCompositeFieldContainer[EnvDescription]
    page: _common_pb2.PageResponse
    def __init__(self, envs: _Optional[_Iterable[_Union[EnvDescription, _Mapping]]] = ..., page: _Optional[_Union[_common_pb2.PageResponse, _Mapping]] = ...) -> None: ...

class EnvBase(_message.Message):
    __slots__ = ("rootfs", "docker_image", "dockerfile")
    ROOTFS_FIELD_NUMBER: _ClassVar[int]
    DOCKER_IMAGE_FIELD_NUMBER: _ClassVar[int]
    DOCKERFILE_FIELD_NUMBER: _ClassVar[int]
    rootfs: str
    docker_image: str
    dockerfile: str
    def __init__(self, rootfs: _Optional[str] = ..., docker_image: _Optional[str] = ..., dockerfile: _Optional[str] = ...) -> None: ...

class EnvSpec(_message.Message):
    __slots__ = ("name", "version", "base", "setup_commands", "resources", "network", "env", "workdir", "description", "spec_hash")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    BASE_FIELD_NUMBER: _ClassVar[int]
    SETUP_COMMANDS_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    WORKDIR_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    SPEC_HASH_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    base: EnvBase
    setup_commands: _containers.RepeatedScalarFieldContainer[str]
    resources: _common_pb2.Resources
    network: _sandbox_pb2.NetworkPolicy
    env: _containers.ScalarMap[str, str]
    workdir: str
    description: str
    spec_hash: str
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., base: _Optional[_Union[EnvBase, _Mapping]] = ..., setup_commands: _Optional[_Iterable[str]] = ..., resources: _Optional[_Union[_common_pb2.Resources, _Mapping]] = ..., network: _Optional[_Union[_sandbox_pb2.NetworkPolicy, _Mapping]] = ..., env: _Optional[_Mapping[str, str]] = ..., workdir: _Optional[str] = ..., description: _Optional[str] = ..., spec_hash: _Optional[str] = ...) -> None: ...

class RegisterEnvSpecRequest(_message.Message):
    __slots__ = ("spec",)
    SPEC_FIELD_NUMBER: _ClassVar[int]
    spec: EnvSpec
    def __init__(self, spec: _Optional[_Union[EnvSpec, _Mapping]] = ...) -> None: ...

class RegisterEnvSpecResponse(_message.Message):
    __slots__ = ("spec",)
    SPEC_FIELD_NUMBER: _ClassVar[int]
    spec: EnvSpec
    def __init__(self, spec: _Optional[_Union[EnvSpec, _Mapping]] = ...) -> None: ...

class GetEnvSpecRequest(_message.Message):
    __slots__ = ("name", "version")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ...) -> None: ...

class GetEnvSpecResponse(_message.Message):
    __slots__ = ("spec", "builds", "register_time")
    class BuildsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: BuildState
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[BuildState, str]] = ...) -> None: ...
    SPEC_FIELD_NUMBER: _ClassVar[int]
    BUILDS_FIELD_NUMBER: _ClassVar[int]
    REGISTER_TIME_FIELD_NUMBER: _ClassVar[int]
    spec: EnvSpec
    builds: _containers.ScalarMap[str, BuildState]
    register_time: _timestamp_pb2.Timestamp
    def __init__(self, spec: _Optional[_Union[EnvSpec, _Mapping]] = ..., builds: _Optional[_Mapping[str, BuildState]] = ..., register_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListEnvSpecsRequest(_message.Message):
    __slots__ = ("page",)
    PAGE_FIELD_NUMBER: _ClassVar[int]
    page: _common_pb2.PageRequest
    def __init__(self, page: _Optional[_Union[_common_pb2.PageRequest, _Mapping]] = ...) -> None: ...

class ListEnvSpecsResponse(_message.Message):
    __slots__ = ("specs", "page")
    SPECS_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    specs: _containers.RepeatedCompositeFieldContainer[EnvSpec]
    page: _common_pb2.PageResponse
    def __init__(self, specs: _Optional[_Iterable[_Union[EnvSpec, _Mapping]]] = ..., page: _Optional[_Union[_common_pb2.PageResponse, _Mapping]] = ...) -> None: ...

class DeleteEnvSpecRequest(_message.Message):
    __slots__ = ("name", "version")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ...) -> None: ...

class DeleteEnvSpecResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BuildEnvSpecRequest(_message.Message):
    __slots__ = ("name", "version", "backend", "force")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    backend: _sandbox_pb2.SandboxBackend
    force: bool
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., backend: _Optional[_Union[_sandbox_pb2.SandboxBackend, str]] = ..., force: _Optional[bool] = ...) -> None: ...

class BuildEnvSpecResponse(_message.Message):
    __slots__ = ("log_line", "state", "cached")
    LOG_LINE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CACHED_FIELD_NUMBER: _ClassVar[int]
    log_line: str
    state: BuildState
    cached: bool
    def __init__(self, log_line: _Optional[str] = ..., state: _Optional[_Union[BuildState, str]] = ..., cached: _Optional[bool] = ...) -> None: ...
