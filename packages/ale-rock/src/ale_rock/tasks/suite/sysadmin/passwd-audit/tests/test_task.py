import json

from ale_testlib import read, run_all, test


def audit():
    return json.loads(read("audit.json"))


@test
def login_users():
    assert audit()["login_users"] == ["alice", "bob", "carol", "dave"]


@test
def uid_zero():
    assert audit()["uid_zero"] == ["root", "toor"]


@test
def empty_password():
    assert audit()["empty_password"] == ["bob", "toor"]


@test
def sudoers_include_primary_group():
    assert audit()["sudoers"] == ["alice", "bob", "carol"]


@test
def duplicate_uids():
    assert audit()["duplicate_uids"] == {"0": ["root", "toor"], "1001": ["bob", "dave"]}


run_all()
