"""Read and write task directories; find the tasks under a root."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import yaml
from pydantic import ValidationError

from ale_rock.tasks.models import Files, Task, TaskSpec, VerifierSpec

TASK_FILE = "task.yaml"
HARBOR_FILE = "task.toml"
TASK_MARKERS = (HARBOR_FILE, TASK_FILE)
MAX_TASK_BYTES = 8 * 1024 * 1024  # tasks ship as package data; anything bigger is a mistake


class TaskFormatError(ValueError):
    """A task directory or ``task.yaml`` is malformed. The message names the file and the field."""

    def __init__(self, path: Path | str, problems: list[str]) -> None:
        self.path = Path(path)
        self.problems = problems
        super().__init__(f"{path}: " + "; ".join(problems))


def _format_validation_error(err: ValidationError) -> list[str]:
    problems = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "<root>"
        problems.append(f"field '{loc}': {e['msg']}")
    return problems


def parse_spec(text: str, source: Path | str = TASK_FILE) -> TaskSpec:
    """Parse the text of a ``task.yaml``; raise :class:`TaskFormatError` naming every bad field."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise TaskFormatError(source, [f"invalid YAML: {e}"]) from None
    if not isinstance(data, dict):
        raise TaskFormatError(source, ["expected a mapping of fields at the top level"])
    try:
        return TaskSpec.model_validate(data)
    except ValidationError as e:
        raise TaskFormatError(source, _format_validation_error(e)) from None


def read_tree(root: Path) -> Files:
    """Every file under ``root`` (relative POSIX path -> bytes), sorted; ``{}`` if ``root`` is no dir."""
    files: Files = {}
    if not root.is_dir():
        return files
    for p in sorted(root.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            files[p.relative_to(root).as_posix()] = p.read_bytes()
    return files


def load_task(path: Path | str) -> Task:
    """Load any supported task directory into a :class:`Task`: a Harbor task (``task.toml``), a
    Terminal-Bench task (``task.yaml`` with ``instruction``) or ours (``task.yaml`` + ``setup/``,
    ``tests/``, ``solution/``). A :class:`TaskFormatError` names the file and the field."""
    root = Path(path)
    if (root / HARBOR_FILE).is_file():
        from ale_rock.tasks.harbor import load_harbor_task

        return load_harbor_task(root)
    spec_path = root / TASK_FILE
    if not spec_path.is_file():
        raise TaskFormatError(root, [f"no {TASK_FILE} (ALE, Terminal-Bench) or {HARBOR_FILE} (Harbor) in this directory"])
    text = spec_path.read_text(encoding="utf-8")
    from ale_rock.tasks.terminal_bench import is_terminal_bench, load_terminal_bench_task

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise TaskFormatError(spec_path, [f"invalid YAML: {e}"]) from None
    if is_terminal_bench(data):
        return load_terminal_bench_task(root, data, spec_path)
    spec = parse_spec(text, spec_path)
    task = Task(
        spec=spec,
        setup=read_tree(root / "setup"),
        tests=read_tree(root / "tests"),
        solution=read_tree(root / "solution"),
        path=root,
        verifier=VerifierSpec(stop_agent_processes=not spec.keep_agent_processes),
    )
    problems = check_task_files(task)
    if spec.dockerfile is not None and not (root / spec.dockerfile).is_file():
        problems.append(f"field 'dockerfile': {spec.dockerfile} does not exist in the task dir")
    if problems:
        raise TaskFormatError(spec_path, problems)
    return task


def check_task_files(task: Task) -> list[str]:
    """Structural checks that pydantic cannot do: required files exist and sizes are sane."""
    problems = []
    if not task.tests:
        problems.append("tests/: no test files (the hidden tests are required)")
    if not task.solution:
        problems.append("solution/: no reference solution (solve.sh and/or files)")
    size = sum(len(b) for part in (task.setup, task.tests, task.solution) for b in part.values())
    if size > MAX_TASK_BYTES:
        problems.append(f"task files total {size} bytes, over the {MAX_TASK_BYTES} limit")
    return problems


def write_task(task: Task, dest: Path | str) -> Path:
    """Write a task as a directory (used by the generator and for authoring)."""
    root = Path(dest)
    root.mkdir(parents=True, exist_ok=True)
    spec = task.spec.model_dump(mode="json", exclude_defaults=False)
    (root / TASK_FILE).write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True), encoding="utf-8")
    for sub, files in (("setup", task.setup), ("tests", task.tests), ("solution", task.solution)):
        for rel, data in files.items():
            target = root / sub / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    return root


def is_task_dir(path: Path) -> bool:
    """The directory holds a ``task.toml`` or ``task.yaml``."""
    return any((path / m).is_file() for m in TASK_MARKERS)


def iter_task_dirs(root: Path | str) -> Iterator[Path]:
    """Every task directory (``task.toml`` or ``task.yaml``) under ``root`` (or ``root`` itself),
    sorted; a task's own subdirectories are not searched."""
    base = Path(root)
    if is_task_dir(base):
        yield base
        return
    if not base.is_dir():
        return
    for child in sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")):
        yield from iter_task_dirs(child)


def builtin_suite_dir() -> Path:
    """The directory of the built-in suite shipped in the package."""
    return Path(__file__).parent / "suite"


def load_suite(root: Path | str | None = None) -> list[Task]:
    """Load every task under ``root`` (default: the built-in suite); ids must be unique."""
    tasks = [load_task(d) for d in iter_task_dirs(root or builtin_suite_dir())]
    seen: dict[str, Path | None] = {}
    for t in tasks:
        if t.id in seen:
            raise TaskFormatError(t.path or t.id, [f"field 'id': duplicate id {t.id!r} (also in {seen[t.id]})"])
        seen[t.id] = t.path
    return tasks
