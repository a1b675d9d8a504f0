"""Which container is which sandbox: kept by the backend, persisted next to each sandbox.

A cold start names its container ``ale-<worker>-<sandbox_id>``; a warm slot's container keeps its
slot name (``ale-<worker>-_pool-...``) when it is claimed, because renaming a running container
costs the engine hundreds of milliseconds. So the backend maps sandbox id -> container itself:

- every container's host dir holds ``container.json`` (its name key, id and image name), written
  when the container is created, off the claim's path;
- a claim renames the slot's host dir ``<root>/_pool-...`` to ``<root>/<sandbox_id>`` (one
  ``rename(2)``): from then on the dir's name is the sandbox id and its file says which container;
- a restarted worker rebuilds the map from the host dirs alone (no engine call), so ``list``,
  ``handle`` and ``reap_orphans`` find claimed slots again; a dir without the file (a crash between
  create and write, or a sandbox of an older version) means the container named after the dir.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ale_rock.backends.docker_pool import POOL_PREFIX
from ale_rock.backends.docker_runtime import SETTINGS_NAME

ENTRY_FILE = "container.json"
"""In each host dir (not bound into the container): the container's key, id and image."""


@dataclass(frozen=True)
class Entry:
    """One sandbox's container: ``key`` names it (``ale-<worker>-<key>``); "" while starting."""

    key: str
    container_id: str = ""
    image: str = ""

    @property
    def starting(self) -> bool:
        """A reservation: the sandbox's start has not finished."""
        return not self.key


_STARTING = Entry(key="")


def write_entry(host_dir: Path, entry: Entry) -> None:
    """Persist ``entry`` atomically in ``host_dir``."""
    tmp = host_dir / (ENTRY_FILE + ".tmp")
    tmp.write_text(json.dumps(asdict(entry)))
    os.replace(tmp, host_dir / ENTRY_FILE)


def read_entry(host_dir: Path) -> Entry:
    """The persisted entry of ``host_dir``, or the container named after the dir."""
    try:
        data = json.loads((host_dir / ENTRY_FILE).read_text())
        return Entry(key=str(data["key"]), container_id=str(data.get("container_id", "")),
                     image=str(data.get("image", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return Entry(key=host_dir.name)


class SandboxIndex:
    """sandbox id -> :class:`Entry`, in memory; the host dirs are its persistence."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._entries: dict[str, Entry] = {}
        self.load()

    def load(self) -> None:
        """Rebuild from the host dirs (every dir not a warm slot is a sandbox)."""
        entries: dict[str, Entry] = {}
        with contextlib.suppress(OSError):
            for d in self.root.iterdir():
                if d.is_dir() and not d.name.startswith(POOL_PREFIX):
                    entries[d.name] = read_entry(d)
        with self._lock:
            self._entries = entries

    def reserve(self, sandbox_id: str) -> bool:
        """Claim ``sandbox_id`` for a start; False when it is already known (or starting)."""
        with self._lock:
            if sandbox_id in self._entries:
                return False
            self._entries[sandbox_id] = _STARTING
            return True

    def get(self, sandbox_id: str) -> Entry | None:
        """The entry of ``sandbox_id`` (a reservation while starting), or None."""
        with self._lock:
            return self._entries.get(sandbox_id)

    def put(self, sandbox_id: str, entry: Entry) -> None:
        """Record a started sandbox."""
        with self._lock:
            self._entries[sandbox_id] = entry

    def pop(self, sandbox_id: str) -> Entry | None:
        """Forget ``sandbox_id``; its entry, or None."""
        with self._lock:
            return self._entries.pop(sandbox_id, None)

    def items(self) -> Iterator[tuple[str, Entry]]:
        """A snapshot of (sandbox id, entry) pairs."""
        with self._lock:
            return iter(list(self._entries.items()))


_NAMESPACE_FILE = "namespace"
"""In the sandbox's host dir (not bound into it): the owning namespace, for commits."""


def _write_namespace(host_dir: Path, namespace: str) -> None:
    (host_dir / _NAMESPACE_FILE).write_text(namespace)


def _read_namespace(host_dir: Path) -> str:
    try:
        return (host_dir / _NAMESPACE_FILE).read_text()
    except OSError:
        return ""


def _read_settings(host_dir: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((host_dir / "conf" / SETTINGS_NAME).read_text())
    except (OSError, ValueError):
        return {}
    return data


def _dir_size(path: Path) -> int:
    total = 0
    for p in path.rglob("*"):
        with contextlib.suppress(OSError):
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
    return total
