"""Losses by name, all with the signature `fn(LossInputs, config) -> LossOutput`.

    spec = get_loss("ipa")
    out = spec(inputs, {"gamma": 0.9})        # dict, config instance, or None for defaults
    out.loss.backward(); log(out.metrics)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ale_roll.algorithms.base import LossInputs, LossOutput
from ale_roll.algorithms.ipa import IPAConfig, ipa_loss
from ale_roll.algorithms.reinforce import ReinforceConfig, reinforce_loss
from ale_roll.algorithms.sft import SFTConfig, sft_loss
from ale_roll.algorithms.tis import TISConfig, tis_loss
from ale_roll.algorithms.topr import TOPRConfig, topr_loss


@dataclass(frozen=True)
class LossSpec:
    """A registered loss: its function and its config class."""

    name: str
    fn: Callable[[Any, Any], LossOutput]
    config_cls: type[BaseModel]

    def make_config(self, config: BaseModel | dict[str, Any] | None = None) -> BaseModel:
        """Validate a dict (or None → defaults) into this loss's config; pass instances through."""
        if config is None:
            return self.config_cls()
        if isinstance(config, dict):
            return self.config_cls.model_validate(config)
        if not isinstance(config, self.config_cls):
            raise TypeError(f"loss {self.name!r} needs a {self.config_cls.__name__}, got {type(config).__name__}")
        return config

    def __call__(self, inputs: LossInputs, config: BaseModel | dict[str, Any] | None = None) -> LossOutput:
        return self.fn(inputs, self.make_config(config))


LOSSES: dict[str, LossSpec] = {
    spec.name: spec
    for spec in (
        LossSpec("reinforce", reinforce_loss, ReinforceConfig),
        LossSpec("tis", tis_loss, TISConfig),
        LossSpec("topr", topr_loss, TOPRConfig),
        LossSpec("ipa", ipa_loss, IPAConfig),
        LossSpec("sft", sft_loss, SFTConfig),
    )
}


def get_loss(name: str) -> LossSpec:
    """The registered loss called `name`; the error lists the known names."""
    try:
        return LOSSES[name]
    except KeyError:
        raise KeyError(f"unknown loss {name!r}; known: {', '.join(sorted(LOSSES))}") from None
