"""Configuration of `ale up`: one YAML file plus dotted overrides, validated with clear errors."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from ale_proto.config import ConfigError as ConfigError  # re-exported: `ale up` catches it from here
from ale_proto.config import load_config as _load
from pydantic import BaseModel, ConfigDict, Field, model_validator


class ServicesConfig(BaseModel):
    """Which services `ale up` starts and how long it waits for them."""

    model_config = ConfigDict(extra="forbid")

    health_timeout_s: float = Field(default=90.0, gt=0)
    """Seconds to wait for each service to report SERVING."""
    worker_pool_size: int = Field(default=2, ge=0, le=64)
    """Pre-started sandboxes the worker keeps warm."""
    max_sandboxes: int = Field(default=64, ge=1)
    """Sandboxes the worker holds at once."""


class SmokeConfig(BaseModel):
    """The stack check run before the job: a sandbox round trip through the real services."""

    model_config = ConfigDict(extra="forbid")

    sandboxes: int = Field(default=4, ge=0, le=256)
    """Sandboxes created, exercised and deleted."""


AGENT_NATIVE_DEMOS = 480
"""Teacher episodes of the agent-native job unless `job.synthesis.episodes` says otherwise."""


class SynthesisConfig(BaseModel):
    """The teacher's episodes in sandboxes (the SFT data, before filtering)."""

    model_config = ConfigDict(extra="forbid")

    episodes: int = Field(default=240, ge=1, le=100_000)
    """Teacher episodes, one per training start state (seeds from `first_seed`). Unset in
    agent-native mode: 480 (with 240 agent-format demos SFT reached 0.11 held-out and RL had
    too little signal; with 960 SFT alone reached 0.997, leaving RL nothing to show)."""
    first_seed: int = Field(default=100_000, ge=0, lt=1_000_000)
    """Seed of the first synthesis episode (a training seed: below the held-out range)."""
    concurrency: int = Field(default=4, ge=1, le=64)
    """Sandboxes used at once."""
    max_turns: int = Field(default=5, ge=1)
    """Guesses per lock (the environment's max_turns)."""
    noise: dict[str, float] = Field(default_factory=dict)
    """Teacher mistake probabilities (`ale.job.teacher.TeacherNoise` fields)."""


class JobConfig(BaseModel):
    """The default job: synthesize → filter → SFT → RL → evaluate (`ale.job.pipeline`)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Run the job after the stack check (false: bring the stack up and check it only)."""
    mode: Literal["gem", "agent_native"] = "agent_native"
    """`agent_native` (the default): the lock as a terminal task in Harbor layout, played by ale-flow's
    agent loop with its shell tool in a fresh sandbox per episode and its model calls through the
    ModelProxy, in synthesis, RL and the held-out evaluations alike (`ale/job/agent_roll.yaml`,
    `ale.job.agent_native`; ~15 minutes on 2 cores); `gem`: the trainer plays DigitLock as a text game
    through the EnvService (`ale/job/default_roll.yaml`; ~4-8 minutes)."""
    train_tasks: int = Field(default=512, ge=1, le=100_000)
    """Agent-native mode: training locks written for RL (start state k plays lock k mod this)."""
    seeds: list[int] = Field(default_factory=list, max_length=16)
    """Training seeds; each runs SFT + RL from the same initial model, and held-out success pools them
    (empty: [0, 1, 2] in GEM mode, [0] agent-native, where one seed takes ~13 minutes here)."""
    synthesis: SynthesisConfig = Field(default_factory=SynthesisConfig)
    """The teacher's episodes."""
    roll: dict[str, Any] = Field(default_factory=dict)
    """Overrides of the embedded ale-roll config (`ale/job/default_roll.yaml`), as a nested mapping."""
    roll_config: str | None = None
    """Another ale-roll YAML instead of the embedded one (e.g. examples/up/smollm2.yaml)."""
    compare_steps: int = Field(default=6, ge=0)
    """RL steps run in one process without services to measure `stack_vs_inprocess` (0 = skip)."""
    job_timeout_s: float = Field(default=5400.0, gt=0)
    """Limit of one training job on the TrainerService (a GEM seed takes ~3 min here; an agent-native
    seed of the embedded config ~13 min on 2 cores)."""


    @model_validator(mode="after")
    def _mode_defaults(self) -> JobConfig:
        agent = self.mode == "agent_native"
        if not self.seeds:
            self.seeds = [0] if agent else [0, 1, 2]
        if agent and "episodes" not in self.synthesis.model_fields_set:
            self.synthesis.episodes = AGENT_NATIVE_DEMOS
        return self


