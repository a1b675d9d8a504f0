"""Task instances: the format, loading, the runner Protocol, evaluation and validation.

A task is a directory with ``task.yaml`` (see :class:`TaskSpec`), ``setup/`` (copied into the work
dir at the start, plus an optional ``setup.sh``), ``tests/`` (hidden; copied in only to evaluate)
and ``solution/`` (the reference solution). The built-in suite lives in ``suite/``.
"""

from ale_rock.tasks.evaluate import apply_solution, run_tests, setup_task
from ale_rock.tasks.loader import TaskFormatError, builtin_suite_dir, load_suite, load_task, write_task
from ale_rock.tasks.models import Domain, Split, Task, TaskSpec, TestReport, TestResult
from ale_rock.tasks.runner import CommandResult, LocalDirRunner, TaskRunner
from ale_rock.tasks.sandbox_runner import SandboxRunner
from ale_rock.tasks.validate import ValidationReport, validate_many, validate_task

__all__ = [
    "CommandResult",
    "Domain",
    "LocalDirRunner",
    "SandboxRunner",
    "Split",
    "Task",
    "TaskFormatError",
    "TaskRunner",
    "TaskSpec",
    "TestReport",
    "TestResult",
    "ValidationReport",
    "apply_solution",
    "builtin_suite_dir",
    "load_suite",
    "load_task",
    "run_tests",
    "setup_task",
    "validate_many",
    "validate_task",
    "write_task",
]
