"""File transfer inside the sandbox: chunked upload/download with SHA-256, read, write, list.

Paths are absolute or relative to the sandbox's work dir. The kernel (non-root uid, read-only
mounts) decides what may be touched; this module only refuses malformed paths and maps OS errors
to typed ones.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import stat
import tarfile
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ale_rock.rocklet.types import RockletError

MAX_PATH = 4096
# gRPC clients refuse messages over 4 MiB by default: keep every download chunk (data + framing)
# below, so a client with default settings can stream any file.
_MAX_PAYLOAD = (4 << 20) - 1024
# ReadFile: an explicit ``limit`` may be up to 4 MiB (the Admin's limit too); a larger one is
# refused by name instead of clamped silently. ``limit`` 0 reads 4 MiB - 1 KiB, so that the reply
# (data + framing) fits a client left at gRPC's default 4 MiB receive limit; a full 4 MiB read
# is a few bytes over it (docs/clients.md).
MAX_READ_LIMIT = 4 << 20
DEFAULT_READ_LIMIT = _MAX_PAYLOAD
# UploadFile: "at most 1 MiB per message" (the SDK sends 1 MiB chunks); larger ones are refused.
MAX_UPLOAD_CHUNK = 1 << 20
DEFAULT_CHUNK = 1 << 20
MAX_CHUNK = _MAX_PAYLOAD
MAX_LIST = 1000


@dataclass
class FileMeta:
    """A file's metadata (FileInfo in the contract)."""

    path: str
    size: int
    mode: int
    is_dir: bool
    is_symlink: bool
    mtime: float


class FileOps:
    """File operations rooted at ``workdir`` for relative paths."""

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir

    def resolve(self, path: str, field: str = "path") -> str:
        """Absolute normalized path for ``path``; INVALID_ARGUMENT when malformed."""
        if not path:
            raise RockletError("invalid", "path is empty", field)
        if "\0" in path or len(path) > MAX_PATH:
            raise RockletError("invalid", "path contains a NUL byte or is too long", field)
        full = path if path.startswith("/") else os.path.join(self.workdir, path)
        return os.path.normpath(full)

    # -- small files -----------------------------------------------------------------------------

    def read(self, path: str, offset: int = 0, limit: int = 0) -> tuple[bytes, int, bool]:
        """Read up to ``limit`` bytes at ``offset``; returns (data, file size, eof)."""
        full = self.resolve(path)
        if limit > MAX_READ_LIMIT:
            raise RockletError("invalid", f"at most {MAX_READ_LIMIT} bytes (4 MiB) per read; read on from offset + len(data)", "limit")
        limit = limit or DEFAULT_READ_LIMIT
        with _os_errors(full), open(full, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(offset)
            data = f.read(limit)
        return data, size, offset + len(data) >= size

    def write(self, path: str, data: bytes, mode: int = 0, append: bool = False) -> int:
        """Write (or append) ``data``, creating parents; returns the size afterwards."""
        full = self.resolve(path)
        with _os_errors(full):
            os.makedirs(os.path.dirname(full), exist_ok=True)
            fd = os.open(
                full, os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC), mode or 0o644
            )
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if mode:
                    os.fchmod(fd, mode)
                return os.fstat(fd).st_size
            finally:
                os.close(fd)

    def list(
        self, path: str, recursive: bool = False, page_size: int = 0, page_token: str = ""
    ) -> tuple[list[FileMeta], str, int]:
        """Entries under a directory sorted by path; returns (page, next token, total)."""
        full = self.resolve(path)
        page_size = min(page_size or 100, MAX_LIST)
        with _os_errors(full):
            if not os.path.lexists(full):
                raise RockletError("not_found", f"{full}: no such file or directory", "path", errno="ENOENT")
            if not os.path.isdir(full):
                raise RockletError("invalid", f"{full} is not a directory", "path", errno="ENOTDIR")
            names: list[str] = []
            if recursive:
                for root, dirs, files in os.walk(full):
                    names += [os.path.join(root, n) for n in dirs + files]
            else:
                names = [os.path.join(full, n) for n in os.listdir(full)]
        names.sort()
        start = 0
        if page_token:
            if not page_token.isdigit():
                raise RockletError("invalid", "malformed page token", "page.page_token")
            start = int(page_token)
        page = names[start : start + page_size]
        metas = [m for m in (self._meta(n) for n in page) if m is not None]
        nxt = str(start + page_size) if start + page_size < len(names) else ""
        return metas, nxt, len(names)

    def stat(self, path: str) -> FileMeta:
        """Metadata of one path."""
        full = self.resolve(path)
        with _os_errors(full):
            meta = self._meta(full, strict=True)
        assert meta is not None
        return meta

    @staticmethod
    def _meta(full: str, strict: bool = False) -> FileMeta | None:
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            if strict:
                raise
            return None
        is_link = stat.S_ISLNK(st.st_mode)
        return FileMeta(
            full, st.st_size, stat.S_IMODE(st.st_mode), stat.S_ISDIR(st.st_mode), is_link, st.st_mtime
        )

    # -- streams -------------------------------------------------------------------------------

    def upload(
        self,
        path: str,
        chunks: Iterable[bytes],
        mode: int = 0,
        is_tar: bool = False,
        expected_sha256: str = "",
    ) -> tuple[int, str]:
        """Receive a file (or a tar extracted into ``path``); returns (size, sha256 hex)."""
        full = self.resolve(path, "header.path")
        digest = hashlib.sha256()
        size = 0
        with _os_errors(full):
            parent = full if is_tar else os.path.dirname(full)
            os.makedirs(parent, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=parent, prefix=".ale-upload-")
            try:
                with os.fdopen(fd, "wb") as f:
                    for chunk in chunks:
                        digest.update(chunk)
                        size += len(chunk)
                        f.write(chunk)
                hexdigest = digest.hexdigest()
                if expected_sha256 and expected_sha256.lower() != hexdigest:
                    raise RockletError("invalid", f"sha256 mismatch: got {hexdigest}", "header.sha256")
                if is_tar:
                    _extract_tar(tmp, full)
                    os.unlink(tmp)
                else:
                    os.chmod(tmp, mode or 0o644)
                    os.replace(tmp, full)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
        return size, hexdigest

    def download(self, path: str, chunk_size: int = 0) -> tuple[FileMeta, Iterator[bytes]]:
        """Stream a file, or a directory as a tar; returns its metadata and a chunk iterator."""
        meta = self.stat(path)
        chunk_size = min(chunk_size or DEFAULT_CHUNK, MAX_CHUNK)
        if meta.is_dir:
            meta.size = 0
            return meta, _tar_stream(meta.path, chunk_size)
        with _os_errors(meta.path):
            f = open(meta.path, "rb")  # noqa: SIM115 - closed by the generator

        def chunks() -> Iterator[bytes]:
            with f:
                while data := f.read(chunk_size):
                    yield data

        return meta, chunks()


