"""The task-instance format: ``task.yaml`` as pydantic models, and a loaded task in memory."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

TASK_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{1,79}$")

# Where the harness puts things inside the work dir. Tests and the reference solution arrive only
# when they are needed and are removed afterwards, so the agent never sees them.
SETUP_DIR = ".ale_setup"
SOLUTION_DIR = ".ale_solution"
TESTS_DIR = ".ale_tests"


class Domain(str, Enum):
    """The eight Terminal Bench Pro domains."""

    DATA_PROCESSING = "data_processing"
    GAMES = "games"
    DEBUGGING = "debugging"
    SYSADMIN = "sysadmin"
    SCIENTIFIC_COMPUTING = "scientific_computing"
    SOFTWARE_ENGINEERING = "software_engineering"
    MACHINE_LEARNING = "machine_learning"
    SECURITY = "security"


class Difficulty(str, Enum):
    """Rough difficulty for an agent."""

    EASY = "easy"
    MEDIUM = "medium"
    HARD = "hard"


class Split(str, Enum):
    """Which subset a task belongs to: trainers see ``train``; ``held_out`` is only for evaluation."""

    TRAIN = "train"
    HELD_OUT = "held_out"


class TimeLimits(BaseModel):
    """Wall-clock limits, in seconds, for the phases of an episode."""

    model_config = ConfigDict(extra="forbid")

    setup_s: float = Field(default=60.0, gt=0, le=3600)
    """Limit for ``setup/setup.sh`` (and for the reference solution when validating)."""
    agent_s: float = Field(default=900.0, gt=0, le=86400)
    """Budget for the agent to work on the task."""
    test_s: float = Field(default=60.0, gt=0, le=3600)
    """Limit for the hidden test command."""


class TaskSpec(BaseModel):
    """The contents of a ``task.yaml``."""

    model_config = ConfigDict(extra="forbid")

    format: int = 1
    """Format version of this file; only 1 exists."""
    id: str
    """Unique id: lowercase letters, digits, ``.``, ``_`` and ``-`` (2-80 characters)."""
    domain: Domain
    """One of the eight domains."""
    title: str = Field(min_length=3, max_length=120)
    """One-line title."""
    prompt: str = Field(min_length=20)
    """What the agent is asked to do. Paths are relative to the work dir it starts in."""
    difficulty: Difficulty = Difficulty.MEDIUM
    """Rough difficulty."""
    split: Split = Split.TRAIN
    """``train`` (public) or ``held_out``."""
    tags: list[str] = Field(default_factory=list)
    """Free-form tags for filtering."""
    env: str | None = None
    """Name of an EnvHub spec to run in; ``None`` means the plain base environment (python3 stdlib,
    bash, coreutils; no network)."""
    dockerfile: str | None = None
    """Alternatively, a Dockerfile relative to the task dir (exclusive with ``env``)."""
    limits: TimeLimits = Field(default_factory=TimeLimits)
    """Time limits."""
    test_command: str = f"python3 {TESTS_DIR}/test_task.py"
    """Command that runs the hidden tests from the work dir. It prints one ``PASS name`` or
    ``FAIL name: reason`` line per test and exits non-zero when any test fails."""
    keep_agent_processes: bool = False
    """The tests need a service the agent started, so what the agent left running is not killed
    before they run (see :attr:`VerifierSpec.stop_agent_processes`: the verdict can be rigged)."""

    @field_validator("format")
    @classmethod
    def _known_format(cls, v: int) -> int:
        if v != 1:
            raise ValueError(f"unsupported task format {v}; this version reads format 1")
        return v

    @field_validator("id")
    @classmethod
    def _valid_id(cls, v: str) -> str:
        if not TASK_ID_RE.match(v):
            raise ValueError(f"{v!r} is not a valid task id (lowercase [a-z0-9._-], 2-80 chars)")
        return v

    @field_validator("tags")
    @classmethod
    def _valid_tags(cls, v: list[str]) -> list[str]:
        for tag in v:
            if not tag or any(c.isspace() for c in tag):
                raise ValueError(f"tag {tag!r} must be non-empty without whitespace")
        return v

    @model_validator(mode="after")
    def _one_env(self) -> TaskSpec:
        if self.env is not None and self.dockerfile is not None:
            raise ValueError("set at most one of 'env' and 'dockerfile'")
        return self


Files = dict[str, bytes]
"""Relative path -> content."""


class TaskFormat(str, Enum):
    """Which on-disk format a task was loaded from."""

    ALE = "ale"
    """Our ``task.yaml`` (PASS/FAIL lines from ``test_command``)."""
    HARBOR = "harbor"
    """Harbor: ``task.toml`` + ``instruction.md`` + ``environment/`` + ``tests/test.sh`` (reward files)."""
    TERMINAL_BENCH = "terminal-bench"
    """Terminal-Bench 1: ``task.yaml`` with ``instruction`` + ``run-tests.sh`` + pytest output."""


class NetworkMode(str, Enum):
    """Egress of the sandbox a task runs in."""

    NO_NETWORK = "no-network"
    ALLOWLIST = "allowlist"
    PUBLIC = "public"
    """Accepted in files; ALE has no open egress, so it runs as ``no-network`` (logged)."""


@dataclass
class DockerStep:
    """One instruction of an environment Dockerfile (``FROM``, ``WORKDIR``, ``ENV``, ``COPY``, ``RUN``...)."""

    line: int
    """1-based line in the Dockerfile where the instruction starts."""
    op: str
    """The instruction, upper case."""
    args: str
    """Everything after the instruction, continuation lines joined."""

    def describe(self) -> str:
        text = " ".join(self.args.split())
        return f"Dockerfile line {self.line}: {self.op} {text[:120]}"


@dataclass
class TaskEnvironment:
    """Where a task runs: image or Dockerfile, resources, work dir, env, network."""

    docker_image: str | None = None
    """A ready image (Harbor ``[environment].docker_image``)."""
    dockerfile: str | None = None
    """The Dockerfile's text (``environment/Dockerfile``), if any."""
    dockerfile_steps: list[DockerStep] = field(default_factory=list)
    """Its parsed instructions."""
    context: Files = field(default_factory=dict)
    """The build context (``environment/``), for ``COPY``."""
    workdir: str | None = None
    """Absolute work dir the task expects (``[environment].workdir`` or the Dockerfile's WORKDIR);
    ``None``: the sandbox's default (``/workspace``)."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment variables of every command (Dockerfile ``ENV``)."""
    cpus: float | None = None
    memory_mb: int | None = None
    storage_mb: int | None = None
    gpus: int = 0
    network_mode: NetworkMode = NetworkMode.NO_NETWORK
    allowed_hosts: list[str] = field(default_factory=list)
    """For ``allowlist``: ``host`` or ``host:port`` entries for the sandbox's egress policy."""
    build_timeout_s: float = 600.0
    built_image: str | None = None
    """Set once the Dockerfile was built (EnvHub): sandboxes use it and setup applies no steps."""

    @property
    def from_image(self) -> str | None:
        """The Dockerfile's ``FROM`` image, if there is a Dockerfile."""
        froms = [s for s in self.dockerfile_steps if s.op == "FROM"]
        if not froms:
            return None
        words = [w for w in froms[-1].args.split() if not w.startswith("--")]
        return words[0] if words else None


