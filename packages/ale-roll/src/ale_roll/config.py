"""One YAML file → small nested pydantic configs, with dotted command-line overrides.

    cfg = load_config("examples/guess_number.yaml", ["rollout.batch_size=16", "iterations=5"])

Every section forbids unknown keys; `ConfigError` names the offending key (`rollout.batchsize`,
with a close-match suggestion), the expected type, and impossible resource splits. Override
values are parsed as YAML scalars (`16`, `true`, `[a, b]`) and then typed by the schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from ale_proto.config import ConfigError as ConfigError  # re-exported: callers catch it from here
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ale_roll.models.tiny import TinyModelConfig

FilterName = Literal["env_noise", "repeated_illegal", "truncated"]
_DEFAULT_FILTERS: tuple[FilterName, ...] = ("env_noise", "repeated_illegal", "truncated")


def _is_import_spec(env_id: str) -> bool:
    from ale_roll.user_tasks import is_import_spec

    return is_import_spec(env_id)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelConfig(_Section):
    """Which model to train: a local directory, or a tiny random-init model built at start."""

    path: str | None = None
    """Local model directory (safetensors or GGUF) or an installed package shipping one."""
    tiny: TinyModelConfig | None = None
    """Build a random-init model of this shape into `<output_dir>/init_model` (when `path` is unset)."""
    word_vocab: list[str] | None = None
    """With `tiny`: replace the BPE tokenizer by a word-level one over these words (one token per word; an entry with spaces or punctuation, such as a tool call's JSON frame, is one token too)."""
    word_unknown_runs: bool = False
    """With `word_vocab`: a run of text with no vocabulary word in it is one `[UNK]` (not one per word), so an agent's prose costs a tiny model a few positions."""
    dtype: Literal["float32", "bfloat16"] = "float32"
    """Parameter dtype (float32 on CPU)."""

    @model_validator(mode="after")
    def _one_source(self) -> ModelConfig:
        if (self.path is None) == (self.tiny is None):
            raise ValueError("set exactly one of model.path and model.tiny")
        if self.word_vocab is not None and self.tiny is None:
            raise ValueError("model.word_vocab needs model.tiny")
        return self


class EngineConfig(_Section):
    """Train and inference backends."""

    train: Literal["torch", "deepspeed"] = "torch"
    """TrainEngine backend."""
    zero_stage: Literal[0, 1, 2, 3] = 2
    """DeepSpeed ZeRO stage (engine.train=deepspeed). On a single rank, 1 and 2 run as stage 0:
    there is nothing to partition, and stage 2 there cost a quarter more per step on CPU."""
    zero_partition_single_rank: bool = False
    """Keep ZeRO stage 1/2 on a single rank instead of running stage 0 there."""
    inference: Literal["hf", "vllm"] = "hf"
    """InferenceEngine backend (in-process) when `inference_address` is unset."""
    inference_address: str | None = None
    """host:port of a remote InferenceService; generation then goes over gRPC."""
    device: str = "cpu"
    """Torch device of the in-process engines."""
    torch_threads: int = Field(default=0, ge=0)
    """torch intra-op threads (0 = torch's default); 1 avoids oversubscription when training and generation share a small CPU."""
    one_torch_thread: bool | None = None
    """Run all of this process's torch work (model load, generation, train steps, weight pushes,
    checkpoints) on one thread, so OpenMP keeps one team of `torch_threads` workers and a second
    thread speeds a step up instead of slowing it (see `ale_roll.engines.compute`). None: on when
    `device` is the CPU and torch uses more than one thread; off on a GPU, and with
    `torch_threads: 1`, where generation and training overlap on separate cores (async ratio > 0)."""


class RolloutConfig(_Section):
    """How episodes are collected."""

    batch_size: int = Field(default=32, ge=1)
    """Trajectories per training step (a multiple of group_size)."""
    group_size: int = Field(default=1, ge=1)
    """Rollouts per initial state (group normalization)."""
    max_turns: int = Field(default=5, ge=1)
    """Assistant turns per episode before it is truncated."""
    max_new_tokens: int = Field(default=32, ge=1)
    """Tokens generated per assistant turn."""
    temperature: float = Field(default=1.0, ge=0.0)
    """Sampling temperature (0 = greedy)."""
    episodes_in_flight: int = Field(default=32, ge=1)
    """N: episodes pipelined concurrently (worker slots)."""
    async_ratio: int = Field(default=1, ge=0)
    """η: max policy versions a trajectory may lag the trainer; 0 = synchronous training."""
    generate_timeout_s: float = Field(default=60.0, gt=0)
    """Limit of one generation call."""
    env_timeout_s: float = Field(default=60.0, gt=0)
    """Limit of one env reset/step call."""
    reward_timeout_s: float = Field(default=60.0, gt=0)
    """Limit of one reward computation."""
    max_attempts: int = Field(default=3, ge=1)
    """Rollouts of one initial state before it is given up (filtering + resampling)."""
    retry_backoff_s: float = Field(default=0.5, ge=0)
    """Wait before re-running an initial state whose episode failed (doubling per attempt; 0 = none)."""
    filters: list[FilterName] = Field(default_factory=lambda: list(_DEFAULT_FILTERS))
    """Trajectory filters; rejected episodes are resampled from the same initial state."""
    system_prompt: str = ""
    """Text placed before the first observation."""
    observation_template: str = "{observation}\n"
    """How an observation is written into the context; `{observation}` is replaced."""
    observation_rewrite: list[tuple[str, str]] = Field(default_factory=list)
    """(regex, replacement) pairs applied in order to every observation before the template (`re.sub`)."""
    env_threads: bool = True
    """Run env calls on threads with a timeout; false calls in-process envs inline (cheap games only)."""
    max_batch: int = Field(default=64, ge=1)
    """Largest generation micro-batch (in-process engines)."""
    batch_window_ms: float = Field(default=2.0, ge=0)
    """How long generation requests are gathered into one micro-batch."""
    reward_fn: str = "env"
    """`env` (sum of the environment's rewards) or `module:function` taking (trajectory, info) -> float, sync or async."""
    mode: Literal["gem", "agent_native"] = "gem"
    """`gem`: the trainer plays the environment (`env`); `agent_native`: an agent works on a task in a sandbox and the ModelProxy's records are the trajectory (`agent`)."""


class ResamplingConfig(_Section):
    """Chunk-level initialized resampling (Eq. 10; `algorithms/resampling.py`).

    For a state with an expert trajectory τ* (from `expert_data`), the trainer searches τ*'s crucial
    fork f (rollouts that prefill the first j expert chunks and sample the rest), then plays the
    state's whole group from the fork: the first f−1 expert chunks are prefilled (context, no loss)
    and the policy re-initializes chunks f..K in parallel. A group none of whose rollouts succeeds
    adds the imitation term λ_IL · L_IL on τ*'s chunks ≤ f to that step's gradient."""

    enabled: bool = False
    """Turn resampling on (needs `expert_data`; in agent-native mode, `agent.kind=flow`)."""
    expert_data: str | None = None
    """JSONL of expert trajectories or demos ({"seed", "actions"}), relative to the config; a state
    is resampled when an expert for its seed is there (other states play normally). Agent-native
    mode: trajectories of agent-native episodes (`ale up`'s `data/demos.jsonl`), matched by task;
    the agent replays an expert's recorded replies, their tool calls running in the fresh sandbox."""
    search: Literal["sequential", "parallel"] = "sequential"
    """Fork search: `sequential` rollback (prefix K−1 down to 0, the latest fork) or `parallel`
    initialization (random anchors at once, then refinement)."""
    rollouts_per_anchor: int = Field(default=4, ge=1)
    """Rollouts estimating the success rate p(j) of each evaluated prefix (they are not trained on)."""
    fork_gap: float = Field(default=0.5, gt=0.0, le=1.0)
    """Chunk f is a crucial fork when p(f) − p(f−1) ≥ this."""
    num_anchors: int = Field(default=4, ge=1)
    """`parallel` search: anchors of the first round."""
    gamma: float = Field(default=0.95, gt=0.0, le=1.0)
    """Chunk discount of the imitation term's weights G_k = γ^(K−k)."""
    lambda_il: float = Field(default=1.0, ge=0.0)
    """λ_IL: weight of the imitation term relative to the RL loss (λ_RL = 1)."""
    fraction: float = Field(default=1.0, ge=0.0, le=1.0)
    """Share of the states with an expert that are resampled (drawn per group, seeded by the run)."""

    @model_validator(mode="after")
    def _needs_expert(self) -> ResamplingConfig:
        if self.enabled and not self.expert_data:
            raise ValueError("algorithm.resampling.enabled needs algorithm.resampling.expert_data "
                             "(expert trajectories or demos to roll back along)")
        return self


class AlgorithmConfig(_Section):
    """The loss, by registry name, and its config."""

    loss: str = "reinforce"
    """Registered loss name: reinforce | tis | topr | ipa | sft."""
    config: dict[str, Any] = Field(default_factory=dict)
    """That loss's config (validated against its schema)."""
    epochs: int = Field(default=1, ge=1)
    """Passes over each rollout batch (PPO-style reuse); the batch's policy version bumps once."""
    minibatches: int = Field(default=1, ge=1)
    """Optimizer steps per pass, each on whole rollout groups (capped at the number of groups)."""
    resampling: ResamplingConfig = Field(default_factory=ResamplingConfig)
    """Chunk-level initialized resampling (Eq. 10): off unless `enabled`."""

    @model_validator(mode="after")
    def _known(self) -> AlgorithmConfig:
        from ale_roll.algorithms.registry import LOSSES

        if self.loss not in LOSSES:
            raise ValueError(f"unknown loss {self.loss!r}; known: {', '.join(sorted(LOSSES))}")
        LOSSES[self.loss].make_config(self.config)
        return self


class EnvConfig(_Section):
    """The environment episodes run in."""

    id: str = "game:GuessTheNumber-v0"
    """Environment id: registered in ale_rock.envs (`game:DigitLock-v0`), or `module:Class` — your own
    gem-style env class or factory (imported with the YAML's directory on the path; ale_roll.user_tasks)."""
    address: str | None = None
    """host:port of an EnvService; unset = in-process environments."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """Constructor kwargs of the environment."""
    seed: int = 0
    """Seed of initial state 0; state k uses seed + k."""
    eval_seed: int = 1_000_000
    """First seed of held-out evaluation states."""
    data: str | None = None
    """Single-turn RLVR instead of `id`: a JSONL of {"prompt": ..., other columns} (relative to the config); seed s plays row s mod len."""
    eval_data: str | None = None
    """With `data`: held-out rows for evaluation (unset = `data`'s rows)."""
    reward_fn: str | None = None
    """With `data`: `module:function` scoring completions as TRL's GRPOTrainer calls it, fn(prompts=[p], completions=[c], **{column: [v]}) -> [float]."""
    search_path: list[str] = Field(default_factory=list)
    """Directories searched for `module:` names (the YAML's directory is always added)."""

    @model_validator(mode="after")
    def _task_source(self) -> EnvConfig:
        if (self.data is None) != (self.reward_fn is None):
            raise ValueError("env.data and env.reward_fn go together (a JSONL of prompts and the function that scores them)")
        if self.data is not None and "id" in self.model_fields_set:
            raise ValueError("set env.id or env.data (+ env.reward_fn), not both")
        if self.eval_data is not None and self.data is None:
            raise ValueError("env.eval_data needs env.data")
        if self.address is not None and (self.data is not None or _is_import_spec(self.id)):
            raise ValueError("env.address (an EnvService) serves registered ids only; a module:Class or "
                             "env.data task runs in-process (unset env.address)")
        return self


class AgentConfig(_Section):
    """Agent-native rollout (rollout.mode=agent_native): tasks, the agent, its sandboxes and the ModelProxy."""

    tasks: list[str] = Field(default_factory=list)
    """Training tasks: ale-rock built-in task ids or directories holding task.yaml files (relative to the config); state with seed s runs task s mod len."""
    eval_tasks: list[str] = Field(default_factory=list)
    """Held-out tasks for evaluation (same forms; empty = the training tasks); eval episode i runs task i mod len."""
    kind: Literal["flow", "command"] = "flow"
    """`flow`: ale-flow's agent loop in the trainer's process, its tools in the sandbox; `command`: an unmodified agent run as a shell command inside the sandbox."""
    command: str = ""
    """With kind=command: the agent's command (it reads OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL and ALE_TASK_PROMPT)."""
    files: dict[str, str] = Field(default_factory=dict)
    """With kind=command: sandbox path (relative to its work dir) -> local file (relative to the config) uploaded before the command runs."""
    flow_settings: dict[str, Any] = Field(default_factory=dict)
    """With kind=flow: ale-flow Settings fields merged over the defaults (yolo mode, the shell tool, no model retries)."""
    sandbox_address: str | None = None
    """host:port of the ale-rock Admin that provides the sandboxes (required)."""
    sandbox_api_key: str = ""
    """API key of that Admin ("" = the SDK's default)."""
    sandbox_image: str = ""
    """Sandbox image ("" = the worker's default)."""
    allow: list[str] = Field(default_factory=list)
    """Egress hosts the sandboxes may reach (`model-proxy` for a command agent that calls the proxy from inside)."""
    proxy_address: str | None = None
    """host:port (gRPC) of a running ModelProxy; unset = one is started in the trainer's process."""
    proxy_public_url: str = ""
    """With an in-process proxy: the base URL handed to agents, as they reach it ("" = its own http://host:port)."""
    serve_host: str = "127.0.0.1"
    """Interface the trainer serves its InferenceService on; the ModelProxy reaches it at this host."""
    model_name: str = "policy"
    """Model name the agent sees."""
    max_calls: int = Field(default=0, ge=0)
    """Model calls allowed per episode (0 = unlimited; the proxy answers 429 beyond)."""
    budget_s: float | None = Field(default=None, gt=0)
    """The agent's wall-clock budget per episode (unset = the task's limits.agent_s)."""
    setup_timeout_s: float = Field(default=120.0, gt=0)
    """Limit of one sandbox setup (task files + setup script)."""
    verify_timeout_s: float = Field(default=120.0, gt=0)
    """Limit of one run of the task's hidden tests."""
    proxy_timeout_s: float = Field(default=30.0, gt=0)
    """Limit of one ModelProxy call (open / close / records)."""


class OptimizerConfig(_Section):
    """AdamW settings."""

    lr: float = Field(default=3e-4, gt=0)
    """Learning rate."""
    weight_decay: float = Field(default=0.0, ge=0)
    """Decoupled weight decay."""
    grad_clip: float = Field(default=1.0, ge=0)
    """Max global grad norm (0 = no clipping)."""


class SFTConfig(_Section):
    """Masked SFT (the `sft` command, or a warm-up before RL)."""

    data: str | None = None
    """Trajectories JSONL (Trajectory.to_dict per line) or demos JSONL ({"seed", "actions"}), relative to the config."""
    steps: int = Field(default=0, ge=0)
    """Optimizer steps (0 = no SFT)."""
    lr: float = Field(default=3e-3, gt=0)
    """Learning rate of the SFT steps."""
    batch_size: int = Field(default=8, ge=1)
    """Trajectories per SFT step."""


class CheckpointConfig(_Section):
    """When and where checkpoints are written."""

    every: int = Field(default=10, ge=0)
    """Steps between checkpoints (0 = only at the end)."""
    keep: int = Field(default=2, ge=1)
    """Checkpoints kept on disk."""
    resume: bool = True
    """Continue from the newest checkpoint in output_dir if there is one."""


class MetricsConfig(_Section):
    """What is logged."""

    tensorboard: bool = True
    """Also write TensorBoard events when tensorboard is installed."""
    plot: bool = True
    """Write curves.png at the end (needs matplotlib)."""
    progress: bool = True
    """Show a rich progress bar."""


class EvalConfig(_Section):
    """Held-out evaluation (greedy unless `temperature` is set)."""

    episodes: int = Field(default=64, ge=0)
    """Evaluation episodes on distinct held-out states."""
    temperature: float = Field(default=0.0, ge=0.0)
    """Sampling temperature of the held-out episodes: 0 = greedy (the default). RL optimizes the
    policy it samples from, which greedy decoding does not always show; a temperature (e.g. the
    rollout's) measures that policy, one sampled episode per held-out state."""
    every: int = Field(default=0, ge=0)
    """Steps between evaluations during training (0 = only before and after)."""


class ResourcesConfig(_Section):
    """Train–rollout multiplexing over worker slots."""

    train_slots: int = Field(default=0, ge=0)
    """Slots taken from rollout while a training step runs (0 = no multiplexing)."""


class RoleResources(_Section):
    """Ray resources reserved for one actor of a role (cluster.mode=ray)."""

    num_cpus: float = Field(default=1.0, ge=0)
    """CPUs the actor reserves (fractions allowed); its torch threads default to this, at least 1."""
    num_gpus: float = Field(default=0.0, ge=0)
    """GPUs the actor reserves (set engine.device=cuda to use them)."""
    resources: dict[str, float] = Field(default_factory=dict)
    """Custom Ray resources the actor reserves, which pins the role to the nodes that declare them:
    `{trainer_node: 1}` runs it only on a node started with `ray start --resources='{"trainer_node": 4}'`."""

    @field_validator("resources")
    @classmethod
    def _positive(cls, v: dict[str, float]) -> dict[str, float]:
        # A 0 amount reserves nothing, so it would pin nothing: refused rather than silently ignored.
        bad = {k: a for k, a in v.items() if not a > 0 or not k}
        if bad:
            raise ValueError(f"custom resource amounts must be > 0 and names non-empty, got {bad}")
        return v


class ClusterConfig(_Section):
    """Where the roles run: all in this process (`local`), or as Ray actors (`ray`)."""

    mode: Literal["local", "ray"] = "local"
    """`local`: engines and environments in the controller's process; `ray`: train, inference and rollout-worker actors."""
    address: str = "local"
    """`local` starts a private Ray instance (stopped at the end); `auto`, `host:port` or `ray://host:port` joins a running cluster."""
    num_cpus: int | None = Field(default=None, ge=1)
    """CPUs of a locally started instance (unset = all of this machine's)."""
    temp_dir: str | None = None
    """Session/log directory of a locally started instance (unset = Ray's default, /tmp/ray); keep it short (socket paths)."""
    num_rollout_workers: int = Field(default=1, ge=1)
    """Environment-worker actors; episodes' environments are spread over them round-robin."""
    env_concurrency: int = Field(default=64, ge=1)
    """Environment calls one rollout worker serves concurrently (threads)."""
    train: RoleResources = Field(default_factory=RoleResources)
    """Resources of the train actor."""
    inference: RoleResources = Field(default_factory=RoleResources)
    """Resources of the inference actor."""
    rollout_worker: RoleResources = Field(default_factory=lambda: RoleResources(num_cpus=0.5))
    """Resources of each rollout-worker actor."""
    start_timeout_s: float = Field(default=300.0, gt=0)
    """Limit for Ray to start and for an actor to come up (model loading included)."""
    call_timeout_s: float = Field(default=600.0, gt=0)
    """Limit of one train-actor call (a backward on a full batch) and of weight transfers."""

    @model_validator(mode="after")
    def _ray_installed(self) -> ClusterConfig:
        if self.mode == "ray":
            from ale_roll.cluster import ray_available

            if not ray_available():
                raise ValueError("cluster.mode=ray needs Ray: pip install 'ale-roll[ray]'")
        return self


class RunConfig(_Section):
    """A whole run."""

    name: str = "run"
    """Run name (metrics, service listings)."""
    output_dir: str = "runs/run"
    """Metrics, checkpoints and plots go here (relative to the working directory)."""
    seed: int = 0
    """Seed of torch / python RNGs."""
    iterations: int = Field(default=100, ge=0)
    """Training steps."""
    model: ModelConfig
    """The policy."""
    engine: EngineConfig = Field(default_factory=EngineConfig)
    """Backends."""
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    """Episode collection."""
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig)
    """The loss."""
    env: EnvConfig = Field(default_factory=EnvConfig)
    """The environment (GEM mode)."""
    agent: AgentConfig = Field(default_factory=AgentConfig)
    """Agent-native rollout (rollout.mode=agent_native)."""
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig)
    """AdamW."""
    sft: SFTConfig = Field(default_factory=SFTConfig)
    """Masked SFT data and warm-up."""
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    """Checkpoints."""
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    """Logging."""
    eval: EvalConfig = Field(default_factory=EvalConfig)
    """Evaluation."""
    resources: ResourcesConfig = Field(default_factory=ResourcesConfig)
    """Multiplexing."""
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    """Placement of the roles (local process or Ray actors)."""
    config_dir: str = "."
    """Directory of the YAML file (set by load_config; relative data paths resolve against it)."""

    @model_validator(mode="after")
    def _resources(self) -> RunConfig:
        r = self.rollout
        if r.batch_size % r.group_size:
            raise ValueError(f"rollout.batch_size ({r.batch_size}) must be a multiple of rollout.group_size ({r.group_size})")
        if r.episodes_in_flight < r.group_size:
            raise ValueError(f"rollout.episodes_in_flight ({r.episodes_in_flight}) must be >= rollout.group_size ({r.group_size})")
        if self.resources.train_slots >= r.episodes_in_flight:
            raise ValueError(
                f"resources.train_slots ({self.resources.train_slots}) must be < rollout.episodes_in_flight "
                f"({r.episodes_in_flight}): rollout needs at least one slot")
        return self

    @model_validator(mode="after")
    def _agent_native(self) -> RunConfig:
        if self.rollout.mode != "agent_native":
            return self
        a = self.agent
        if not a.tasks:
            raise ValueError("agent.tasks: rollout.mode=agent_native needs at least one task")
        if not a.sandbox_address:
            raise ValueError("agent.sandbox_address: rollout.mode=agent_native needs an ale-rock Admin for sandboxes")
        if a.kind == "command" and not a.command.strip():
            raise ValueError("agent.command: agent.kind=command needs the agent's command")
        if a.kind == "flow" and (a.command or a.files):
            raise ValueError("agent.command / agent.files apply to agent.kind=command only")
        return self

    @model_validator(mode="after")
    def _resampling(self) -> RunConfig:
        if self.algorithm.resampling.enabled and self.rollout.mode == "agent_native" and self.agent.kind != "flow":
            raise ValueError(
                "algorithm.resampling: in agent-native mode an episode restarts from an expert's first chunks by "
                "having the agent replay the expert's replies, which only ale-flow's loop in the trainer "
                "(agent.kind=flow) can do; an agent.kind=command agent is a process we do not drive")
        return self

    @model_validator(mode="after")
    def _env_paths(self) -> RunConfig:
        # Made absolute here, so the env section alone (e.g. sent to a Ray rollout worker) finds them.
        e = self.env
        e.data = str(self.resolve(e.data)) if e.data is not None else None
        e.eval_data = str(self.resolve(e.eval_data)) if e.eval_data is not None else None
        e.search_path = [str(self.resolve(d)) for d in e.search_path]
        here = str(Path(self.config_dir).resolve())
        if here not in e.search_path:
            e.search_path.append(here)
        return self

    def resolve(self, path: str) -> Path:
        """A path from the config, relative to the YAML file's directory."""
        p = Path(path)
        return p if p.is_absolute() else Path(self.config_dir) / p


# -- loading and overrides (the one loader: ale_proto.config) ---------------------------------

def build_config(raw: Mapping[str, Any], overrides: list[str] | None = None, config_dir: str | Path = ".",
                 *, source: str | Path | None = None) -> RunConfig:
    """Validate a raw mapping (plus dotted overrides) into a RunConfig; the mapping is not modified.
    ``source`` names the mapping in errors (the YAML file it came from)."""
    from ale_proto.config import load_config as _load

    return _load(RunConfig, None, list(overrides or []), base={"config_dir": str(config_dir)}, data=raw,
                 source=str(source) if source is not None else None)


def load_config(path: str | Path, overrides: list[str] | None = None) -> RunConfig:
    """Read a YAML file and validate it (see the module docstring)."""
    from ale_proto.config import load_config as _load

    p = Path(path)
    return _load(RunConfig, p, list(overrides or []), base={"config_dir": str(p.resolve().parent)})
