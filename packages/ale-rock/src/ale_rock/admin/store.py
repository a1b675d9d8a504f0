"""The durable state store: SQLite in WAL mode, every write committed before it returns.

A restarted Admin rebuilds everything from here. ``synchronous=NORMAL`` with WAL survives a
``kill -9`` of the Admin (the OS holds the log); ``durable=True`` adds fsync per commit for
machine crashes.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ale_rock.admin.state import ACTIVE, State

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sandboxes (
    id TEXT PRIMARY KEY,
    namespace TEXT NOT NULL,
    state TEXT NOT NULL,
    worker_id TEXT NOT NULL DEFAULT '',
    message TEXT NOT NULL DEFAULT '',
    spec TEXT NOT NULL,
    cpu_millis INTEGER NOT NULL,
    memory_bytes INTEGER NOT NULL,
    idle_timeout_s INTEGER NOT NULL DEFAULT 0,
    request_id TEXT NOT NULL DEFAULT '',
    create_time REAL NOT NULL,
    update_time REAL NOT NULL,
    expire_time REAL NOT NULL,
    request_hash TEXT NOT NULL DEFAULT ''  -- last: Store.__init__ appends it to older databases
);
CREATE INDEX IF NOT EXISTS sandboxes_ns ON sandboxes(namespace, state);
CREATE INDEX IF NOT EXISTS sandboxes_worker ON sandboxes(worker_id, state);
CREATE INDEX IF NOT EXISTS sandboxes_request ON sandboxes(namespace, request_id);
CREATE TABLE IF NOT EXISTS workers (
    id TEXT PRIMARY KEY,
    info TEXT NOT NULL,
    alive INTEGER NOT NULL,
    last_heartbeat REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS images (
    name TEXT PRIMARY KEY,
    sandbox_id TEXT NOT NULL,
    create_time REAL NOT NULL
);
"""


@dataclass
class SandboxRecord:
    """A sandbox as the store holds it. ``spec`` is the JSON form of the contract's SandboxSpec."""

    id: str
    namespace: str
    state: State
    spec: dict[str, Any]
    cpu_millis: int
    memory_bytes: int
    expire_time: float
    idle_timeout_s: int = 0
    worker_id: str = ""
    message: str = ""
    request_id: str = ""
    create_time: float = field(default_factory=time.time)
    update_time: float = field(default_factory=time.time)
    request_hash: str = ""
    """Fingerprint of the spec the sandbox was created with (``""`` for rows older than it)."""


@dataclass
class WorkerRecord:
    """A registered worker."""

    id: str
    address: str
    cpu_millis: int
    memory_bytes: int
    max_sandboxes: int
    backends: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    gpus: int = 0
    alive: bool = True
    last_heartbeat: float = field(default_factory=time.time)
    secret: str = field(default="", repr=False)
    """The worker credential it sent at RegisterWorker; the Admin sends it on every worker call.
    Durable (a restarted Admin keeps talking to its workers), hence the store's 0600 files."""

    def info_json(self) -> str:
        return json.dumps({
            "address": self.address, "cpu_millis": self.cpu_millis, "memory_bytes": self.memory_bytes,
            "max_sandboxes": self.max_sandboxes, "backends": self.backends, "labels": self.labels,
            "gpus": self.gpus, "secret": self.secret,
        })


@dataclass
class Usage:
    """What a set of active sandboxes holds."""

    sandboxes: int = 0
    cpu_millis: int = 0
    memory_bytes: int = 0


_COLUMNS = (
    "id, namespace, state, worker_id, message, spec, cpu_millis, memory_bytes, idle_timeout_s, "
    "request_id, create_time, update_time, expire_time, request_hash"
)


def _row_to_record(row: tuple[Any, ...]) -> SandboxRecord:
    return SandboxRecord(
        id=row[0], namespace=row[1], state=State(row[2]), worker_id=row[3], message=row[4],
        spec=json.loads(row[5]), cpu_millis=row[6], memory_bytes=row[7], idle_timeout_s=row[8],
        request_id=row[9], create_time=row[10], update_time=row[11], expire_time=row[12],
        request_hash=row[13],
    )


