from ale_proto.v1 import common_pb2 as _common_pb2
from ale_proto.v1 import sandbox_pb2 as _sandbox_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RockletServiceExecRequest(_message.Message):
    __slots__ = ("spec", "exec_id")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    EXEC_ID_FIELD_NUMBER: _ClassVar[int]
    spec: _sandbox_pb2.ExecSpec
    exec_id: str
    def __init__(self, spec: _Optional[_Union[_sandbox_pb2.ExecSpec, _Mapping]] = ..., exec_id: _Optional[str] = ...) -> None: ...

class RockletServiceExecResponse(_message.Message):
    __slots__ = ("result",)
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: _sandbox_pb2.ExecResult
    def __init__(self, result: _Optional[_Union[_sandbox_pb2.ExecResult, _Mapping]] = ...) -> None: ...

class RockletServiceExecStreamRequest(_message.Message):
    __slots__ = ("spec", "exec_id")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    EXEC_ID_FIELD_NUMBER: _ClassVar[int]
    spec: _sandbox_pb2.ExecSpec
    exec_id: str
    def __init__(self, spec: _Optional[_Union[_sandbox_pb2.ExecSpec, _Mapping]] = ..., exec_id: _Optional[str] = ...) -> None: ...

class RockletServiceExecStreamResponse(_message.Message):
    __slots__ = ("started", "stdout", "stderr", "exit")
    STARTED_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    EXIT_FIELD_NUMBER: _ClassVar[int]
    started: _sandbox_pb2.ExecStarted
    stdout: bytes
    stderr: bytes
    exit: _sandbox_pb2.ExecResult
    def __init__(self, started: _Optional[_Union[_sandbox_pb2.ExecStarted, _Mapping]] = ..., stdout: _Optional[bytes] = ..., stderr: _Optional[bytes] = ..., exit: _Optional[_Union[_sandbox_pb2.ExecResult, _Mapping]] = ...) -> None: ...

class RockletServiceSignalProcessRequest(_message.Message):
    __slots__ = ("exec_id", "pid", "session_id", "signal", "all_processes")
    EXEC_ID_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    ALL_PROCESSES_FIELD_NUMBER: _ClassVar[int]
    exec_id: str
    pid: int
    session_id: str
    signal: int
    all_processes: bool
    def __init__(self, exec_id: _Optional[str] = ..., pid: _Optional[int] = ..., session_id: _Optional[str] = ..., signal: _Optional[int] = ..., all_processes: _Optional[bool] = ...) -> None: ...

class RockletServiceSignalProcessResponse(_message.Message):
    __slots__ = ("delivered",)
    DELIVERED_FIELD_NUMBER: _ClassVar[int]
    delivered: bool
    def __init__(self, delivered: _Optional[bool] = ...) -> None: ...

class RockletServiceCreateSessionRequest(_message.Message):
    __slots__ = ("spec",)
    SPEC_FIELD_NUMBER: _ClassVar[int]
    spec: _sandbox_pb2.SessionSpec
    def __init__(self, spec: _Optional[_Union[_sandbox_pb2.SessionSpec, _Mapping]] = ...) -> None: ...

