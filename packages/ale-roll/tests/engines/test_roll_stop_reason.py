"""One StopReason in ale-roll: engines' Generations and trajectories' Turns carry the same enum, and
the InferenceService maps every reason an engine can give to the contract and back unchanged."""

from __future__ import annotations

from ale_roll.engines.base import Generation
from ale_roll.engines.inference_client import _REASONS
from ale_roll.engines.inference_server import _STOP
from ale_roll.types import StopReason, Turn


def test_generation_reasons_survive_the_wire_and_become_turn_reasons() -> None:
    for reason in (StopReason.STOP, StopReason.LENGTH, StopReason.ABORTED):
        assert _REASONS[_STOP[reason]] is reason
        gen = Generation("r", [1], [0.0], reason.value, 0)  # a plain string is coerced
        assert gen.stop_reason is reason
        assert Turn([0], gen.token_ids, gen.logprobs, stop_reason=gen.stop_reason).stop_reason is reason
