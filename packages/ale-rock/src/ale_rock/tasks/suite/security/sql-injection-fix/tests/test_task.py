from ale_testlib import load_module, run_all, test


def db():
    m = load_module("userdb.py", "userdb")
    conn = m.connect()
    m.add_user(conn, "alice", "alice@example.com", "s3cret", "2024-01-02", admin=1)
    m.add_user(conn, "bob", "bob@example.com", "hunter2", "2024-03-04")
    m.add_user(conn, "o'brien", "ob@example.com", "pw'1", "2023-12-31")
    m.add_user(conn, "al_x", "x@example.com", "x", "2024-05-05")
    return m, conn


@test
def legitimate_behaviour_kept():
    m, c = db()
    assert m.find_users(c, "al") == [("al_x", "x@example.com"), ("alice", "alice@example.com")]
    assert m.login(c, "bob", "hunter2") == ("bob", 0)
    assert m.login(c, "bob", "wrong") is None
    assert m.list_users(c, "created DESC") == ["al_x", "bob", "alice", "o'brien"]
    assert m.list_users(c, "name") == ["al_x", "alice", "bob", "o'brien"]


@test
def quotes_in_data_work():
    m, c = db()
    assert m.login(c, "o'brien", "pw'1") == ("o'brien", 0)
    assert m.find_users(c, "o'") == [("o'brien", "ob@example.com")]


@test
def login_bypass_blocked():
    m, c = db()
    for user in ["alice' --", "alice' OR '1'='1", "' OR 1=1 --"]:
        assert m.login(c, user, "anything") is None, user


@test
def like_wildcards_literal():
    m, c = db()
    assert m.find_users(c, "%") == []
    assert m.find_users(c, "al_") == [("al_x", "x@example.com")]
    try:
        rows = m.find_users(c, "' UNION SELECT pw, email FROM users --")
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"crashed: {e}") from e
    assert rows == []


@test
def order_by_whitelisted():
    m, c = db()
    for bad in ["name; DROP TABLE users", "(SELECT pw FROM users)", "admin", "name desc, pw"]:
        try:
            m.list_users(c, bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad!r}")
    assert len(m.list_users(c, "email")) == 4


run_all()
