import json

from ale_testlib import read, run_all, test


def data():
    return json.loads(read("activity.json"))


@test
def users_present():
    assert sorted(data()) == ["ana", "bo", "cy"], sorted(data())


@test
def event_counts():
    assert {u: v["events"] for u, v in data().items()} == {"ana": 3, "bo": 3, "cy": 1}


@test
def first_and_last():
    d = data()
    assert d["ana"]["first"] == "2024-02-29T07:00:00Z" and d["ana"]["last"] == "2024-03-01T08:05:10Z", d["ana"]
    assert d["bo"]["first"] == "2024-03-01T09:00:00Z" and d["bo"]["last"] == "2024-03-01T10:00:00Z", d["bo"]


@test
def distinct_types_sorted():
    assert data()["bo"]["types"] == ["download", "login", "logout"]
    assert data()["ana"]["types"] == ["login", "upload"]


@test
def bad_lines_reported():
    assert read("bad_lines.txt").split() == ["4", "7", "9"], read("bad_lines.txt")


run_all()
