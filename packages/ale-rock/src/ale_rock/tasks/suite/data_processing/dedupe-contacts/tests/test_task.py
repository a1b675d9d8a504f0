import csv
import os

from ale_testlib import py, read, run_all, test

HERE = os.path.dirname(os.path.abspath(__file__))


def rows(path):
    return list(csv.DictReader(read(path).splitlines()))


@test
def clean_file_dedupes_given_contacts():
    r = rows("contacts_clean.csv")
    assert [x["email"] for x in r] == ["ada@example.com", "alan@turing.org", "gracehopper@gmail.com"], r


@test
def keeps_latest_row_and_digits_only_phone():
    r = {x["email"]: x for x in rows("contacts_clean.csv")}
    assert r["ada@example.com"]["name"] == "Ada L." and r["ada@example.com"]["phone"] == "5550102001"
    assert r["gracehopper@gmail.com"]["name"] == "G. Hopper" and r["gracehopper@gmail.com"]["phone"] == "5550103001"


@test
def program_on_hidden_input():
    out = os.path.join(HERE, "out.csv")
    p = py("dedupe.py", os.path.join(HERE, "hidden.csv"), out)
    assert p.returncode == 0, p.stderr[-500:]
    r = rows(out)
    assert [(x["email"], x["name"], x["phone"]) for x in r] == [
        ("bob@gmail.com", "Bobby", "456"),
        ("d.o.t@other.com", "Dot", "7"),
        ("z@x.io", "Z Two", "456"),
    ], r


@test
def header_preserved():
    assert read("contacts_clean.csv").splitlines()[0].strip() == "name,email,phone,updated"


run_all()
