"""Every loss against hand-computed values (numbers worked out in the comments)."""

from __future__ import annotations

import math

import pytest
import torch
from ale_roll.algorithms import (
    LOSSES,
    AdvantageConfig,
    ChunkMismatchConfig,
    IPAConfig,
    LossInputs,
    ReinforceConfig,
    TISConfig,
    TOPRConfig,
    get_loss,
    group_normalize,
    shape_rewards,
    token_mismatch_mask,
)
from ale_roll.algorithms.ipa import chunk_geometric_ratio, chunk_mismatch_mask, chunk_returns
from ale_roll.algorithms.mismatch import TokenMismatchConfig, mismatch_metrics
from ale_roll.algorithms.sft import SFTConfig, sft_loss
from ale_roll.types import StopReason, Trajectory, Turn, flatten_trajectory
from pydantic import ValidationError


def leaf(values: object) -> torch.Tensor:
    """A float leaf tensor that records gradients (stands in for the trainer's logprobs)."""
    return torch.as_tensor(values, dtype=torch.float32).clone().requires_grad_(True)


def no_mismatch() -> TokenMismatchConfig:
    return TokenMismatchConfig(enabled=False)


# -- REINFORCE (Eq. 3) -------------------------------------------------------------------
def test_reinforce_token_mean_and_seq_mean() -> None:
    lp = leaf([[-1.0, -2.0, -3.0], [-0.5, -1.5, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    rewards = torch.tensor([1.0, -1.0])
    # token_mean: -(1*(-1-2) + (-1)*(-0.5)) / 3 = -(-3 + 0.5)/3 = 0.833333
    out = get_loss("reinforce")(LossInputs(lp, mask, rewards), None)
    assert out.loss.item() == pytest.approx(2.5 / 3, abs=1e-6)
    out.loss.backward()
    # d/dlp = -A_i * m / 3
    assert lp.grad is not None
    assert torch.allclose(lp.grad, torch.tensor([[-1 / 3, -1 / 3, 0.0], [1 / 3, 0.0, 0.0]]))
    # seq_mean: row0 mean(1, 2) = 1.5; row1 mean(-0.5) = -0.5 -> (1.5 - 0.5)/2 = 0.5
    cfg = ReinforceConfig(aggregation="seq_mean")
    assert get_loss("reinforce")(LossInputs(lp, mask, rewards), cfg).loss.item() == pytest.approx(0.5)


# -- advantages: group norm and failure reward -----------------------------------------
def test_group_normalization_and_failure_reward() -> None:
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    groups = torch.tensor([0, 0, 1, 1, 2, 2])
    # groups 0 and 1: mean 0.5, population std 0.5 -> ±1; group 2 all equal -> 0 (no signal)
    adv = group_normalize(rewards, groups, eps=0.0 + 1e-12)
    assert torch.allclose(adv, torch.tensor([1.0, -1.0, -1.0, 1.0, 0.0, 0.0]), atol=1e-6)
    # mean only: ±0.5
    assert torch.allclose(group_normalize(rewards, groups, std_norm=False), torch.tensor([0.5, -0.5, -0.5, 0.5, 0, 0]))
    # failure reward replaces R <= 0 before anything else
    shaped = shape_rewards(torch.tensor([1.0, 0.0]), None, AdvantageConfig(failure_reward=-1.0))
    assert shaped.tolist() == [1.0, -1.0]
    # failure reward then group norm over one group: [1, -1] -> mean 0, std 1 -> unchanged
    both = shape_rewards(torch.tensor([1.0, 0.0]), None, AdvantageConfig(failure_reward=-1.0, group_norm=True))
    assert torch.allclose(both, torch.tensor([1.0, -1.0]), atol=1e-5)


# -- token mismatch mask (Eq. 6) and metrics ---------------------------------------------
def test_token_mismatch_mask_and_metrics() -> None:
    old = torch.zeros(1, 3)
    beh = torch.tensor([[0.0, -0.5, 0.5]])
    # ratios pi_old/mu = [1, e^0.5 = 1.6487, e^-0.5 = 0.6065]
    assert token_mismatch_mask(old, beh, 0.8, 1.2).tolist() == [[1.0, 0.0, 0.0]]
    assert token_mismatch_mask(old, beh, 0.0, 1.2).tolist() == [[1.0, 0.0, 1.0]]  # exactly Eq. 6
    kept = token_mismatch_mask(old, beh, 0.8, 1.2)
    m = mismatch_metrics(old, beh, torch.ones(1, 3), kept)
    # k3 = r - 1 - log r: [0, 1.648721-1-0.5 = 0.148721, 0.606531-1+0.5 = 0.106531] -> mean 0.085084
    assert m["mismatch/kl"] == pytest.approx(0.085084, abs=1e-5)
    assert m["mismatch/ratio_mean"] == pytest.approx((1 + 1.648721 + 0.606531) / 3, abs=1e-5)
    assert m["mismatch/ratio_max"] == pytest.approx(1.648721, abs=1e-5)
    assert m["mismatch/masked_fraction"] == pytest.approx(2 / 3)


# -- TIS (Eq. 4) and TOPR (Eq. 5) --------------------------------------------------------
def _tis_inputs() -> LossInputs:
    # row0 (R=+1): new [-1,-2], old [-0.8,-1.6] -> log ratios [-0.2,-0.4], mean -0.3 -> rho0 = e^-0.3 = 0.740818
    # row1 (R=-1): new [-0.5], old [-0.1] -> log ratio -0.4 -> rho1 = e^-0.4 = 0.670320
    return LossInputs(
        logprobs=leaf([[-1.0, -2.0], [-0.5, 0.0]]),
        mask=torch.tensor([[1.0, 1.0], [1.0, 0.0]]),
        rewards=torch.tensor([1.0, -1.0]),
        old_logprobs=torch.tensor([[-0.8, -1.6], [-0.1, 0.0]]),
    )


def test_tis_geometric_mean_truncated() -> None:
    inputs = _tis_inputs()
    out = get_loss("tis")(inputs, TISConfig(mismatch=no_mismatch()))
    # -(0.740818*1*(-3) + 0.670320*(-1)*(-0.5)) / 3 = -(-2.222454 + 0.335160)/3 = 0.629098
    assert out.loss.item() == pytest.approx(0.629098, abs=1e-5)
    assert out.metrics["is/ratio_mean"] == pytest.approx((0.740818 + 0.670320) / 2, abs=1e-5)
    assert out.metrics["is/truncated_fraction"] == 0.0
    out.loss.backward()
    # the ratio is a stop-gradient coefficient: d/dlp = -clip(rho)*A/3
    assert inputs.logprobs.grad is not None
    assert torch.allclose(inputs.logprobs.grad, torch.tensor([[-0.740818 / 3, -0.740818 / 3], [0.670320 / 3, 0.0]]), atol=1e-5)


def test_tis_truncates_ratio_above_one() -> None:
    # rho = e^{+0.3} = 1.349859 -> clipped to 1: loss = -(1*1*(-3))/2 = 1.5
    inputs = LossInputs(leaf([[-1.0, -2.0]]), torch.ones(1, 2), torch.tensor([1.0]),
                        old_logprobs=torch.tensor([[-1.2, -2.4]]))
    out = get_loss("tis")(inputs, TISConfig(mismatch=no_mismatch()))
    assert out.loss.item() == pytest.approx(1.5)
    assert out.metrics["is/ratio_max"] == pytest.approx(math.exp(0.3), abs=1e-5)
    assert out.metrics["is/truncated_fraction"] == 1.0


def test_topr_truncates_only_non_positive() -> None:
    out = get_loss("topr")(_tis_inputs(), TOPRConfig(mismatch=no_mismatch()))
    # row0 positive -> weight 1: -(1*(-3) + 0.670320*0.5)/3 = (3 - 0.335160)/3 = 0.888280
    assert out.loss.item() == pytest.approx(0.888280, abs=1e-5)


def test_tis_mismatch_mask_drops_tokens_from_loss_and_ratio() -> None:
    lp = leaf([[-1.0, -2.0, -3.0]])
    # pi_old = new; mu at token 1 is e^-0.5 lower -> ratio e^0.5 > 1.2 -> masked
    inputs = LossInputs(lp, torch.ones(1, 3), torch.tensor([1.0]), behaviour_logprobs=torch.tensor([[-1.0, -2.5, -3.0]]))
    out = get_loss("tis")(inputs, None)
    # rho = 1 (new == old); loss = -(-1 - 3)/2 = 2
    assert out.loss.item() == pytest.approx(2.0)
    assert out.metrics["mismatch/masked_fraction"] == pytest.approx(1 / 3)
    out.loss.backward()
    assert lp.grad is not None and lp.grad[0, 1].item() == 0.0


# -- IPA (Eq. 7-9) -------------------------------------------------------------------
def test_chunk_returns_discount_toward_the_end() -> None:
    chunk_ids = torch.tensor([[-1, 0, 0, 0, 1, 1, 2]])
    # K = 3, gamma = 0.5: G_1 = 0.25, G_2 = 0.5, G_3 = 1 (times R = 2)
    g = chunk_returns(torch.tensor([2.0]), chunk_ids, 0.5)
    assert g.tolist() == [[0.0, 0.5, 0.5, 0.5, 1.0, 1.0, 2.0]]
    # a per-turn row holding only chunk 1 of a 3-chunk trajectory needs K passed explicitly
    g_row = chunk_returns(torch.tensor([1.0]), torch.tensor([[-1, 1]]), 0.5, torch.tensor([3]))
    assert g_row.tolist() == [[0.0, 0.5]]


def test_ipa_positive_trajectory() -> None:
    # prompt | chunk0: 2 tokens + 1 observation token | chunk1: 2 tokens | chunk2: 1 token
    lp = leaf([[0.0, -1.0, -1.0, -9.0, -2.0, -2.0, -0.5]])
    mask = torch.tensor([[0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0]])
    chunk_ids = torch.tensor([[-1, 0, 0, 0, 1, 1, 2]])
    out = get_loss("ipa")(LossInputs(lp, mask, torch.tensor([1.0]), chunk_ids=chunk_ids), IPAConfig(gamma=0.5))
    # -(0.25*(-2) + 0.5*(-4) + 1*(-0.5)) / 5 = 3/5
    assert out.loss.item() == pytest.approx(0.6)
    out.loss.backward()
    assert lp.grad is not None
    assert torch.allclose(lp.grad, torch.tensor([[0.0, -0.05, -0.05, 0.0, -0.1, -0.1, -0.2]]))


def test_ipa_negative_trajectory_uses_truncated_chunk_ratio() -> None:
    lp = leaf([[-1.0, -1.0, -2.0]])
    inputs = LossInputs(lp, torch.ones(1, 3), torch.tensor([-1.0]), old_logprobs=torch.tensor([[-0.8, -0.6, -2.2]]),
                        chunk_ids=torch.tensor([[0, 0, 1]]))
    # chunk0: log ratios [-0.2, -0.4] -> rho = e^-0.3 = 0.740818; chunk1: e^0.2 = 1.221403 -> clip 1
    rho = chunk_geometric_ratio(lp, inputs.old(), inputs.mask, inputs.chunk_ids)  # type: ignore[arg-type]
    assert torch.allclose(rho, torch.tensor([[0.740818, 0.740818, 1.221403]]), atol=1e-5)
    out = get_loss("ipa")(inputs, IPAConfig(gamma=0.5))
    # G0 = -0.5, G1 = -1: -(0.740818*(-0.5)*(-2) + 1*(-1)*(-2))/3 = -(0.740818 + 2)/3 = -0.913606
    assert out.loss.item() == pytest.approx(-0.913606, abs=1e-5)


def test_chunk_mismatch_uses_the_chunk_geometric_mean() -> None:
    old = torch.zeros(1, 4)
    # chunk0 token ratios e^1.2, e^0.2 -> geometric mean e^0.7 = 2.0138 > 2 -> dropped
    # chunk1 token ratios e^0.9, e^-0.5 -> e^0.2 = 1.2214 -> kept (a token mask would drop both tokens)
    beh = torch.tensor([[-1.2, -0.2, -0.9, 0.5]])
    chunk_ids = torch.tensor([[0, 0, 1, 1]])
    assert chunk_mismatch_mask(old, beh, torch.ones(1, 4), chunk_ids, 0.5, 2.0).tolist() == [[0.0, 0.0, 1.0, 1.0]]
    lp = leaf([[-1.0, -1.0, -3.0, -1.0]])
    out = get_loss("ipa")(LossInputs(lp, torch.ones(1, 4), torch.tensor([1.0]), old_logprobs=old + lp.detach(),
                                     behaviour_logprobs=beh + lp.detach(), chunk_ids=chunk_ids), IPAConfig(gamma=0.5))
    # only chunk1 (G = 1) counts: -(-3 - 1)/2 = 2
    assert out.loss.item() == pytest.approx(2.0)
    assert out.metrics["mismatch/chunk_masked_fraction"] == pytest.approx(0.5)


def test_ipa_on_a_flattened_agent_trajectory() -> None:
    call = StopReason.TOOL_CALL
    traj = Trajectory([
        Turn([1, 2, 3], [10, 11], [-0.1, -0.2], stop_reason=call, observation_ids=[20, 21]),
        Turn([], [12, 13, 14], [-0.3, -0.4, -0.5], stop_reason=call, observation_ids=[22]),
        Turn([], [15], [-0.6]),
    ], reward=1.0)
    flat = flatten_trajectory(traj)
    lp = leaf([[-1.0] * len(flat.input_ids)])
    inputs = LossInputs(lp, torch.tensor([flat.loss_mask], dtype=torch.float32), torch.tensor([1.0]),
                        chunk_ids=torch.tensor([flat.chunk_ids]))
    out = get_loss("ipa")(inputs, IPAConfig(gamma=0.5))
    # chunks with 2, 3, 1 loss tokens, G = 0.25, 0.5, 1: -(0.25*-2 + 0.5*-3 + 1*-1)/6 = 3/6
    assert out.loss.item() == pytest.approx(0.5)


# -- masked SFT (Eq. 1-2) ------------------------------------------------------------
def test_sft_normalizes_by_unmasked_tokens() -> None:
    lp = leaf([[-1.0, -2.0, -3.0, -4.0]])
    out = sft_loss(LossInputs(lp, torch.tensor([[0.0, 1.0, 0.0, 1.0]]), torch.zeros(1)), SFTConfig())
    assert out.loss.item() == pytest.approx(3.0)  # (2 + 4) / 2
    assert out.metrics["tokens"] == 2.0


def test_sft_ignores_masked_turns_logits() -> None:
    torch.manual_seed(0)
    targets = torch.tensor([[3, 1, 4, 1, 5, 2]])
    mask = torch.tensor([[0.0, 1.0, 1.0, 0.0, 0.0, 1.0]])

    def loss_of(logits: torch.Tensor) -> torch.Tensor:
        lp = torch.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        return get_loss("sft")(LossInputs(lp, mask, torch.zeros(1)), None).loss

    logits = torch.randn(1, 6, 8, requires_grad=True)
    base = loss_of(logits)
    base.backward()
    assert logits.grad is not None
    assert logits.grad[0, mask[0] == 0].abs().sum() == 0  # no gradient into masked turns
    changed = logits.detach().clone()
    changed[0, mask[0] == 0] += 10 * torch.randn(3, 8)
    assert loss_of(changed).item() == pytest.approx(base.item(), abs=1e-6)
    changed[0, 1] += 10 * torch.randn(8)  # an unmasked token does change it
    assert loss_of(changed).item() != pytest.approx(base.item(), abs=1e-3)


# -- the registry and the common signature -------------------------------------------
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_gradients_flow_only_through_unmasked_tokens(name: str) -> None:
    torch.manual_seed(1)
    lp = leaf(-torch.rand(3, 6) - 0.1)
    mask = torch.tensor([[0, 1, 1, 0, 1, 0], [0, 0, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0]], dtype=torch.float32)
    inputs = LossInputs(lp, mask, torch.tensor([1.0, -1.0, 0.5]),
                        old_logprobs=lp.detach() + 0.05 * torch.randn(3, 6),
                        behaviour_logprobs=lp.detach() + 0.05 * torch.randn(3, 6),
                        chunk_ids=torch.tensor([[-1, 0, 0, 0, 1, 1], [-1, -1, 0, 0, 1, 1], [0, 0, 0, 0, 0, 0]]))
    out = get_loss(name)(inputs, None)
    assert out.loss.dim() == 0
    out.loss.backward()
    assert lp.grad is not None
    assert lp.grad[mask == 0].abs().sum() == 0
    assert lp.grad[mask == 1].abs().sum() > 0
    if name != "sft":
        for key in ("mismatch/kl", "mismatch/ratio_mean", "mismatch/ratio_max", "mismatch/masked_fraction"):
            assert key in out.metrics


def test_registry_validates_configs() -> None:
    assert set(LOSSES) == {"reinforce", "tis", "topr", "ipa", "sft"}
    with pytest.raises(KeyError, match="known: ipa, reinforce"):
        get_loss("ppo")
    with pytest.raises(ValidationError, match="gama"):
        get_loss("ipa").make_config({"gama": 0.9})
    with pytest.raises(TypeError, match="IPAConfig"):
        get_loss("ipa").make_config(TISConfig())
    assert get_loss("ipa").make_config({"gamma": 0.9}).gamma == 0.9  # type: ignore[attr-defined]
    assert IPAConfig().gamma == 0.95 and TISConfig().mismatch.low == 0.8 and TISConfig().mismatch.high == 1.2


@pytest.mark.parametrize("seed", range(3))
def test_special_cases_reduce_to_reinforce(seed: int) -> None:
    torch.manual_seed(seed)
    lp = -torch.rand(4, 7) - 0.1
    mask = (torch.rand(4, 7) > 0.3).float()
    chunk_ids = torch.tensor([[0, 0, 1, 1, 2, 2, 2]] * 4)
    rewards = torch.rand(4) + 0.1  # all positive
    reinforce = get_loss("reinforce")(LossInputs(leaf(lp), mask, rewards), None).loss.item()
    # on-policy (rho = 1) with no mismatch masking, TIS is REINFORCE
    tis = get_loss("tis")(LossInputs(leaf(lp), mask, rewards), TISConfig(mismatch=no_mismatch())).loss.item()
    # positive rewards never touch TOPR's truncated branch, even off-policy
    off = LossInputs(leaf(lp), mask, rewards, old_logprobs=lp + 0.3 * torch.randn(4, 7))
    topr = get_loss("topr")(off, TOPRConfig(mismatch=no_mismatch())).loss.item()
    # gamma = 1 gives every chunk the final reward
    ipa = get_loss("ipa")(LossInputs(leaf(lp), mask, rewards, chunk_ids=chunk_ids),
                          IPAConfig(gamma=1.0, chunk_mismatch=ChunkMismatchConfig(enabled=False))).loss.item()
    assert tis == pytest.approx(reinforce) and topr == pytest.approx(reinforce) and ipa == pytest.approx(reinforce)
