import json
import os

from ale_testlib import py, read, run_all, test

HERE = os.path.dirname(os.path.abspath(__file__))


@test
def accounts_json_values():
    got = json.loads(read("accounts.json"))
    assert got == [
        {"id": 1, "name": "Jane Doe", "balance": 123.45, "opened": "2020-01-15", "branch": "LON"},
        {"id": 2, "name": "Bob Smith", "balance": -0.5, "opened": None, "branch": "NYC"},
        {"id": 17, "name": "Zed", "balance": 10000.0, "opened": "1999-12-31", "branch": "TKYO"},
    ], got


@test
def converter_on_other_layout():
    p = py("convert.py", os.path.join(HERE, "data2.dat"), os.path.join(HERE, "layout2.txt"))
    assert p.returncode == 0, p.stderr[-400:]
    got = json.loads(p.stdout)
    assert got == [
        {"code": "AB", "qty": 12, "price": 1.99, "when": "2024-02-29"},
        {"code": "XYZ", "qty": 99999, "price": -0.01, "when": None},
    ], got


@test
def converter_matches_saved_file():
    p = py("convert.py", "accounts.dat", "layout.txt")
    assert p.returncode == 0, p.stderr[-400:]
    assert json.loads(p.stdout) == json.loads(read("accounts.json"))


run_all()