class VerifierKind(str, Enum):
    """How the hidden tests turn into a reward."""

    PASS_FAIL = "pass_fail"
    """Ours: ``test_command`` prints ``PASS``/``FAIL`` (or pytest ``-rA``) lines."""
    REWARD_FILE = "reward_file"
    """Harbor: ``tests/test.sh`` writes ``/logs/verifier/reward.txt`` or ``reward.json``."""
    PYTEST = "pytest"
    """Terminal-Bench: ``run-tests.sh`` runs pytest; every test must pass."""


@dataclass
class VerifierSpec:
    """How to verify: the command (run from the work dir) and how its result is read."""

    kind: VerifierKind = VerifierKind.PASS_FAIL
    command: str = ""
    """For non-``pass_fail`` kinds; ``pass_fail`` uses ``spec.test_command``."""
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment of the verifier (Harbor ``[verifier].env``)."""
    stop_agent_processes: bool = True
    """Kill every process the agent left running before the tests go in: a program it left
    (setsid, nohup) could rewrite them or the reward files as they run. A task whose tests need
    a service the agent started (a web server, a database) turns this off — ``keep_agent_processes``
    in its ``task.yaml``, Harbor ``[verifier]`` or Terminal-Bench ``task.yaml`` — and its verdict can
    then be rigged by what the agent left running."""


@dataclass
class TaskStep:
    """One step of a multi-step (Harbor ``steps/``) task: its own instruction, tests and solution,
    run in order in the same sandbox."""

    name: str
    instruction: str
    agent_timeout_s: float
    verifier_timeout_s: float
    tests: Files = field(default_factory=dict)
    """The step's tests layered over the task-level ``tests/`` (the step's files win)."""
    solution: Files = field(default_factory=dict)
    setup: Files = field(default_factory=dict)
    """``steps/<name>/environment/`` files copied into the work dir before the step (and its
    ``setup.sh`` hook, run then)."""
    min_reward: float | dict[str, float] | None = None
    """Abort the remaining steps when this step's reward (or a metric) falls below it."""
    contributes_to_reward: bool = True
    verifier_env: dict[str, str] = field(default_factory=dict)