def _private(path: Path) -> None:
    """Create the database file 0600 (or tighten it): it holds worker credentials. SQLite gives
    its -wal and -shm files the database file's mode."""
    os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(p, 0o600)


CHECKPOINT_INTERVAL_S = 0.2
"""How often the checkpoint thread looks for new commits to move from the WAL into the database."""


def _checkpoints(path: str, store: weakref.ref[Store], stop: threading.Event) -> None:
    """Checkpoint ``path`` while ``store`` is open and has committed since the last pass."""
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
        db.execute("PRAGMA busy_timeout=5000")
        done = 0
        while not stop.wait(CHECKPOINT_INTERVAL_S):
            s = store()
            if s is None:
                return
            commits = s.commits
            del s  # hold no reference while sleeping: an unclosed Store is still collected
            if commits != done:
                with contextlib.suppress(sqlite3.Error):  # busy or closing: the next pass retries
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)")
                done = commits
    finally:
        db.close()


class Store:
    """SQLite-backed store of sandboxes, workers and committed images. Thread-safe."""

    def __init__(self, path: Path | str, durable: bool = False) -> None:
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            _private(Path(path))
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        self.commits = 0
        """Write transactions committed so far (the scale benchmark reports them per second)."""
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(sandboxes)")}
        if "request_hash" not in columns:  # a database from before the column
            self._db.execute("ALTER TABLE sandboxes ADD COLUMN request_hash TEXT NOT NULL DEFAULT ''")
        self._stop = threading.Event()
        if str(path) != ":memory:":
            # Checkpoints (copying the WAL into the database, with an fsync) run on a thread of
            # their own: SQLite's automatic ones ran inside whichever commit crossed 1,000 pages,
            # on the Admin's event loop, stalling every call for an fsync. Commits are as
            # durable as before: a commit is in the WAL when it returns; a checkpoint only moves it.
            self._db.execute("PRAGMA wal_autocheckpoint=0")
            threading.Thread(target=_checkpoints, args=(str(path), weakref.ref(self), self._stop),
                             name="store-checkpoint", daemon=True).start()

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            self._db.close()

    def _write(self, sql: str, args: Iterable[Any] = ()) -> int:
        with self._lock:
            cur = self._db.execute(sql, tuple(args))  # autocommit: committed on return
            self.commits += 1
            return cur.rowcount

    def _read(self, sql: str, args: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, tuple(args)).fetchall()

    # -- sandboxes ---------------------------------------------------------------------------
    def insert_sandbox(self, r: SandboxRecord) -> None:
        self._write(
            f"INSERT INTO sandboxes ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (r.id, r.namespace, r.state.value, r.worker_id, r.message, json.dumps(r.spec), r.cpu_millis,
             r.memory_bytes, r.idle_timeout_s, r.request_id, r.create_time, r.update_time, r.expire_time,
             r.request_hash),
        )

    def update_sandbox(self, sandbox_id: str, **changes: Any) -> None:
        """Set columns of one sandbox (state given as ``State``); bumps ``update_time``."""
        changes.setdefault("update_time", time.time())
        if isinstance(changes.get("state"), State):
            changes["state"] = changes["state"].value
        sets = ", ".join(f"{k} = ?" for k in changes)
        self._write(f"UPDATE sandboxes SET {sets} WHERE id = ?", (*changes.values(), sandbox_id))

    def get_sandbox(self, sandbox_id: str) -> SandboxRecord | None:
        rows = self._read(f"SELECT {_COLUMNS} FROM sandboxes WHERE id = ?", (sandbox_id,))
        return _row_to_record(rows[0]) if rows else None

    def find_by_request_id(self, namespace: str, request_id: str) -> SandboxRecord | None:
        rows = self._read(
            f"SELECT {_COLUMNS} FROM sandboxes WHERE namespace = ? AND request_id = ?", (namespace, request_id)
        )
        return _row_to_record(rows[0]) if rows else None

    def list_sandboxes(
        self, namespace: str | None = None, states: Iterable[State] | None = None, worker_id: str | None = None
    ) -> list[SandboxRecord]:
        where, args = [], []
        if namespace is not None:
            where.append("namespace = ?")
            args.append(namespace)
        if worker_id is not None:
            where.append("worker_id = ?")
            args.append(worker_id)
        state_list = [s.value for s in states] if states is not None else None
        if state_list is not None:
            where.append(f"state IN ({','.join('?' * len(state_list))})")
            args.extend(state_list)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = self._read(f"SELECT {_COLUMNS} FROM sandboxes {clause} ORDER BY create_time, id", args)
        return [_row_to_record(r) for r in rows]

    def cleanup_candidates(self, now: float) -> list[SandboxRecord]:
        """Sandboxes (not DELETED) past their TTL at ``now``, and running ones with an idle timeout:
        the only ones a cleanup pass acts on. Filtered here, not by parsing every row each pass."""
        rows = self._read(
            f"SELECT {_COLUMNS} FROM sandboxes WHERE state != ? AND (expire_time <= ? OR "
            "(state = ? AND idle_timeout_s > 0)) ORDER BY create_time, id",
            (State.DELETED.value, now, State.RUNNING.value),
        )
        return [_row_to_record(r) for r in rows]

    def usage(self, namespace: str | None = None, worker_id: str | None = None) -> Usage:
        """Totals of the active sandboxes of a namespace and/or worker (all when both None)."""
        where, args = [f"state IN ({','.join('?' * len(ACTIVE))})"], [s.value for s in ACTIVE]
        if namespace is not None:
            where.append("namespace = ?")
            args.append(namespace)
        if worker_id is not None:
            where.append("worker_id = ?")
            args.append(worker_id)
        row = self._read(
            "SELECT COUNT(*), COALESCE(SUM(cpu_millis),0), COALESCE(SUM(memory_bytes),0) FROM sandboxes "
            f"WHERE {' AND '.join(where)}", args,
        )[0]
        return Usage(int(row[0]), int(row[1]), int(row[2]))

    def purge_deleted(self, before: float) -> int:
        return self._write(
            "DELETE FROM sandboxes WHERE state = ? AND update_time < ?", (State.DELETED.value, before)
        )

    # -- workers -----------------------------------------------------------------------------
    def upsert_worker(self, w: WorkerRecord) -> None:
        self._write(
            "INSERT INTO workers (id, info, alive, last_heartbeat) VALUES (?,?,?,?) ON CONFLICT(id) DO "
            "UPDATE SET info = excluded.info, alive = excluded.alive, last_heartbeat = excluded.last_heartbeat",
            (w.id, w.info_json(), int(w.alive), w.last_heartbeat),
        )

    def set_worker_alive(self, worker_id: str, alive: bool) -> None:
        self._write("UPDATE workers SET alive = ? WHERE id = ?", (int(alive), worker_id))

    def list_workers(self) -> list[WorkerRecord]:
        out = []
        for wid, info, alive, hb in self._read("SELECT id, info, alive, last_heartbeat FROM workers"):
            d = json.loads(info)
            out.append(WorkerRecord(id=wid, alive=bool(alive), last_heartbeat=hb, **d))
        return out

    # -- images ------------------------------------------------------------------------------
    def add_image(self, name: str, sandbox_id: str) -> None:
        self._write(
            "INSERT OR REPLACE INTO images (name, sandbox_id, create_time) VALUES (?,?,?)",
            (name, sandbox_id, time.time()),
        )

    def has_image(self, name: str) -> bool:
        return bool(self._read("SELECT 1 FROM images WHERE name = ?", (name,)))
