import csv

from ale_testlib import read, run_all, test


def rows():
    return list(csv.reader(read("summary.csv").splitlines()))


@test
def header_is_exact():
    assert rows()[0] == ["region", "total", "orders"], rows()[0]


@test
def regions_normalized_and_sorted():
    regions = [r[0] for r in rows()[1:]]
    assert regions == ["east", "north", "south", "west"], regions


@test
def totals_ignore_bad_amounts_and_duplicates():
    got = {r[0]: r[1] for r in rows()[1:]}
    assert got == {"east": "99.99", "north": "150.00", "south": "95.25", "west": "200.01"}, got


@test
def order_counts():
    got = {r[0]: r[2] for r in rows()[1:]}
    assert got == {"east": "1", "north": "3", "south": "2", "west": "2"}, got


run_all()