@dataclass
class Task:
    """A task in memory: its spec and the files of its ``setup/``, ``tests/`` and ``solution/``.

    Tasks are small, so a loaded task carries its file contents; generated tasks never touch disk.
    """

    spec: TaskSpec
    setup: Files = field(default_factory=dict)
    tests: Files = field(default_factory=dict)
    solution: Files = field(default_factory=dict)
    path: Path | None = None
    """The directory it was loaded from, if any."""
    format: TaskFormat = TaskFormat.ALE
    environment: TaskEnvironment = field(default_factory=TaskEnvironment)
    verifier: VerifierSpec = field(default_factory=VerifierSpec)
    steps: list[TaskStep] = field(default_factory=list)
    """Harbor multi-step tasks; empty for single-step tasks."""
    step_reward_strategy: str = "mean"
    """Multi-step: ``mean`` over contributing steps (missing metrics count 0) or ``final``."""
    notes: list[str] = field(default_factory=list)
    """Load-time notices (ignored keys, substitutions) to show the user."""

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def instruction(self) -> str:
        """What the agent is told (``spec.prompt``; for multi-step tasks, every step in order)."""
        return self.spec.prompt


@dataclass(frozen=True)
class TestResult:
    """One test of a task's hidden test command."""

    name: str
    passed: bool
    message: str = ""


@dataclass(frozen=True)
class TestReport:
    """The outcome of running a task's test command once."""

    tests: list[TestResult]
    exit_code: int
    output: str
    timed_out: bool
    duration_s: float
    reward_value: float | None = None
    """The reward a reward file gave (Harbor); ``None``: derived from the tests."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Every number of ``reward.json`` (multi-metric rewards), or ``{"reward": r}`` from reward.txt."""
    error: str = ""
    """The verifier could not produce a result (no reward file, unreadable reward): not a score."""
    steps: list[StepReport] = field(default_factory=list)
    """Multi-step tasks: one report per step run, in order."""

    @property
    def passed(self) -> bool:
        """All tests passed, at least one ran, and the command exited 0 in time; with a reward
        file: the reward is 1 (or more) and nothing went wrong."""
        if self.reward_value is not None:
            return not self.timed_out and not self.error and self.reward_value >= 1.0
        return (
            not self.timed_out and self.exit_code == 0 and bool(self.tests) and all(t.passed for t in self.tests)
        )

    @property
    def reward(self) -> float:
        """Fraction of tests passed (0 on a timeout); 1.0 only when :attr:`passed`. With a reward
        file, its value (fractional rewards kept)."""
        if self.reward_value is not None:
            return 0.0 if self.timed_out or self.error else self.reward_value
        if self.timed_out or not self.tests:
            return 0.0
        if self.passed:
            return 1.0
        frac = sum(t.passed for t in self.tests) / len(self.tests)
        return min(frac, 1.0 - 1.0 / (len(self.tests) + 1))

    def outcome(self) -> tuple[tuple[str, object], ...]:
        """What must be equal across runs for the tests to count as deterministic."""
        out: tuple[tuple[str, object], ...] = tuple((t.name, t.passed) for t in self.tests)
        out += (("<exit>", self.exit_code == 0),)
        if self.reward_value is not None:
            out += tuple(sorted(self.metrics.items())) + (("<reward>", self.reward_value),)
        return out


@dataclass(frozen=True)
class StepReport:
    """The verifier's outcome for one step of a multi-step task."""

    name: str
    report: TestReport
    contributes_to_reward: bool = True
