"""Data access for the user directory."""

import hashlib
import sqlite3

_ORDER = {"name", "email", "created"}


def connect(path=":memory:"):
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE IF NOT EXISTS users(name TEXT, email TEXT, pw TEXT, created TEXT, admin INT)")
    return conn


def add_user(conn, name, email, password, created, admin=0):
    pw = hashlib.sha256(password.encode()).hexdigest()
    conn.execute("INSERT INTO users VALUES (?, ?, ?, ?, ?)", (name, email, pw, created, int(admin)))


def find_users(conn, name_prefix):
    escaped = name_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    rows = conn.execute(
        "SELECT name, email FROM users WHERE name LIKE ? ESCAPE '\\' ORDER BY name", (escaped + "%",)
    )
    return rows.fetchall()


def login(conn, username, password):
    pw = hashlib.sha256(password.encode()).hexdigest()
    return conn.execute("SELECT name, admin FROM users WHERE name = ? AND pw = ?", (username, pw)).fetchone()


def list_users(conn, order_by="name"):
    parts = order_by.split()
    if not parts or len(parts) > 2 or parts[0].lower() not in _ORDER or (len(parts) == 2 and parts[1].lower() != "desc"):
        raise ValueError(f"invalid order_by {order_by!r}")
    clause = parts[0].lower() + (" DESC" if len(parts) == 2 else "")
    return [r[0] for r in conn.execute(f"SELECT name FROM users ORDER BY {clause}")]
