"""Harbor task directories: ``task.toml`` (schema 1.x, read with ``tomllib``), ``instruction.md``,
``environment/``, ``tests/test.sh``, ``solution/solve.sh`` and multi-step ``steps/``, loaded into
the one :class:`~ale_rock.tasks.models.Task` every runner uses.

Field names are Harbor's. Keys Harbor knows but ALE does not use (authors, gpu types, users...)
are accepted and ignored; keys neither knows are listed in ``Task.notes``. Deprecated spellings
(``version``, ``memory``, ``storage``, ``allow_internet``) are read and normalized.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import tomllib
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ale_rock.tasks.dockerfile import DockerfileError, parse_dockerfile
from ale_rock.tasks.loader import read_tree
from ale_rock.tasks.models import (
    TASK_ID_RE,
    Difficulty,
    Domain,
    Files,
    NetworkMode,
    Split,
    Task,
    TaskEnvironment,
    TaskFormat,
    TaskSpec,
    TaskStep,
    TimeLimits,
    VerifierKind,
    VerifierSpec,
)

TOML_FILE = "task.toml"
INSTRUCTION_FILE = "instruction.md"
TEST_SCRIPT = "test.sh"
HARBOR_DEFAULT_TIMEOUT_S = 600.0
SUPPORTED_MAJOR = 1


class _Open(BaseModel):
    # Harbor ignores keys it does not know; so do we, and say which (see ``unknown_keys``).
    model_config = ConfigDict(extra="allow")


class HarborPhase(_Open):
    """``[agent]`` / ``[verifier]``: a phase's limit, environment and network override."""

    timeout_sec: float | None = Field(default=None, gt=0)
    """Wall-clock limit of the phase (Harbor's default: 600)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables of the phase (the verifier's are exported before ``test.sh``)."""
    user: str | None = None
    """Accepted, not applied: a sandbox runs as its own user."""
    network_mode: NetworkMode | None = None
    """Phase override of ``[environment].network_mode`` (the agent's applies to the sandbox)."""
    allowed_hosts: list[str] | None = None
    """Phase override of ``[environment].allowed_hosts``."""
    keep_agent_processes: bool = False
    """ALE's, ``[verifier]`` only: the tests need a service the agent started, so what the agent
    left running is not killed before they run (by default it is: it could rig them)."""