class _Sink(io.RawIOBase):
    """A write-only stream whose bytes are collected for a generator to hand out."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:  # type: ignore[no-untyped-def,override]
        self.buf += b
        return len(b)


def _tar_stream(root: str, chunk_size: int) -> Iterator[bytes]:
    sink = _Sink()
    with tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
        for dirpath, dirs, files in os.walk(root):
            dirs.sort()
            for name in [*sorted(dirs), *sorted(files)]:
                full = os.path.join(dirpath, name)
                tar.add(full, arcname=os.path.relpath(full, root), recursive=False)
                while len(sink.buf) >= chunk_size:
                    yield bytes(sink.buf[:chunk_size])
                    del sink.buf[:chunk_size]
    while sink.buf:
        yield bytes(sink.buf[:chunk_size])
        del sink.buf[:chunk_size]


def _extract_tar(archive: str, dest: str) -> None:
    try:
        with tarfile.open(archive, "r:*") as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(dest, filter="data")
            else:  # pragma: no cover - Python without PEP 706
                for member in tar.getmembers():
                    target = os.path.normpath(os.path.join(dest, member.name))
                    if not target.startswith(dest.rstrip("/") + "/") or member.issym() or member.islnk():
                        raise RockletError("invalid", f"unsafe tar member {member.name!r}", "header.is_tar")
                tar.extractall(dest)
    except tarfile.TarError as e:  # FilterError (unsafe member) is a TarError too
        raise RockletError("invalid", f"bad tar archive: {e}", "header.is_tar") from e


class _os_errors:
    """Map OS errors to typed ones naming the path."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __enter__(self) -> None:
        return None

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: object) -> None:
        if isinstance(e, FileNotFoundError):
            raise RockletError("not_found", f"{self.path}: no such file or directory", "path", errno="ENOENT") from e
        if isinstance(e, (PermissionError, IsADirectoryError, NotADirectoryError, FileExistsError)):
            # The errno's name travels in the detail, so clients rebuild the same OSError.
            raise RockletError("invalid", f"{self.path}: {e.strerror}", "path",
                               errno=errno.errorcode.get(e.errno or 0, "")) from e
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
            raise RockletError("exhausted", f"{self.path}: {e.strerror}", "path") from e
        if isinstance(e, OSError):
            raise RockletError("invalid", f"{self.path}: {e.strerror or e}", "path") from e
