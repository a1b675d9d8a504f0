"""A tiny learning check: group-normalized policy gradients raise the reward of a toy policy.

The policy is a table of logits (context × position × token): for each of 4 contexts it must
emit a 3-token answer; the reward is the fraction of positions matching the context's target.
Each group is 8 rollouts of the same context (the "initial state"), as in GRPO.
"""

from __future__ import annotations

import pytest
import torch
from ale_roll.algorithms import LossInputs, get_loss

CONTEXTS, LENGTH, VOCAB, GROUP = 4, 3, 4, 8


def train(loss_name: str, config: dict[str, object], iterations: int = 60, seed: int = 0,
          updates_per_batch: int = 1) -> list[float]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: threading only adds contention on a shared 2-core box
    try:
        return _train(loss_name, config, iterations, seed, updates_per_batch)
    finally:
        torch.set_num_threads(threads)


def _train(loss_name: str, config: dict[str, object], iterations: int, seed: int, updates_per_batch: int) -> list[float]:
    gen = torch.Generator().manual_seed(seed)
    targets = torch.randint(0, VOCAB, (CONTEXTS, LENGTH), generator=gen)
    logits = torch.zeros(CONTEXTS, LENGTH, VOCAB, requires_grad=True)
    opt = torch.optim.Adam([logits], lr=0.1)
    spec = get_loss(loss_name)
    cfg = spec.make_config(config)
    contexts = torch.arange(CONTEXTS).repeat_interleave(GROUP)
    history = []
    for _ in range(iterations):
        logp_all = torch.log_softmax(logits[contexts], dim=-1)  # [B, LENGTH, VOCAB]
        with torch.no_grad():
            actions = torch.multinomial(logp_all.exp().view(-1, VOCAB), 1, generator=gen).view(-1, LENGTH)
        rewards = (actions == targets[contexts]).float().mean(dim=-1)
        old = logp_all.gather(-1, actions.unsqueeze(-1)).squeeze(-1).detach()
        for _ in range(updates_per_batch):  # later updates are off-policy: the IS ratio is not 1
            logprobs = torch.log_softmax(logits[contexts], dim=-1).gather(-1, actions.unsqueeze(-1)).squeeze(-1)
            inputs = LossInputs(
                logprobs=logprobs, mask=torch.ones_like(logprobs), rewards=rewards,
                old_logprobs=old, behaviour_logprobs=old,
                chunk_ids=torch.arange(LENGTH).expand_as(actions), group_ids=contexts,
            )
            out = spec(inputs, cfg)
            opt.zero_grad()
            out.loss.backward()
            opt.step()
        history.append(float(rewards.mean()))
    return history


@pytest.mark.parametrize(("name", "config", "updates"), [
    ("reinforce", {"advantage": {"group_norm": True}}, 1),
    # Two updates per batch make the second one off-policy, exercising ρ (Eq. 4/5/8).
    ("topr", {"advantage": {"group_norm": True}}, 2),
    ("ipa", {"advantage": {"group_norm": True}, "gamma": 0.95}, 2),
])
def test_group_normalized_policy_gradient_raises_reward(name: str, config: dict[str, object], updates: int) -> None:
    history = train(name, config, updates_per_batch=updates)
    start, end = sum(history[:5]) / 5, sum(history[-5:]) / 5
    assert start < 0.5  # untrained: ~1/VOCAB of positions right
    assert end > 0.85 and end > start + 0.4, (start, end)

