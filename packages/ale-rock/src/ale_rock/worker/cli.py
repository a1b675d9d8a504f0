"""Command-line entry of the worker: ``python -m ale_rock.worker [--config FILE] [-c key=value ...]``.

The ``ale-rock worker`` CLI command builds a ``WorkerConfig`` the same way and calls
``ale_rock.worker.server.run_worker``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

from ale_rock.worker.config import WorkerConfig
from ale_rock.worker.server import run_worker


def parse_config(argv: list[str] | None) -> WorkerConfig:
    """Build a WorkerConfig from an optional YAML file and ``-c key=value`` overrides."""
    parser = argparse.ArgumentParser(prog="ale-rock-worker")
    parser.add_argument("--config", type=Path, default=None, help="YAML file with WorkerConfig fields")
    parser.add_argument(
        "-c", "--set", dest="overrides", action="append", default=[], help="key=value override"
    )
    args = parser.parse_args(argv)
    data: dict[str, Any] = yaml.safe_load(args.config.read_text()) if args.config else {}
    for item in args.overrides:
        key, _, value = item.partition("=")
        node = data
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = yaml.safe_load(value)
    return WorkerConfig.model_validate(data)


def main(argv: list[str] | None = None) -> int:
    """Run a worker until SIGTERM."""
    return run_worker(parse_config(argv))
