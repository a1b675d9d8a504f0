"""Runs DeepSpeed engine steps in its own process(es) for test_roll_deepspeed_engine.py.

Usage: ``python -m torch.distributed.run --nproc_per_node 2 roll_ds_check.py MODEL_DIR OUT.json STAGE``
or plain ``python roll_ds_check.py ...`` for one rank. Each rank trains on different data, then
writes a fingerprint of its full parameters, its losses and (rank 0, single process) a comparison
with the torch reference engine.
"""

from __future__ import annotations

import json
import os
import sys

import torch


def main(model_dir: str, out: str, stage: int) -> None:
    import torch.distributed as dist
    from ale_roll.engines.deepspeed_engine import DeepSpeedConfig, DeepSpeedTrainEngine
    from ale_roll.engines.torch_engine import OptimConfig, TorchTrainEngine
    from ale_roll.engines.weight_sync import fingerprint
    from ale_roll.models import load_model

    optim = OptimConfig(lr=1e-2)
    precision = os.environ.get("ALE_TEST_PRECISION", "fp32")  # bf16 on GPU (scripts/gpu_checks.sh)
    engine = DeepSpeedTrainEngine(
        load_model(model_dir)[0],
        DeepSpeedConfig(zero_stage=stage, optim=optim, precision=precision,  # type: ignore[arg-type]
                        partition_single_rank=os.environ.get("ALE_TEST_PARTITION") == "1"),
    )
    rank, world = engine.rank, engine.world_size
    g = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    ids = torch.randint(3, 400, (2, 16), generator=g)
    mask = torch.ones_like(ids)
    before = fingerprint(engine.export_weights())
    initial_lp = engine.forward_logprobs(ids)

    def loss_fn(lp, m):
        return -(lp * m).sum() / m.sum()

    losses, norms = [], []
    for _ in range(4):
        losses.append(engine.backward(ids, mask, loss_fn=loss_fn))
        norms.append(engine.step())
    weights = engine.export_weights()
    result = {
        "rank": rank, "world": world, "stage": stage, "losses": losses, "norms": norms,
        "before": before, "after": fingerprint(weights), "version": engine.policy_version,
        "running_stage": engine.zero_stage, "deepspeed_stage": engine.engine.zero_optimization_stage(),
    }
    if world == 1 and precision == "fp32":
        # The torch reference on the same init and data: same logprobs before, close weights after.
        ref = TorchTrainEngine(load_model(model_dir)[0], optim)
        result["initial_lp_diff"] = float((ref.forward_logprobs(ids) - initial_lp).abs().max())
        for _ in range(4):
            ref.backward(ids, mask, loss_fn=loss_fn)
            ref.step()
        own = ref.export_weights()
        result["param_diff_vs_torch"] = max(float((weights[k] - own[k]).abs().max()) for k in weights)
        ckpt = os.path.join(os.path.dirname(out), f"ckpt-{stage}")
        engine.save_checkpoint(ckpt)
        engine.backward(ids, mask, loss_fn=loss_fn)
        engine.step()
        engine.load_checkpoint(ckpt)
        result["resumed_version"] = engine.policy_version
        result["resumed_same"] = fingerprint(engine.export_weights()) == result["after"]
        # The Protocol's optimizer knobs act like the torch engine's: a new lr and fresh moments on
        # both give the same next step (from the same weights, up to the 4 steps' drift).
        for e in (engine, ref):
            e.set_lr(3e-3)
            e.reset_optimizer()
            e.backward(ids, mask, loss_fn=loss_fn)
            e.step()
        result["lr_after_set"] = engine.get_lr()
        weights, own = engine.export_weights(), ref.export_weights()
        result["reset_diff_vs_torch"] = max(float((weights[k] - own[k]).abs().max()) for k in weights)
        saved = os.path.join(os.path.dirname(out), f"model-{stage}")
        engine.save_model(saved, load_model(model_dir)[1])
        loaded = load_model(saved)[0].state_dict()  # (ZeRO-3's export names a tied head once)
        result["saved_same"] = all(torch.equal(loaded[k], v) for k, v in weights.items())
    gathered: list = [None] * world
    dist.all_gather_object(gathered, result)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(gathered, f)
    engine.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
