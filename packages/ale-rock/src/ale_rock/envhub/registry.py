"""The durable spec registry: SQLite (WAL, one transaction per write), specs and build records.
(Not :mod:`ale_rock.envs.catalog`, which maps env ids to the classes that implement them.)

Builds are keyed by (spec hash, backend), not by name: two names with the same content share a
build, and re-registering a spec with a changed content makes a new hash (a new build) while the
old build stays cached for whoever still has the old content.
"""

from __future__ import annotations

import builtins
import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from ale_rock.envhub.spec import EnvSpecModel, validate_spec

_SCHEMA = """
CREATE TABLE IF NOT EXISTS specs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    spec_json TEXT NOT NULL,
    spec_hash TEXT NOT NULL,
    register_time REAL NOT NULL,
    UNIQUE (name, version)
);
CREATE TABLE IF NOT EXISTS builds (
    spec_hash TEXT NOT NULL,
    backend TEXT NOT NULL,
    state TEXT NOT NULL,
    artifact TEXT NOT NULL,
    log_tail TEXT NOT NULL,
    update_time REAL NOT NULL,
    PRIMARY KEY (spec_hash, backend)
);
"""
LOG_TAIL_CHARS = 8000


class BuildStatus(str, Enum):
    """State of one (spec hash, backend) build; mirrors ``ale.v1.BuildState``."""

    NONE = "none"
    BUILDING = "building"
    READY = "ready"
    FAILED = "failed"


@dataclass(frozen=True)
class StoredSpec:
    """A registered spec with its hash and registration time (unix seconds)."""

    spec: EnvSpecModel
    spec_hash: str
    register_time: float


@dataclass(frozen=True)
class BuildRecord:
    """The last build of a spec hash for a backend: its state and what it produced."""

    spec_hash: str
    backend: str
    state: BuildStatus
    artifact: str
    """What a sandbox uses: the image tag (docker) or the rootfs dir (local)."""
    log_tail: str
    update_time: float


class Registry:
    """Specs and builds in one SQLite file; safe to share between threads."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        # A build in flight when the process died will never finish: mark it failed on open.
        self._db.execute(
            "UPDATE builds SET state=?, log_tail=log_tail || ? WHERE state=?",
            (BuildStatus.FAILED.value, "\n[interrupted: the EnvHub restarted during the build]", BuildStatus.BUILDING.value),
        )

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    # -- specs ------------------------------------------------------------------------------------

    def put(self, spec: EnvSpecModel) -> StoredSpec:
        """Register or replace ``name:version``; it becomes the latest version of ``name``."""
        stored = StoredSpec(spec, spec.spec_hash(), time.time())
        with self._lock:
            # INSERT OR REPLACE deletes the old row, so the new one gets a fresh seq (= latest).
            self._db.execute(
                "INSERT OR REPLACE INTO specs (name, version, spec_json, spec_hash, register_time) VALUES (?,?,?,?,?)",
                (spec.name, spec.version, spec.model_dump_json(), stored.spec_hash, stored.register_time),
            )
        return stored

    def get(self, name: str, version: str = "") -> StoredSpec | None:
        """One spec; ``version=""`` means the latest registered."""
        with self._lock:
            if version:
                row = self._db.execute(
                    "SELECT spec_json, spec_hash, register_time FROM specs WHERE name=? AND version=?", (name, version)
                ).fetchone()
            else:
                row = self._db.execute(
                    "SELECT spec_json, spec_hash, register_time FROM specs WHERE name=? ORDER BY seq DESC LIMIT 1",
                    (name,),
                ).fetchone()
        return None if row is None else _stored(row)

    def list(self, offset: int = 0, limit: int = 1000) -> tuple[builtins.list[StoredSpec], int]:
        """Specs sorted by (name, version), one page, and the total count."""
        with self._lock:
            rows = self._db.execute(
                "SELECT spec_json, spec_hash, register_time FROM specs ORDER BY name, version LIMIT ? OFFSET ?",
                (limit, offset),
            ).fetchall()
            total = self._db.execute("SELECT COUNT(*) FROM specs").fetchone()[0]
        return [_stored(r) for r in rows], int(total)

    def delete(self, name: str, version: str = "") -> builtins.list[StoredSpec]:
        """Delete one version (or every version with ``version=""``); returns what was deleted."""
        with self._lock:
            where, args = ("name=? AND version=?", (name, version)) if version else ("name=?", (name,))
            rows = self._db.execute(
                f"SELECT spec_json, spec_hash, register_time FROM specs WHERE {where}", args
            ).fetchall()
            self._db.execute(f"DELETE FROM specs WHERE {where}", args)
        return [_stored(r) for r in rows]

    def hash_in_use(self, spec_hash: str) -> bool:
        """Whether any registered spec still has this hash."""
        with self._lock:
            return self._db.execute("SELECT 1 FROM specs WHERE spec_hash=? LIMIT 1", (spec_hash,)).fetchone() is not None

    # -- builds -----------------------------------------------------------------------------------

    def set_build(self, spec_hash: str, backend: str, state: BuildStatus, artifact: str = "", log: str = "") -> None:
        """Record a build's state (the log is kept as a tail)."""
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO builds VALUES (?,?,?,?,?,?)",
                (spec_hash, backend, state.value, artifact, log[-LOG_TAIL_CHARS:], time.time()),
            )

    def build(self, spec_hash: str, backend: str) -> BuildRecord | None:
        """The build record of (hash, backend), if any."""
        with self._lock:
            row = self._db.execute(
                "SELECT spec_hash, backend, state, artifact, log_tail, update_time FROM builds "
                "WHERE spec_hash=? AND backend=?",
                (spec_hash, backend),
            ).fetchone()
        return None if row is None else BuildRecord(row[0], row[1], BuildStatus(row[2]), row[3], row[4], row[5])

    def builds_of(self, spec_hash: str) -> dict[str, BuildStatus]:
        """Build state per backend for a hash."""
        with self._lock:
            rows = self._db.execute("SELECT backend, state FROM builds WHERE spec_hash=?", (spec_hash,)).fetchall()
        return {b: BuildStatus(s) for b, s in rows}

    def drop_builds(self, spec_hash: str) -> builtins.list[BuildRecord]:
        """Forget every build of a hash; returns them (so their artifacts can be removed)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT spec_hash, backend, state, artifact, log_tail, update_time FROM builds WHERE spec_hash=?",
                (spec_hash,),
            ).fetchall()
            self._db.execute("DELETE FROM builds WHERE spec_hash=?", (spec_hash,))
        return [BuildRecord(r[0], r[1], BuildStatus(r[2]), r[3], r[4], r[5]) for r in rows]


def _stored(row: tuple[str, str, float]) -> StoredSpec:
    return StoredSpec(validate_spec(json.loads(row[0]), "registry"), row[1], row[2])