class RockletServiceCreateSessionResponse(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class RockletServiceRunInSessionRequest(_message.Message):
    __slots__ = ("session_id", "command")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    command: _sandbox_pb2.SessionCommand
    def __init__(self, session_id: _Optional[str] = ..., command: _Optional[_Union[_sandbox_pb2.SessionCommand, _Mapping]] = ...) -> None: ...

class RockletServiceRunInSessionResponse(_message.Message):
    __slots__ = ("result",)
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: _sandbox_pb2.ExecResult
    def __init__(self, result: _Optional[_Union[_sandbox_pb2.ExecResult, _Mapping]] = ...) -> None: ...

class RockletServiceSendSessionInputRequest(_message.Message):
    __slots__ = ("session_id", "data", "interrupt")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    INTERRUPT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    data: bytes
    interrupt: bool
    def __init__(self, session_id: _Optional[str] = ..., data: _Optional[bytes] = ..., interrupt: _Optional[bool] = ...) -> None: ...

class RockletServiceSendSessionInputResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RockletServiceReadSessionOutputRequest(_message.Message):
    __slots__ = ("session_id", "wait_ms")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    wait_ms: int
    def __init__(self, session_id: _Optional[str] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class RockletServiceReadSessionOutputResponse(_message.Message):
    __slots__ = ("output", "closed")
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    CLOSED_FIELD_NUMBER: _ClassVar[int]
    output: bytes
    closed: bool
    def __init__(self, output: _Optional[bytes] = ..., closed: _Optional[bool] = ...) -> None: ...

class RockletServiceCloseSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class RockletServiceCloseSessionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RockletServiceUploadFileRequest(_message.Message):
    __slots__ = ("header", "chunk")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    header: _sandbox_pb2.UploadHeader
    chunk: bytes
    def __init__(self, header: _Optional[_Union[_sandbox_pb2.UploadHeader, _Mapping]] = ..., chunk: _Optional[bytes] = ...) -> None: ...

class RockletServiceUploadFileResponse(_message.Message):
    __slots__ = ("size", "sha256")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    size: int
    sha256: str
    def __init__(self, size: _Optional[int] = ..., sha256: _Optional[str] = ...) -> None: ...

class RockletServiceDownloadFileRequest(_message.Message):
    __slots__ = ("path", "chunk_size")
    PATH_FIELD_NUMBER: _ClassVar[int]
    CHUNK_SIZE_FIELD_NUMBER: _ClassVar[int]
    path: str
    chunk_size: int
    def __init__(self, path: _Optional[str] = ..., chunk_size: _Optional[int] = ...) -> None: ...

class RockletServiceDownloadFileResponse(_message.Message):
    __slots__ = ("info", "chunk", "sha256")
    INFO_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    info: _sandbox_pb2.FileInfo
    chunk: bytes
    sha256: str
    def __init__(self, info: _Optional[_Union[_sandbox_pb2.FileInfo, _Mapping]] = ..., chunk: _Optional[bytes] = ..., sha256: _Optional[str] = ...) -> None: ...

class RockletServiceReadFileRequest(_message.Message):
    __slots__ = ("path", "offset", "limit")
    PATH_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    path: str
    offset: int
    limit: int
    def __init__(self, path: _Optional[str] = ..., offset: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class RockletServiceReadFileResponse(_message.Message):
    __slots__ = ("data", "size", "eof")
    DATA_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    EOF_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    size: int
    eof: bool
    def __init__(self, data: _Optional[bytes] = ..., size: _Optional[int] = ..., eof: _Optional[bool] = ...) -> None: ...

class RockletServiceWriteFileRequest(_message.Message):
    __slots__ = ("path", "data", "mode", "append")
    PATH_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    APPEND_FIELD_NUMBER: _ClassVar[int]
    path: str
    data: bytes
    mode: int
    append: bool
    def __init__(self, path: _Optional[str] = ..., data: _Optional[bytes] = ..., mode: _Optional[int] = ..., append: _Optional[bool] = ...) -> None: ...

class RockletServiceWriteFileResponse(_message.Message):
    __slots__ = ("size",)
    SIZE_FIELD_NUMBER: _ClassVar[int]
    size: int
    def __init__(self, size: _Optional[int] = ...) -> None: ...

class RockletServiceListFilesRequest(_message.Message):
    __slots__ = ("path", "recursive", "page")
    PATH_FIELD_NUMBER: _ClassVar[int]
    RECURSIVE_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    path: str
    recursive: bool
    page: _common_pb2.PageRequest
    def __init__(self, path: _Optional[str] = ..., recursive: _Optional[bool] = ..., page: _Optional[_Union[_common_pb2.PageRequest, _Mapping]] = ...) -> None: ...

class RockletServiceListFilesResponse(_message.Message):
    __slots__ = ("files", "page")
    FILES_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    files: _containers.RepeatedCompositeFieldContainer[_sandbox_pb2.FileInfo]
    page: _common_pb2.PageResponse
    def __init__(self, files: _Optional[_Iterable[_Union[_sandbox_pb2.FileInfo, _Mapping]]] = ..., page: _Optional[_Union[_common_pb2.PageResponse, _Mapping]] = ...) -> None: ...

class GetInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetInfoResponse(_message.Message):
    __slots__ = ("version", "uptime_s", "workdir", "uid")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    UPTIME_S_FIELD_NUMBER: _ClassVar[int]
    WORKDIR_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    version: str
    uptime_s: float
    workdir: str
    uid: int
    def __init__(self, version: _Optional[str] = ..., uptime_s: _Optional[float] = ..., workdir: _Optional[str] = ..., uid: _Optional[int] = ...) -> None: ...

class EgressTarget(_message.Message):
    __slots__ = ("host", "port", "command")
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    host: str
    port: int
    command: str
    def __init__(self, host: _Optional[str] = ..., port: _Optional[int] = ..., command: _Optional[str] = ...) -> None: ...

class ConnectRequest(_message.Message):
    __slots__ = ("target", "data")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    target: EgressTarget
    data: bytes
    def __init__(self, target: _Optional[_Union[EgressTarget, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class ConnectResponse(_message.Message):
    __slots__ = ("connected", "data", "error")
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    connected: bool
    data: bytes
    error: _common_pb2.ErrorDetail
    def __init__(self, connected: _Optional[bool] = ..., data: _Optional[bytes] = ..., error: _Optional[_Union[_common_pb2.ErrorDetail, _Mapping]] = ...) -> None: ...
