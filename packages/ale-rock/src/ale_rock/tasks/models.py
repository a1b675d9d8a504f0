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

    @property
    def id(self) -> str:
        return self.spec.id


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

    @property
    def passed(self) -> bool:
        """All tests passed, at least one ran, and the command exited 0 in time."""
        return (
            not self.timed_out and self.exit_code == 0 and bool(self.tests) and all(t.passed for t in self.tests)
        )

    @property
    def reward(self) -> float:
        """Fraction of tests passed (0 on a timeout); 1.0 only when :attr:`passed`."""
        if self.timed_out or not self.tests:
            return 0.0
        if self.passed:
            return 1.0
        frac = sum(t.passed for t in self.tests) / len(self.tests)
        return min(frac, 1.0 - 1.0 / (len(self.tests) + 1))

    def outcome(self) -> tuple[tuple[str, bool], ...]:
        """What must be equal across runs for the tests to count as deterministic."""
        return tuple((t.name, t.passed) for t in self.tests) + (("<exit>", self.exit_code == 0),)
