"""Fingerprints and transports of the weight sync (engine-independent parts)."""

from __future__ import annotations

import os

import torch
from ale_roll.engines.weight_sync import (
    DiskTransport,
    SharedMemoryTransport,
    dedupe_tied,
    fingerprint,
    read_weight_source,
)


def _tensors() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {"a.weight": torch.randn(4, 8, generator=g), "b.bias": torch.randn(8, generator=g),
            "c": torch.randn(3, generator=g).to(torch.bfloat16)}


def test_fingerprint_sees_every_change():
    base = _tensors()
    fp = fingerprint(base)
    assert fp == fingerprint(dict(reversed(list(base.items()))))  # order-independent
    flipped = {k: v.clone() for k, v in base.items()}
    flipped["a.weight"].view(torch.int32)[1, 2] ^= 1  # one bit
    assert fingerprint(flipped) != fp
    renamed = {("x" if k == "c" else k): v for k, v in base.items()}
    assert fingerprint(renamed) != fp
    reshaped = dict(base, **{"a.weight": base["a.weight"].reshape(8, 4)})
    assert fingerprint(reshaped) != fp
    assert fingerprint(dict(base, c=base["c"].float())) != fp


def test_a_large_fingerprint_is_the_serial_one_and_sees_a_bit_in_any_tensor(monkeypatch):
    """Past 32 MiB the CRCs run on threads: same digest as one thread, and a flipped bit in the
    smallest or the largest tensor still shows."""
    from ale_roll.engines import weight_sync

    big = {f"layer{i}.weight": torch.randn(512, 1024 + i, generator=torch.Generator().manual_seed(i)) for i in range(20)}
    big["embed"], big["bias"] = torch.randn(4096, 1024), torch.randn(7)
    assert sum(t.numel() * 4 for t in big.values()) > weight_sync._PARALLEL_CRC_BYTES
    parallel = fingerprint(big)
    monkeypatch.setattr(weight_sync, "_PARALLEL_CRC_BYTES", 2**62)
    assert fingerprint(big) == parallel
    monkeypatch.undo()
    for name in ("bias", "embed"):
        flipped = dict(big, **{name: big[name].clone()})
        flipped[name].view(torch.int32).view(-1)[-1] ^= 1
        assert fingerprint(flipped) != parallel, name


def test_dedupe_keeps_one_of_tied_tensors():
    emb = torch.randn(10, 4)
    out = dedupe_tied({"embed.weight": emb, "lm_head.weight": emb, "other": emb[:2].clone()})
    assert list(out) == ["embed.weight", "other"]


def test_file_transports_round_trip_and_clean_up(tmp_path):
    tensors = _tensors()
    for transport in (DiskTransport(tmp_path), SharedMemoryTransport()):
        src = transport.send(tensors, 7)
        assert os.path.exists(src)
        got = read_weight_source(src)
        assert fingerprint(got) == fingerprint(tensors)
        transport.release(src)
        assert not os.path.exists(src)
        transport.close()
    assert tmp_path.exists()  # a directory the caller passed in is theirs to keep
    shm = SharedMemoryTransport()
    assert str(shm.directory).startswith("/dev/shm")
    shm.close()
    assert not shm.directory.exists()
