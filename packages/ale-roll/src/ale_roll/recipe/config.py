"""The recipe's YAML: a whole `RunConfig` (model, env, rollout, the RL loss, eval) plus a `recipe:`
section naming the data and the three supervised stages that come before RL.

    ale-roll recipe -c examples/rome_recipe.yaml recipe.sft2.steps=40
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ale_roll.config import RunConfig


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StageConfig(_Section):
    """One supervised stage (CPT or an SFT stage)."""

    steps: int = Field(default=0, ge=0)
    """Optimizer steps (0 = the stage is skipped, its model is the previous one)."""
    lr: float = Field(default=3e-3, gt=0)
    """Learning rate of the stage (the optimizer's moments start fresh at every stage)."""
    batch_size: int = Field(default=8, ge=1)
    """Sequences per step."""
    checkpoint_every: int = Field(default=10, ge=1)
    """Steps between the stage's checkpoints (resume restarts from the latest)."""


class GenerateConfig(_Section):
    """Synthetic trajectories for GuessTheNumber-style games (higher/lower feedback): a noisy
    binary-search expert, replayed through `env` so turns carry the env's own error flags."""

    episodes: int = Field(default=200, ge=1)
    """Episodes generated (training seeds `seed_start` + k, never the held-out `env.eval_seed`s)."""
    seed_start: int = 100_000
    """Env seed of the first generated episode."""
    invalid_p: float = Field(default=0.15, ge=0, le=1)
    """Per-turn chance of an invalid action (the env flags it: error mask m_err = 0)."""
    redundant_p: float = Field(default=0.15, ge=0, le=1)
    """Per-turn chance of a guess the feedback already ruled out (task mask m_task = 0)."""
    invalid_action: str = "start"
    """Text of the invalid action (a word the tokenizer knows that is not a number)."""


class RecipeDataConfig(_Section):
    """Where the stages' data comes from: files, or generated into `<output_dir>/data/`."""

    broad: str | None = None
    """JSONL of trajectories (or {"seed", "actions"} demos) for SFT stage 1, relative to the config."""
    high_quality: str | None = None
    """JSONL for SFT stage 2 (unset = the successful trajectories of `broad`)."""
    cpt: str | None = None
    """JSONL of trajectories or {"text": ...} lines for CPT (unset = the full token streams of `broad`)."""
    generate: GenerateConfig | None = None
    """Generate `broad` instead of reading it (GuessTheNumber-style envs)."""

    @model_validator(mode="after")
    def _one_source(self) -> RecipeDataConfig:
        if (self.broad is None) == (self.generate is None):
            raise ValueError("set exactly one of recipe.data.broad and recipe.data.generate")
        return self


class RecipeSection(_Section):
    """ROME's recipe: CPT → SFT stage 1 (broad) → SFT stage 2 (high quality, error × task masks) →
    IPA RL (the run config's `algorithm`, `iterations`) → evaluation."""

    data: RecipeDataConfig
    """The stages' data."""
    cpt: StageConfig = Field(default_factory=lambda: StageConfig(steps=0))
    """Continued pre-training: causal-LM loss on every token of trajectory text."""
    sft1: StageConfig = Field(default_factory=StageConfig)
    """SFT stage 1: every assistant token of the broad data (masks cleared)."""
    sft2: StageConfig = Field(default_factory=StageConfig)
    """SFT stage 2: the high-quality subset, loss only on turns with m_err · m_task = 1 (Eq. 1–2)."""
    eval_episodes: int | None = Field(default=None, ge=1)
    """Held-out episodes of the final evaluation (unset = `eval.episodes`)."""


class RecipeConfig(RunConfig):
    """A run config with a `recipe:` section (`iterations` are the RL stage's steps)."""

    recipe: RecipeSection
    """The stages before RL and their data."""


def load_recipe_config(path: str | Path, overrides: list[str] | None = None) -> RecipeConfig:
    """Read and validate a recipe YAML (the one loader, `ale_proto.config.load_config`)."""
    from ale_proto.config import load_config

    p = Path(path)
    return load_config(RecipeConfig, p, list(overrides or []), base={"config_dir": str(p.resolve().parent)})
