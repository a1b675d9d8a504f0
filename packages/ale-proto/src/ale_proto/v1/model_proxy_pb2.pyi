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

class UpstreamKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UPSTREAM_KIND_UNSPECIFIED: _ClassVar[UpstreamKind]
    UPSTREAM_KIND_INFERENCE_SERVICE: _ClassVar[UpstreamKind]
    UPSTREAM_KIND_OPENAI: _ClassVar[UpstreamKind]
    UPSTREAM_KIND_REPLAY: _ClassVar[UpstreamKind]
UPSTREAM_KIND_UNSPECIFIED: UpstreamKind
UPSTREAM_KIND_INFERENCE_SERVICE: UpstreamKind
UPSTREAM_KIND_OPENAI: UpstreamKind
UPSTREAM_KIND_REPLAY: UpstreamKind

class OpenEpisodeRequest(_message.Message):
    __slots__ = ("episode_id", "sandbox_id", "upstream", "upstream_target", "model", "max_calls")
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_TARGET_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MAX_CALLS_FIELD_NUMBER: _ClassVar[int]
    episode_id: str
    sandbox_id: str
    upstream: UpstreamKind
    upstream_target: str
    model: str
    max_calls: int
    def __init__(self, episode_id: _Optional[str] = ..., sandbox_id: _Optional[str] = ..., upstream: _Optional[_Union[UpstreamKind, str]] = ..., upstream_target: _Optional[str] = ..., model: _Optional[str] = ..., max_calls: _Optional[int] = ...) -> None: ...

class OpenEpisodeResponse(_message.Message):
    __slots__ = ("api_key", "base_url")
    API_KEY_FIELD_NUMBER: _ClassVar[int]
    BASE_URL_FIELD_NUMBER: _ClassVar[int]
    api_key: str
    base_url: str
    def __init__(self, api_key: _Optional[str] = ..., base_url: _Optional[str] = ...) -> None: ...

class CloseEpisodeRequest(_message.Message):
    __slots__ = ("episode_id",)
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    episode_id: str
    def __init__(self, episode_id: _Optional[str] = ...) -> None: ...

class CloseEpisodeResponse(_message.Message):
    __slots__ = ("calls",)
    CALLS_FIELD_NUMBER: _ClassVar[int]
    calls: int
    def __init__(self, calls: _Optional[int] = ...) -> None: ...

class SubscribeCallsRequest(_message.Message):
    __slots__ = ("episode_id", "from_index")
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_INDEX_FIELD_NUMBER: _ClassVar[int]
    episode_id: str
    from_index: int
    def __init__(self, episode_id: _Optional[str] = ..., from_index: _Optional[int] = ...) -> None: ...

class ModelCall(_message.Message):
    __slots__ = ("index", "episode_id", "prompt_token_ids", "completion_token_ids", "completion_logprobs", "policy_version", "stop_reason", "request_json", "response_json", "latency_s", "time", "error")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    REQUEST_JSON_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_JSON_FIELD_NUMBER: _ClassVar[int]
    LATENCY_S_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    index: int
    episode_id: str
    prompt_token_ids: _containers.RepeatedScalarFieldContainer[int]
    completion_token_ids: _containers.RepeatedScalarFieldContainer[int]
    completion_logprobs: _containers.RepeatedScalarFieldContainer[float]
    policy_version: int
    stop_reason: _common_pb2.StopReason
    request_json: str
    response_json: str
    latency_s: float
    time: _timestamp_pb2.Timestamp
    error: _common_pb2.ErrorDetail
    def __init__(self, index: _Optional[int] = ..., episode_id: _Optional[str] = ..., prompt_token_ids: _Optional[_Iterable[int]] = ..., completion_token_ids: _Optional[_Iterable[int]] = ..., completion_logprobs: _Optional[_Iterable[float]] = ..., policy_version: _Optional[int] = ..., stop_reason: _Optional[_Union[_common_pb2.StopReason, str]] = ..., request_json: _Optional[str] = ..., response_json: _Optional[str] = ..., latency_s: _Optional[float] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ErrorDetail, _Mapping]] = ...) -> None: ...

class SubscribeCallsResponse(_message.Message):
    __slots__ = ("call",)
    CALL_FIELD_NUMBER: _ClassVar[int]
    call: ModelCall
    def __init__(self, call: _Optional[_Union[ModelCall, _Mapping]] = ...) -> None: ...
