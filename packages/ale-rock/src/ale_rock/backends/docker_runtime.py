"""How the Rocklet gets into a Docker sandbox: bind mounts of the worker's own Python code.

The base image carries only Debian's python3 (3.11, the same minor version as the worker's
venv). Rather than baking grpcio/protobuf/ale_rock into every image (and rebuilding every image
whenever ale-rock changes), the worker's site-packages and the ale-rock/ale-proto source dirs are
bind-mounted read-only under ``/opt/ale`` and the Rocklet is started with ``python3 -I`` (isolated:
no PYTHON* variables, no user site) and an explicit ``sys.path``. Commands the Rocklet runs for
the agent therefore see a clean environment; committed images stay small; any image with a
compatible ``python3`` (glibc, 3.11) can host a Rocklet.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_BASE_IMAGE = "ale-rock-base:bookworm-py311-v1"
"""The tag ``scripts/build_base_image.sh`` builds (override with ``ALE_ROCK_BASE_IMAGE``)."""

SOCKET_DIR = "/run/ale"
"""Inside the container: the bound-in host dir holding the Rocklet's (and the egress) socket."""
ROCKLET_SOCKET_NAME = "rocklet.sock"
"""File name of the Rocklet's socket in the socket dir (host and container)."""
EGRESS_SOCKET_NAME = "egress.sock"
"""File name the Worker's EgressService socket gets in the socket dir."""
CONF_DIR = "/run/ale-conf"
"""Inside the container: the Rocklet's settings dir, bound read-only (the sandbox must not be able
to rewrite its own env or egress token); a directory, so atomic rewrites are seen."""
SETTINGS_NAME = "rocklet.json"
"""File name of the Rocklet's settings (``RockletSettings`` as JSON) in the settings dir."""
RUNTIME_ROOT = "/opt/ale"
"""Inside the container: where the worker's Python code is mounted (read-only)."""


def default_base_image() -> str:
    """The base image tag: ``$ALE_ROCK_BASE_IMAGE`` or :data:`DEFAULT_BASE_IMAGE`."""
    return os.environ.get("ALE_ROCK_BASE_IMAGE") or DEFAULT_BASE_IMAGE


@dataclass(frozen=True)
class RockletRuntime:
    """Host dirs to mount read-only and the ``sys.path`` entries they become inside."""

    mounts: tuple[tuple[str, str], ...]
    """(host path, container path) pairs, each mounted read-only."""
    sys_path: tuple[str, ...]
    """Container paths to put first on the Rocklet's ``sys.path``, in order."""

    def argv(self, module: str, args: list[str]) -> list[str]:
        """The container command that runs ``python3 -m module args`` with this runtime."""
        # The ale_rock package is registered by its search path only, so ale_rock/__init__.py (it
        # re-exports the SDK: a few hundred ms of imports) never runs inside the sandbox.
        boot = (
            "import importlib.util,runpy,sys,types\n"
            f"sys.path[:0]={list(self.sys_path)!r}\n"
            "spec=importlib.util.find_spec('ale_rock')\n"
            "pkg=types.ModuleType('ale_rock');pkg.__path__=list(spec.submodule_search_locations)\n"
            "sys.modules['ale_rock']=pkg\n"
            f"runpy.run_module({module!r},run_name='__main__',alter_sys=True)\n"
        )
        # `-c` leaves sys.argv == ['-c', *args]; run_module(alter_sys=True) rewrites argv[0].
        # -S: no site module (the image's site-packages are not the Rocklet's: every path it
        # imports from is set above), which is a few ms of every sandbox's start-up.
        return ["python3", "-I", "-S", "-c", boot, *args]


def _package_root(module_name: str) -> Path:
    """The sys.path entry a top-level package was imported from."""
    module = sys.modules.get(module_name) or __import__(module_name)
    file = getattr(module, "__file__", None)
    if file is None:  # pragma: no cover - namespace packages have no __file__
        raise RuntimeError(f"cannot locate the {module_name} package on the host")
    return Path(file).resolve().parent.parent


def discover_runtime() -> RockletRuntime:
    """Find the host's ale_rock, ale_proto and third-party site-packages for the Rocklet.

    Editable installs put ale_rock/ale_proto in their ``src`` dirs, separate from
    site-packages; a regular install puts all three in one dir, mounted once.
    """
    import grpc  # the third-party site-packages are wherever grpcio lives

    roots: list[Path] = []
    for name in ("ale_rock", "ale_proto"):
        roots.append(_package_root(name))
    roots.append(Path(grpc.__file__).resolve().parent.parent)
    mounts: list[tuple[str, str]] = []
    sys_path: list[str] = []
    seen: dict[Path, str] = {}
    for i, root in enumerate(roots):
        if root in seen:
            continue
        inside = f"{RUNTIME_ROOT}/p{i}"
        seen[root] = inside
        mounts.append((str(root), inside))
        sys_path.append(inside)
    return RockletRuntime(mounts=tuple(mounts), sys_path=tuple(sys_path))


def write_settings(path: Path, settings: dict[str, Any]) -> None:
    """Atomically (re)write the Rocklet's settings file, readable by the sandbox user."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(settings))
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
