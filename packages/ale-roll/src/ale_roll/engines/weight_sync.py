"""Move the train engine's weights into inference engines, and prove they arrived.

Three transports, one verification:
- ``InProcessTransport``: colocated engines get the tensors themselves (no copy until load).
- ``SharedMemoryTransport``: one safetensors file in ``/dev/shm`` (tmpfs), read by the inference
  engine's own process — the path for an engine in a separate process (e.g. vLLM's engine core).
- ``DiskTransport``: the same file on a real disk; the fallback when no shared memory is mounted.

Every push is verified twice: the engine returns a fingerprint (CRC per tensor, folded with names,
dtypes and shapes) of exactly what it received, which must equal the sender's; and an optional probe
compares the engine's greedy-decode logprobs with the train engine's on the same tokens. Either check
failing raises :class:`WeightSyncError`, so a silent failure cannot pass for staleness.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
import zlib
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from ale_roll.engines.base import InferenceEngine, SamplingParams, TrainEngine, WeightSource, WeightSyncError


def fingerprint(tensors: Mapping[str, torch.Tensor]) -> str:
    """Order-independent digest of names, dtypes, shapes and exact bytes (CRC32 per tensor)."""
    names = sorted(tensors)
    flat = [_cpu(tensors[name]) for name in names]
    raws = [t.contiguous().reshape(-1).view(torch.uint8).numpy() for t in flat]
    h = hashlib.sha256()
    for name, t, crc in zip(names, flat, _crc32s(raws), strict=True):
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|{crc:08x}\n".encode())
    return h.hexdigest()[:32]


_PARALLEL_CRC_BYTES = 32 * 2**20
"""Above this many bytes the CRCs run on a thread per core (zlib releases the GIL on large
buffers): both ends fingerprint every sync, and one CRC32 pass over a 135M-parameter fp32 model
took 0.27 s — two of them were most of an in-process sync's 0.5 s on a quiet 2-core machine."""


def _crc32s(raws: Sequence[Any]) -> list[int]:
    if sum(r.nbytes for r in raws) < _PARALLEL_CRC_BYTES or (os.cpu_count() or 1) < 2:
        return [zlib.crc32(r.data) for r in raws]
    # Largest first, so one big tensor (the embedding) does not start last and run alone.
    order = sorted(range(len(raws)), key=lambda i: -raws[i].nbytes)
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1), thread_name_prefix="crc") as pool:
        done = dict(zip(order, pool.map(lambda i: zlib.crc32(raws[i].data), order), strict=True))
    return [done[i] for i in range(len(raws))]


