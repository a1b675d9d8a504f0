from ale_testlib import py, read, run_all, test


def nxt(expr, start, n):
    p = py("cronnext.py", expr, start, str(n), timeout=20)
    assert p.returncode == 0, p.stderr[-300:]
    return p.stdout.split("\n")[:n] if p.stdout.strip() != "invalid" else ["invalid"]


@test
def steps_and_ranges():
    assert nxt("*/20 9-10 * * *", "2024-05-01 10:30", 3) == ["2024-05-01 10:40", "2024-05-02 09:00", "2024-05-02 09:20"]
    assert nxt("5-30/10 * * * *", "2024-05-01 00:00", 4) == [
        "2024-05-01 00:05", "2024-05-01 00:15", "2024-05-01 00:25", "2024-05-01 01:05"]


@test
def names_and_sunday_seven():
    assert nxt("0 12 * JAN,Mar sun", "2024-01-01 00:00", 2) == ["2024-01-07 12:00", "2024-01-14 12:00"]
    assert nxt("0 0 * * 7", "2024-06-01 00:00", 1) == ["2024-06-02 00:00"]


@test
def dom_or_dow_rule():
    # the 13th OR a Friday
    assert nxt("0 0 13 * 5", "2024-09-10 00:00", 3) == ["2024-09-13 00:00", "2024-09-20 00:00", "2024-09-27 00:00"]
    assert nxt("0 0 13 * 5", "2024-10-01 00:00", 2) == ["2024-10-04 00:00", "2024-10-11 00:00"]


@test
def leap_day_far_ahead():
    assert nxt("0 0 29 2 *", "2024-03-01 00:00", 1) == ["2028-02-29 00:00"]


@test
def invalid_expressions():
    for bad in ["60 * * * *", "* * *", "*/0 * * * *", "* * * 13 *", "a b c d e"]:
        p = py("cronnext.py", bad, "2024-01-01 00:00", "1")
        assert p.stdout.strip() == "invalid", (bad, p.stdout[:80])


@test
def upcoming_file():
    assert [x for x in read("upcoming.txt").splitlines() if x.strip()] == [
        "1: 2024-02-27 23:45", "1: 2024-02-28 00:00", "1: 2024-02-28 00:15",
        "2: 2024-02-28 09:00", "2: 2024-02-29 09:00", "2: 2024-03-01 09:00",
        "3: 2024-03-01 02:30", "3: 2024-04-01 02:30", "3: 2024-05-01 02:30",
        "4: 2024-02-29 00:00", "4: 2028-02-29 00:00", "4: 2032-02-29 00:00",
    ]


run_all()
