"""File transfer helpers: chunked streams with SHA-256, directories as tar (sync and async share these)."""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ale_proto.v1 import sandbox_pb2

from ale_rock.sdk.errors import ChecksumMismatch, InvalidArgument

CHUNK = 1 * 2**20


@dataclass
class UploadSource:
    """A local file (or a tar built from a directory) ready to stream."""

    path: Path
    is_tar: bool
    size: int
    sha256: str
    temporary: bool

    def cleanup(self) -> None:
        if self.temporary:
            self.path.unlink(missing_ok=True)


def _sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def prepare_upload(local: str | os.PathLike[str]) -> UploadSource:
    src = Path(local)
    if not src.exists():
        raise InvalidArgument(f"local path {src} does not exist", "local_path")
    if src.is_dir():
        fd, name = tempfile.mkstemp(prefix="ale-rock-upload-", suffix=".tar")
        os.close(fd)
        with tarfile.open(name, "w") as tar:
            tar.add(src, arcname=".")
        tmp = Path(name)
        return UploadSource(tmp, True, tmp.stat().st_size, _sha256_of(tmp), True)
    return UploadSource(src, False, src.stat().st_size, _sha256_of(src), False)


def upload_messages(src: UploadSource, sandbox_id: str, remote: str, mode: int) -> Iterator[sandbox_pb2.UploadFileRequest]:
    header = sandbox_pb2.UploadHeader(
        sandbox_id=sandbox_id, path=remote, mode=mode, is_tar=src.is_tar, size=src.size, sha256=src.sha256
    )
    yield sandbox_pb2.UploadFileRequest(header=header)
    with src.path.open("rb") as f:
        while block := f.read(CHUNK):
            yield sandbox_pb2.UploadFileRequest(chunk=block)


def check_upload(src: UploadSource, resp: sandbox_pb2.UploadFileResponse) -> None:
    if resp.sha256 and resp.sha256 != src.sha256:
        raise ChecksumMismatch(f"upload checksum mismatch: sent {src.sha256}, stored {resp.sha256}")
    if resp.size != src.size:
        raise ChecksumMismatch(f"upload size mismatch: sent {src.size} bytes, stored {resp.size}")


class DownloadSink:
    """Receives a DownloadFile stream into ``local``; verifies the checksum before publishing."""

    def __init__(self, local: str | os.PathLike[str]) -> None:
        self.local = Path(local)
        self.is_dir = False
        self._hash = hashlib.sha256()
        self.size = 0
        fd, name = tempfile.mkstemp(prefix=".ale-rock-dl-", dir=self.local.parent if self.local.parent.exists() else None)
        self._tmp = Path(name)
        self._file = os.fdopen(fd, "wb")
        self._expected = ""

    def feed(self, part: sandbox_pb2.DownloadFileResponse) -> None:
        kind = part.WhichOneof("part")
        if kind == "info":
            self.is_dir = part.info.is_dir
        elif kind == "chunk":
            self._file.write(part.chunk)
            self._hash.update(part.chunk)
            self.size += len(part.chunk)
        elif kind == "sha256":
            self._expected = part.sha256

    def finish(self) -> Path:
        self._file.close()
        try:
            got = self._hash.hexdigest()
            if not self._expected:
                raise ChecksumMismatch("download ended without a checksum (stream cut short?)")
            if got != self._expected:
                raise ChecksumMismatch(f"download checksum mismatch: expected {self._expected}, got {got}")
            if self.is_dir:
                self.local.mkdir(parents=True, exist_ok=True)
                with tarfile.open(self._tmp) as tar:
                    tar.extractall(self.local, filter="data")
            else:
                self.local.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(self._tmp), self.local)
            return self.local
        finally:
            self._tmp.unlink(missing_ok=True)

    def abort(self) -> None:
        self._file.close()
        self._tmp.unlink(missing_ok=True)
