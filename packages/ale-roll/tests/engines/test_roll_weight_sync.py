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
