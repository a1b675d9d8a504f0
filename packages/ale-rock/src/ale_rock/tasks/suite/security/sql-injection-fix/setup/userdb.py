"""Data access for the user directory."""

import hashlib
import sqlite3


def connect(path=":memory:"):
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE IF NOT EXISTS users(name TEXT, email TEXT, pw TEXT, created TEXT, admin INT)")
    return conn


def add_user(conn, name, email, password, created, admin=0):
    pw = hashlib.sha256(password.encode()).hexdigest()
    conn.execute(f"INSERT INTO users VALUES ('{name}', '{email}', '{pw}', '{created}', {admin})")


def find_users(conn, name_prefix):
    rows = conn.execute(f"SELECT name, email FROM users WHERE name LIKE '{name_prefix}%' ORDER BY name")
    return rows.fetchall()


def login(conn, username, password):
    pw = hashlib.sha256(password.encode()).hexdigest()
    row = conn.execute(f"SELECT name, admin FROM users WHERE name = '{username}' AND pw = '{pw}'").fetchone()
    return row


def list_users(conn, order_by="name"):
    return [r[0] for r in conn.execute(f"SELECT name FROM users ORDER BY {order_by}")]