class UpConfig(BaseModel):
    """Everything `ale up` does."""

    model_config = ConfigDict(extra="forbid")

    services: ServicesConfig = Field(default_factory=ServicesConfig)
    """The services."""
    smoke: SmokeConfig = Field(default_factory=SmokeConfig)
    """The stack check."""
    job: JobConfig = Field(default_factory=JobConfig)
    """The default job."""


def load_config(path: Path | None, overrides: list[str]) -> UpConfig:
    """Read the YAML file (if any), apply `key=value` overrides, validate — the job's ale-roll config
    included, so a bad one fails here, before `ale up` makes a run directory or moves `runs/latest`.
    ConfigError names the file or override and the key (`ale_proto.config`, the loader every ALE
    command shares)."""
    cfg = _load(UpConfig, path, overrides)
    if cfg.job.enabled:
        check_roll_config(cfg.job)
    return cfg


def without_other_loss_config(base: Mapping[str, Any], roll: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` (an ale-roll config mapping) without its ``algorithm.config`` when ``roll`` picks
    another ``algorithm.loss``: that config belongs to the base's loss (IPA's ``gamma`` is unknown to
    REINFORCE), so ``job.roll.algorithm.loss=reinforce`` starts from REINFORCE's defaults instead of
    failing on IPA's keys. ``roll``'s own ``algorithm.config`` still merges on top."""
    algo, new = base.get("algorithm"), roll.get("algorithm")
    if not isinstance(algo, dict) or not isinstance(new, dict) or new.get("loss", algo.get("loss")) == algo.get("loss"):
        return dict(base)
    return {**base, "algorithm": {k: v for k, v in algo.items() if k != "config"}}


def check_roll_config(job: JobConfig) -> None:
    """Validate the job's ale-roll config (embedded default or `roll_config`, then `roll`) as the
    pipeline will build it; ConfigError names `job.roll` or the file that sets the bad key."""
    from importlib import resources

    import yaml
    from ale_proto.config import Layer, load_layers, read_mapping
    from ale_roll.config import RunConfig

    first: Layer
    if job.roll_config:
        first = (f"job.roll_config {job.roll_config}", read_mapping(job.roll_config))
        config_dir = Path(job.roll_config).resolve().parent
    else:
        name = embedded_roll_config(job.mode)
        text = resources.files("ale.job").joinpath(name).read_text()
        first, config_dir = (f"ale/job/{name}", yaml.safe_load(text)), Path(".")
    first = (first[0], without_other_loss_config(first[1], job.roll))
    layers: list[Layer] = [("defaults", {"config_dir": str(config_dir)}), first, ("job.roll", job.roll)]
    if job.mode == "agent_native":
        # What the pipeline fills in from the running stack (the tasks it writes, the Admin).
        # Resampling's experts default to the synthesis demos (`ale.job.agent_native`).
        layers.insert(1, ("the running stack", {"agent": {"tasks": ["<written at run time>"],
                                                          "sandbox_address": "127.0.0.1:0"},
                                                "algorithm": {"resampling": {"expert_data": "<demos>"}}}))
    load_layers(RunConfig, layers, default=first[0])


def embedded_roll_config(mode: str) -> str:
    """The embedded ale-roll config of a job mode (a file of the `ale.job` package)."""
    return "agent_roll.yaml" if mode == "agent_native" else "default_roll.yaml"