def _cpu(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    return t.cpu() if t.device.type != "cpu" else t


def dedupe_tied(tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Drop tensors that alias an earlier one (tied embeddings): safetensors refuses shared storage
    and receivers re-tie them anyway."""
    seen: set[tuple[int, tuple[int, ...]]] = set()
    out: dict[str, torch.Tensor] = {}
    for name, t in tensors.items():
        key = (t.data_ptr(), tuple(t.shape))
        if key in seen:
            continue
        seen.add(key)
        out[name] = t
    return out


def read_weight_source(source: WeightSource) -> dict[str, torch.Tensor]:
    """Named tensors from a mapping or a safetensors file (how receivers read a push)."""
    if isinstance(source, Mapping):
        return dict(source)
    from safetensors.torch import load_file

    return load_file(os.fspath(source))


class WeightTransport(Protocol):
    """Turns named tensors into something an engine's ``update_weights`` accepts."""

    def send(self, tensors: Mapping[str, torch.Tensor], version: int) -> WeightSource: ...

    def release(self, source: WeightSource) -> None: ...


class InProcessTransport:
    """Hands the tensors over directly: for engines in the trainer's process."""

    def send(self, tensors: Mapping[str, torch.Tensor], version: int) -> WeightSource:
        return tensors

    def release(self, source: WeightSource) -> None:
        return None


class DiskTransport:
    """Writes one safetensors file per push under ``directory``; any process can read it."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self._owned = directory is None
        self.directory = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="ale-roll-weights-"))
        self.directory.mkdir(parents=True, exist_ok=True)

    def close(self) -> None:
        """Remove the directory if this transport created it (pushes release their files)."""
        if self._owned:
            shutil.rmtree(self.directory, ignore_errors=True)

    def send(self, tensors: Mapping[str, torch.Tensor], version: int) -> WeightSource:
        from safetensors.torch import save_file

        path = self.directory / f"weights-v{version}-{os.getpid()}.safetensors"
        tmp = path.with_suffix(".tmp")
        save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, os.fspath(tmp))
        os.replace(tmp, path)  # readers never see a half-written file
        return str(path)

    def release(self, source: WeightSource) -> None:
        if isinstance(source, str | os.PathLike):
            Path(source).unlink(missing_ok=True)


class SharedMemoryTransport(DiskTransport):
    """:class:`DiskTransport` on tmpfs (``/dev/shm``): memory-speed, readable by other processes."""

    def __init__(self, directory: str | Path | None = None) -> None:
        owned = directory is None
        if directory is None:
            if not Path("/dev/shm").is_dir():
                raise FileNotFoundError("/dev/shm is not mounted; use DiskTransport")
            directory = tempfile.mkdtemp(prefix="ale-roll-weights-", dir="/dev/shm")
        super().__init__(directory)
        self._owned = owned


@dataclass(frozen=True)
class ProbeCheck:
    """Greedy-decode a probe prompt on the inference engine and compare its logprobs with the train
    engine's on the same tokens. Catches weights that arrived but were not applied."""

    train_engine: TrainEngine
    prompt: tuple[int, ...]
    max_tokens: int = 8
    tolerance: float = 1e-2
    """Max allowed |train - inference| logprob on any probe token."""

    def run(self, engine: InferenceEngine) -> float:
        gen = engine.generate([list(self.prompt)], SamplingParams(max_tokens=self.max_tokens, temperature=0.0))[0]
        if not gen.token_ids:
            return 0.0
        ids = torch.tensor([list(self.prompt) + gen.token_ids])
        ref = self.train_engine.forward_logprobs(ids)[0, len(self.prompt):].cpu()
        diff = float((ref - torch.tensor(gen.logprobs)).abs().max())
        if not diff <= self.tolerance:  # also catches NaN
            raise WeightSyncError(
                f"probe logprobs differ by {diff:.3g} (> {self.tolerance}) after the sync: weights not applied"
            )
        return diff


@dataclass(frozen=True)
class SyncReport:
    """What one push cost and what it verified."""

    version: int
    seconds: float
    """Export-to-loaded time for all engines, fingerprints included, probe excluded."""
    probe_seconds: float
    bytes: int
    fingerprint: str
    probe_max_diff: float | None


class WeightSync:
    """Pushes named tensors to a set of inference engines through one transport, verified."""

    def __init__(
        self,
        engines: Sequence[InferenceEngine],
        transport: WeightTransport | None = None,
        probe: ProbeCheck | None = None,
    ) -> None:
        self.engines = list(engines)
        self.transport = transport or InProcessTransport()
        self.probe = probe

    def push(self, tensors: Mapping[str, torch.Tensor], version: int) -> SyncReport:
        t0 = time.perf_counter()
        tensors = dedupe_tied(tensors)
        sent = fingerprint(tensors)
        source = self.transport.send(tensors, version)
        try:
            for engine in self.engines:
                got = engine.update_weights(source, version)
                if got.fingerprint != sent or got.version != version:
                    raise WeightSyncError(
                        f"{type(engine).__name__} received fingerprint {got.fingerprint} v{got.version}, "
                        f"sent {sent} v{version}"
                    )
        finally:
            self.transport.release(source)
        seconds = time.perf_counter() - t0
        t1 = time.perf_counter()
        diff = max((self.probe.run(e) for e in self.engines), default=0.0) if self.probe else None
        return SyncReport(
            version=version,
            seconds=seconds,
            probe_seconds=time.perf_counter() - t1,
            bytes=sum(t.numel() * t.element_size() for t in tensors.values()),
            fingerprint=sent,
            probe_max_diff=diff,
        )