class HarborEnvironment(_Open):
    """``[environment]``: image, resources, work dir and network."""

    docker_image: str | None = None
    """A ready image; without it ``environment/Dockerfile`` describes the environment."""
    build_timeout_sec: float = Field(default=600.0, gt=0)
    cpus: float | None = Field(default=None, gt=0)
    memory_mb: int | None = Field(default=None, gt=0)
    memory: str | None = None
    """Deprecated spelling (``"2G"``, ``"512M"``) of ``memory_mb``."""
    storage_mb: int | None = Field(default=None, gt=0)
    storage: str | None = None
    """Deprecated spelling of ``storage_mb``."""
    gpus: int = Field(default=0, ge=0)
    workdir: str | None = None
    """Absolute work dir the agent starts in (overrides the Dockerfile's WORKDIR)."""
    network_mode: NetworkMode | None = None
    """``no-network`` (ALE's default), ``allowlist`` (``allowed_hosts`` through the egress
    gateway) or ``public`` (run as ``no-network``: ALE has no open egress)."""
    allowed_hosts: list[str] = Field(default_factory=list)
    allow_internet: bool | None = None
    """Deprecated: ``true`` means ``public``, ``false`` ``no-network``."""
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("workdir")
    @classmethod
    def _absolute(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith("/"):
            raise ValueError(f"workdir must be an absolute path, got {v!r}")
        return v.rstrip("/") or "/" if v is not None else v


class HarborStepConfig(_Open):
    """One ``[[steps]]`` entry; unset values fall back to the task's ``[agent]``/``[verifier]``."""

    name: str
    min_reward: float | dict[str, float] | None = None
    contributes_to_reward: bool = True
    agent: HarborPhase = Field(default_factory=HarborPhase)
    verifier: HarborPhase = Field(default_factory=HarborPhase)


class HarborTaskSection(_Open):
    """``[task]``: name and description."""

    name: str | None = None
    description: str | None = None
    keywords: list[str] = Field(default_factory=list)


class HarborTaskConfig(_Open):
    """One ``task.toml``."""

    schema_version: str | None = None
    version: str | None = None
    """Deprecated spelling of ``schema_version``."""
    task: HarborTaskSection = Field(default_factory=HarborTaskSection)
    metadata: dict[str, Any] = Field(default_factory=dict)
    agent: HarborPhase = Field(default_factory=HarborPhase)
    verifier: HarborPhase = Field(default_factory=HarborPhase)
    environment: HarborEnvironment = Field(default_factory=HarborEnvironment)
    solution: dict[str, Any] = Field(default_factory=dict)
    multi_step_reward_strategy: str | None = None
    multi_step_reward_mode: str | None = None
    """Pre-1.3 spelling; accepted and dropped, as Harbor drops it."""
    steps: list[HarborStepConfig] = Field(default_factory=list)

    @field_validator("multi_step_reward_strategy")
    @classmethod
    def _strategy(cls, v: str | None) -> str | None:
        if v is not None and v not in ("mean", "final"):
            raise ValueError(f"must be 'mean' or 'final', got {v!r}")
        return v

    @property
    def effective_version(self) -> str:
        return self.schema_version or self.version or "1.0"


def unknown_keys(model: BaseModel, prefix: str = "") -> list[str]:
    """Keys of the file no model field knows (dotted), recursively."""
    out = [f"{prefix}{k}" for k in (model.model_extra or {})]
    for name in type(model).model_fields:
        v = getattr(model, name)
        if isinstance(v, BaseModel):
            out += unknown_keys(v, f"{prefix}{name}.")
        elif isinstance(v, list):
            for i, item in enumerate(v):
                if isinstance(item, BaseModel):
                    out += unknown_keys(item, f"{prefix}{name}[{i}].")
    return out


def _size_mb(text: str, field: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*", text, re.IGNORECASE)
    if not m:
        raise ValueError(f"field '{field}': {text!r} is not a size like '2G' or '512M'")
    factor = {"": 1 / 2**20, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}[m.group(2).upper()]
    return max(1, int(float(m.group(1)) * factor))


def task_id_from(name: str) -> str:
    """A valid ALE task id from a Harbor name (``org/name`` → ``org.name``) or a dir name."""
    tid = re.sub(r"[^a-z0-9._-]+", "-", name.strip().lower().replace("/", "."))
    tid = tid.strip("-._") or "task"
    if len(tid) < 2:
        tid = f"task-{tid}"
    tid = tid[:80]
    assert TASK_ID_RE.match(tid), tid
    return tid


_DOMAIN_WORDS = [
    ("secur", Domain.SECURITY), ("crypt", Domain.SECURITY), ("debug", Domain.DEBUGGING),
    ("sysadmin", Domain.SYSADMIN), ("system", Domain.SYSADMIN), ("admin", Domain.SYSADMIN),
    ("network", Domain.SYSADMIN), ("data", Domain.DATA_PROCESSING), ("machine", Domain.MACHINE_LEARNING),
    ("ml", Domain.MACHINE_LEARNING), ("model", Domain.MACHINE_LEARNING), ("scien", Domain.SCIENTIFIC_COMPUTING),
    ("math", Domain.SCIENTIFIC_COMPUTING), ("game", Domain.GAMES), ("puzzle", Domain.GAMES),
]  # fmt: skip


def domain_from(category: Any) -> Domain:
    """Our domain from a free-form category (``software_engineering`` when nothing matches)."""
    text = str(category or "").lower().replace("-", "_").replace(" ", "_")
    try:
        return Domain(text)
    except ValueError:
        pass
    for word, domain in _DOMAIN_WORDS:
        if word in text:
            return domain
    return Domain.SOFTWARE_ENGINEERING


def difficulty_from(value: Any) -> Difficulty:
    try:
        return Difficulty(str(value or "medium").lower())
    except ValueError:
        return Difficulty.MEDIUM


def clean_tags(values: list[Any]) -> list[str]:
    return [t for t in ("-".join(str(v).split()) for v in values) if t]


def build_environment(
    env_dir: Path, *, docker_image: str | None, workdir: str | None, source: Path, problems: list[str]
) -> TaskEnvironment:
    """The environment from a Dockerfile (if any) in ``env_dir`` and the config's image/workdir."""
    env = TaskEnvironment(docker_image=docker_image, workdir=workdir)
    dockerfile = env_dir / "Dockerfile"
    if dockerfile.is_file():
        env.dockerfile = dockerfile.read_text(encoding="utf-8")
        env.context = {k: v for k, v in read_tree(env_dir).items() if k != "Dockerfile"}
        try:
            env.dockerfile_steps = parse_dockerfile(env.dockerfile)
        except DockerfileError as e:
            problems.append(f"{dockerfile}: {e}")
        from ale_rock.tasks.environment import dockerfile_env

        env.env.update(dockerfile_env(env))
        # The last WORKDIR is where the container starts; task.toml's workdir wins.
        workdirs = [s.args.strip() for s in env.dockerfile_steps if s.op == "WORKDIR"]
        if env.workdir is None and workdirs and workdirs[-1].startswith("/"):
            env.workdir = workdirs[-1].rstrip("/") or "/"
    return env


def _format_errors(err: ValidationError) -> list[str]:
    return [f"field '{'.'.join(str(p) for p in e['loc']) or '<root>'}': {e['msg']}" for e in err.errors()]


def parse_config(text: str, source: Path) -> HarborTaskConfig:
    """Parse ``task.toml``; a :class:`TaskFormatError` names the file and every bad field."""
    from ale_rock.tasks.loader import TaskFormatError

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise TaskFormatError(source, [f"invalid TOML: {e}"]) from None
    try:
        cfg = HarborTaskConfig.model_validate(data)
    except ValidationError as e:
        raise TaskFormatError(source, _format_errors(e)) from None
    major = cfg.effective_version.split(".")[0]
    if major != str(SUPPORTED_MAJOR):
        field = "schema_version" if cfg.schema_version else "version"
        raise TaskFormatError(source, [f"field '{field}': unsupported schema {cfg.effective_version!r}; this reads 1.x"])
    return cfg


def load_harbor_task(root: Path) -> Task:
    """Load a Harbor task directory (single- or multi-step)."""
    from ale_rock.tasks.loader import TaskFormatError

    toml_path = root / TOML_FILE
    cfg = parse_config(toml_path.read_text(encoding="utf-8"), toml_path)
    problems: list[str] = []
    notes = [f"{TOML_FILE}: key '{k}' is not used by ALE (ignored)" for k in unknown_keys(cfg)]
    e = cfg.environment
    memory_mb, storage_mb = e.memory_mb, e.storage_mb
    try:
        if memory_mb is None and e.memory:
            memory_mb = _size_mb(e.memory, "environment.memory")
        if storage_mb is None and e.storage:
            storage_mb = _size_mb(e.storage, "environment.storage")
    except ValueError as err:
        problems.append(str(err))

    env = build_environment(root / "environment", docker_image=e.docker_image, workdir=e.workdir, source=toml_path, problems=problems)
    env.cpus, env.memory_mb, env.storage_mb, env.gpus = e.cpus, memory_mb, storage_mb, e.gpus
    env.build_timeout_s = e.build_timeout_sec
    env.env.update(e.env)
    mode = cfg.agent.network_mode or e.network_mode
    if mode is None and e.allow_internet is not None:
        mode = NetworkMode.PUBLIC if e.allow_internet else NetworkMode.NO_NETWORK
    hosts = cfg.agent.allowed_hosts if cfg.agent.allowed_hosts is not None else e.allowed_hosts
    env.network_mode = mode or NetworkMode.NO_NETWORK
    env.allowed_hosts = list(hosts) if env.network_mode == NetworkMode.ALLOWLIST else []
    if env.network_mode == NetworkMode.PUBLIC:
        notes.append("network_mode 'public' runs as 'no-network': ALE sandboxes have no open egress (use allowlist)")

    agent_s = cfg.agent.timeout_sec or HARBOR_DEFAULT_TIMEOUT_S
    test_s = cfg.verifier.timeout_sec or HARBOR_DEFAULT_TIMEOUT_S
    tests = read_tree(root / "tests")
    solution = read_tree(root / "solution")
    steps: list[TaskStep] = []
    if cfg.steps:
        steps = _load_steps(root, cfg, agent_s, test_s, tests, problems)
        instruction = "\n\n".join(f"## Step {i} ({s.name})\n\n{s.instruction}" for i, s in enumerate(steps, 1))
    else:
        ipath = root / INSTRUCTION_FILE
        instruction = ipath.read_text(encoding="utf-8").strip() if ipath.is_file() else ""
        if not instruction:
            problems.append(f"{ipath}: missing or empty (the instruction is required)")
        if TEST_SCRIPT not in tests:
            problems.append(f"{root / 'tests' / TEST_SCRIPT}: missing (the verifier is required)")
    if problems:
        raise TaskFormatError(toml_path, problems)

    meta = cfg.metadata
    name = cfg.task.name or str(meta.get("name") or root.name)
    title = (cfg.task.description or instruction.strip().splitlines()[0].lstrip("# ") or name)[:120]
    split = Split.HELD_OUT if str(meta.get("split", "")).replace("-", "_") == "held_out" else Split.TRAIN
    tags = clean_tags([*cfg.task.keywords, *(meta.get("tags") or [])])
    spec = TaskSpec.model_construct(
        format=1, id=task_id_from(name), domain=domain_from(meta.get("category")), title=title.ljust(3, "."),
        prompt=instruction, difficulty=difficulty_from(meta.get("difficulty")), split=split, tags=tags,
        env=None, dockerfile=None,
        limits=TimeLimits(setup_s=min(max(e.build_timeout_sec, agent_s), 3600.0), agent_s=min(agent_s, 86400.0),
                          test_s=min(test_s, 3600.0)),
        test_command=f"bash .ale_tests/{TEST_SCRIPT}",
    )  # fmt: skip
    return Task(
        spec=spec, setup={}, tests=tests, solution=solution, path=root, format=TaskFormat.HARBOR,
        environment=env, verifier=VerifierSpec(kind=VerifierKind.REWARD_FILE, command=f"bash .ale_tests/{TEST_SCRIPT}",
                                               env=dict(cfg.verifier.env),
                                               stop_agent_processes=not cfg.verifier.keep_agent_processes),
        steps=steps, step_reward_strategy=cfg.multi_step_reward_strategy or "mean", notes=notes,
    )  # fmt: skip


def _load_steps(
    root: Path, cfg: HarborTaskConfig, agent_s: float, test_s: float, shared_tests: Files, problems: list[str]
) -> list[TaskStep]:
    steps = []
    seen: set[str] = set()
    for i, sc in enumerate(cfg.steps):
        where = f"field 'steps[{i}].name'"
        if sc.name in seen or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", sc.name):
            problems.append(f"{where}: {sc.name!r} is a duplicate or not a plain directory name")
            continue
        seen.add(sc.name)
        sdir = root / "steps" / sc.name
        if not sdir.is_dir():
            problems.append(f"{sdir}: missing (declared by {where})")
            continue
        ipath = sdir / INSTRUCTION_FILE
        instruction = ipath.read_text(encoding="utf-8").strip() if ipath.is_file() else ""
        if not instruction:
            problems.append(f"{ipath}: missing or empty")
        tests = {**shared_tests, **read_tree(sdir / "tests")}
        if TEST_SCRIPT not in tests:
            problems.append(f"{sdir / 'tests' / TEST_SCRIPT}: missing (and no shared tests/{TEST_SCRIPT})")
        setup = read_tree(sdir / "environment")
        if (sdir / "setup.sh").is_file():
            setup["setup.sh"] = (sdir / "setup.sh").read_bytes()
        steps.append(
            TaskStep(
                name=sc.name, instruction=instruction,
                agent_timeout_s=sc.agent.timeout_sec or agent_s, verifier_timeout_s=sc.verifier.timeout_sec or test_s,
                tests=tests, solution=read_tree(sdir / "solution"), setup=setup, min_reward=sc.min_reward,
                contributes_to_reward=sc.contributes_to_reward, verifier_env={**cfg.verifier.env, **sc.verifier.env},
            )
        )  # fmt: skip
    if not steps and not problems:
        problems.append("field 'steps': no steps")
    return steps
