"""File operations: read/write with parents, list, chunked upload/download with SHA-256, tar dirs."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest
from ale_rock.rocklet.files import FileOps
from ale_rock.rocklet.types import RockletError


def test_write_creates_parents_and_read_back(files: FileOps, workdir: Path) -> None:
    assert files.write("a/b/c.txt", b"hello", mode=0o600) == 5
    assert (workdir / "a/b/c.txt").stat().st_mode & 0o777 == 0o600
    assert files.write("a/b/c.txt", b"!", append=True) == 6
    assert files.read("a/b/c.txt") == (b"hello!", 6, True)
    assert files.read("a/b/c.txt", offset=2, limit=2) == (b"ll", 6, False)


def test_list_sorted_and_paged(files: FileOps) -> None:
    for name in ("b", "a", "d/e"):
        files.write(name, b"x")
    page, nxt, total = files.list(".", recursive=True, page_size=2)
    assert [Path(m.path).name for m in page] == ["a", "b"] and nxt and total == 4
    rest, nxt2, _ = files.list(".", recursive=True, page_size=2, page_token=nxt)
    assert [Path(m.path).name for m in rest] == ["d", "e"] and nxt2 == ""
    assert rest[0].is_dir


def test_upload_download_with_checksum(files: FileOps) -> None:
    data = bytes(range(256)) * 5000
    digest = hashlib.sha256(data).hexdigest()
    chunks = [data[i : i + 4096] for i in range(0, len(data), 4096)]
    assert files.upload("up/bin", iter(chunks), expected_sha256=digest) == (len(data), digest)
    meta, stream = files.download("up/bin", chunk_size=10000)
    assert meta.size == len(data) and b"".join(stream) == data


def test_checksum_mismatch_leaves_nothing(files: FileOps, workdir: Path) -> None:
    with pytest.raises(RockletError) as e:
        files.upload("x.bin", iter([b"abc"]), expected_sha256="0" * 64)
    assert e.value.field == "header.sha256"
    assert list(workdir.iterdir()) == []


def test_directory_round_trip_as_tar(files: FileOps, workdir: Path, tmp_path: Path) -> None:
    src = workdir / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "f.txt").write_text("deep")
    (src / "top.txt").write_text("top")
    meta, stream = files.download("src")
    assert meta.is_dir
    archive = b"".join(stream)
    size, _ = files.upload("copy", iter([archive]), is_tar=True)
    assert size == len(archive)
    assert (workdir / "copy" / "sub" / "f.txt").read_text() == "deep"
    assert (workdir / "copy" / "top.txt").read_text() == "top"


def test_unsafe_tar_is_refused(files: FileOps, tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("../escape.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(RockletError) as e:
        files.upload("dest", iter([buf.getvalue()]), is_tar=True)
    assert e.value.kind == "invalid"
    assert not (tmp_path / "escape.txt").exists()


@pytest.mark.parametrize("path", ["", "a\0b", "x" * 5000])
def test_malformed_paths(files: FileOps, path: str) -> None:
    with pytest.raises(RockletError) as e:
        files.read(path)
    assert e.value.kind == "invalid" and e.value.field == "path"


def test_missing_file_is_not_found(files: FileOps) -> None:
    with pytest.raises(RockletError) as e:
        files.read("nope.txt")
    assert e.value.kind == "not_found"
    with pytest.raises(RockletError) as e:
        files.download("nope")
    assert e.value.kind == "not_found"


def test_read_cap_is_the_documented_4_mib_and_larger_limits_are_refused(files: FileOps, workdir: Path) -> None:
    """ReadFile returns up to 4 MiB when asked, as the contract says; a larger limit is an error, not a clamp."""
    (workdir / "big").write_bytes(b"x" * (5 << 20))
    data, size, eof = files.read("big", 0, 4 << 20)
    assert (len(data), size, eof) == (4 << 20, 5 << 20, False)
    data, _, _ = files.read("big")  # 0: 4 MiB - 1 KiB, so the reply fits a default 4 MiB client
    assert len(data) == (4 << 20) - 1024
    data, _, eof = files.read("big", 4 << 20, 4 << 20)
    assert len(data) == 1 << 20 and eof
    with pytest.raises(RockletError) as e:
        files.read("big", 0, (4 << 20) + 1)
    assert (e.value.kind, e.value.field) == ("invalid", "limit")
