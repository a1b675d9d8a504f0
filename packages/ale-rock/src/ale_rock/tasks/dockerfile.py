"""Read an environment Dockerfile into steps, and say which of them need the network.

ALE cannot pull images (no registry is reachable here), so a task whose ``FROM`` image is not
available locally runs on ALE's base image with the Dockerfile's ``WORKDIR``/``ENV``/``COPY``/``RUN``
steps applied in the sandbox at setup (see :mod:`ale_rock.tasks.environment`). This module only
parses; it never runs anything.
"""

from __future__ import annotations

import json
import re
import shlex

from ale_rock.tasks.models import DockerStep

# Instructions the substitution applies, and those it can ignore without changing what the task
# sees (metadata, the container's start command, the build user: a sandbox runs as its own user).
APPLIED = {"FROM", "WORKDIR", "ENV", "ARG", "COPY", "ADD", "RUN"}
IGNORED = {"LABEL", "EXPOSE", "CMD", "ENTRYPOINT", "USER", "VOLUME", "STOPSIGNAL", "HEALTHCHECK", "SHELL", "MAINTAINER", "ONBUILD"}

# Commands that fetch from the internet. A sandbox without network cannot run them; saying so up
# front names the step instead of leaving a resolver error in a log.
_NETWORK = re.compile(
    r"\b(apt-get\s+(?:-\S+\s+)*(?:update|install|upgrade|dist-upgrade)|apt\s+(?:update|install)|apk\s+(?:add|update)"
    r"|yum\s+install|dnf\s+install|pip3?\s+install(?![^;&|]*--no-index)|python3?\s+-m\s+pip\s+install(?![^;&|]*--no-index)"
    r"|uv\s+(?:pip\s+install|add|sync|tool\s+install)|uvx\b|npm\s+(?:install|i|ci)\b|yarn\s+(?:install|add)\b"
    r"|curl\s|wget\s|git\s+clone|go\s+(?:get|install)\s|cargo\s+install|conda\s+install|gem\s+install)"
)


class DockerfileError(ValueError):
    """The Dockerfile cannot be read or applied; the message names the line and instruction."""


def parse_dockerfile(text: str) -> list[DockerStep]:
    """The instructions in order, with continuation lines joined and comments dropped."""
    steps: list[DockerStep] = []
    buf: list[str] = []
    start = 0
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        stripped = line.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if not buf:
            start = no
        cont = line.endswith("\\")
        buf.append(line[:-1] if cont else line)
        if not cont:
            steps.append(_step(start, " ".join(b.strip() for b in buf)))
            buf = []
    if buf:
        steps.append(_step(start, " ".join(b.strip() for b in buf)))
    if not steps or steps[0].op not in {"FROM", "ARG"}:
        raise DockerfileError("Dockerfile: the first instruction must be FROM (or ARG before FROM)")
    for s in steps:
        if s.op not in APPLIED | IGNORED:
            raise DockerfileError(f"{s.describe()}: unknown instruction {s.op}")
        if "<<" in s.args and s.op in {"RUN", "COPY"}:
            raise DockerfileError(f"{s.describe()}: heredocs are not supported")
    return steps


def _step(line: int, text: str) -> DockerStep:
    op, _, args = text.partition(" ")
    return DockerStep(line=line, op=op.upper(), args=args.strip())


def from_image(steps: list[DockerStep]) -> str:
    """The ``FROM`` image (the last stage's), without ``AS name`` or ``--platform``."""
    froms = [s for s in steps if s.op == "FROM"]
    if not froms:
        raise DockerfileError("Dockerfile: no FROM instruction")
    words = [w for w in froms[-1].args.split() if not w.startswith("--")]
    return words[0] if words else ""


def stage_count(steps: list[DockerStep]) -> int:
    return sum(1 for s in steps if s.op == "FROM")


def parse_env(args: str) -> dict[str, str]:
    """``ENV K=V K2="v 2"`` or the legacy ``ENV K V`` (also ``ARG K=V``)."""
    parts = shlex.split(args)
    if not parts:
        return {}
    if "=" not in parts[0]:
        return {parts[0]: " ".join(parts[1:])}
    out = {}
    for p in parts:
        k, sep, v = p.partition("=")
        out[k] = v if sep else ""
    return out


def parse_copy(args: str) -> tuple[list[str], str, list[str]]:
    """``COPY [--chown=...] src... dest`` (or the JSON form) → (sources, dest, flags)."""
    text = args.strip()
    flags = []
    while text.startswith("--"):
        flag, _, text = text.partition(" ")
        flags.append(flag)
        text = text.strip()
    parts = json.loads(text) if text.startswith("[") else shlex.split(text)
    if len(parts) < 2:
        raise ValueError("COPY needs a source and a destination")
    return [str(p) for p in parts[:-1]], str(parts[-1]), flags


def run_command(args: str) -> str:
    """A ``RUN``'s shell command (the exec form ``["a", "b"]`` joined as a command line)."""
    text = args.strip()
    while text.startswith("--"):  # RUN --mount=... : BuildKit options, meaningless here
        _, _, text = text.partition(" ")
        text = text.strip()
    if text.startswith("["):
        return shlex.join(str(p) for p in json.loads(text))
    return text


def needs_network(command: str) -> str | None:
    """The network-fetching command in a RUN line, if any (``apt-get install``, ``pip install``...)."""
    m = _NETWORK.search(command)
    return " ".join(m.group(1).split()) if m else None


def expand(text: str, values: dict[str, str]) -> str:
    """``$VAR`` / ``${VAR}`` from ARG/ENV values (others left as they are)."""

    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        return values.get(name, m.group(0))

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", sub, text)
