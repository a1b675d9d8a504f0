"""File transfer into a real sandbox: a 200 MB file and a directory, checksummed both ways."""

from __future__ import annotations

import hashlib
import io
import tarfile

import pytest
from ale_proto.v1 import rocklet_pb2, sandbox_pb2
from ale_rock.backends.base import Limits

MiB = 1 << 20


def _chunks(total: int):
    block = hashlib.sha256(b"seed").digest() * (MiB // 32)
    for i in range(total // MiB):
        yield block[i % 7 :] + block[: i % 7]


@pytest.mark.slow
def test_200mb_file_round_trip(make_box) -> None:
    box = make_box(limits=Limits(disk_bytes=512 * MiB, memory_bytes=1024 * MiB))
    size = 200 * MiB
    digest = hashlib.sha256()
    for c in _chunks(size):
        digest.update(c)
    expected = digest.hexdigest()

    def parts():
        yield rocklet_pb2.RockletServiceUploadFileRequest(
            header=sandbox_pb2.UploadHeader(path="/workspace/big.bin", size=size, sha256=expected)
        )
        for c in _chunks(size):
            yield rocklet_pb2.RockletServiceUploadFileRequest(chunk=c)

    resp = box.stub.UploadFile(parts(), timeout=300)
    assert (resp.size, resp.sha256) == (size, expected)
    assert box.sh("sha256sum /workspace/big.bin").stdout.split()[0].decode() == expected
    got = hashlib.sha256()
    n = 0
    last = None
    for msg in box.stub.DownloadFile(
        rocklet_pb2.RockletServiceDownloadFileRequest(path="/workspace/big.bin", chunk_size=4 * MiB),
        timeout=300,
    ):
        if msg.HasField("chunk"):
            got.update(msg.chunk)
            n += len(msg.chunk)
        last = msg
    assert n == size and got.hexdigest() == expected and last is not None and last.sha256 == expected


def test_directory_round_trip(make_box) -> None:
    box = make_box()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in {"proj/a.txt": b"A", "proj/sub/b.txt": b"B" * 1000}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    archive = buf.getvalue()
    header = sandbox_pb2.UploadHeader(path="dest", is_tar=True, sha256=hashlib.sha256(archive).hexdigest())
    box.stub.UploadFile(
        iter(
            [
                rocklet_pb2.RockletServiceUploadFileRequest(header=header),
                rocklet_pb2.RockletServiceUploadFileRequest(chunk=archive),
            ]
        )
    )
    assert box.sh("cat dest/proj/a.txt; wc -c < dest/proj/sub/b.txt").stdout == b"A1000\n"
    msgs = list(box.stub.DownloadFile(rocklet_pb2.RockletServiceDownloadFileRequest(path="dest")))
    assert msgs[0].info.is_dir
    data = b"".join(m.chunk for m in msgs)
    assert hashlib.sha256(data).hexdigest() == msgs[-1].sha256
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        assert tar.extractfile("proj/sub/b.txt").read() == b"B" * 1000  # type: ignore[union-attr]
    listing = box.stub.ListFiles(rocklet_pb2.RockletServiceListFilesRequest(path="dest", recursive=True))
    assert [f.path for f in listing.files] == [
        "/workspace/dest/proj",
        "/workspace/dest/proj/a.txt",
        "/workspace/dest/proj/sub",
        "/workspace/dest/proj/sub/b.txt",
    ]
