from ale_testlib import read, run_all, test


def lines(path):
    return [x for x in read(path).splitlines() if x.strip()]


@test
def usage_sizes_and_order():
    assert lines("usage.txt") == [
        "500000\tcache", "125310\tlog", "100001\tlib", "1\ttmp", "0\tempty"
    ], lines("usage.txt")


@test
def big_files_largest_first():
    assert lines("big_files.txt") == [
        "var/cache/pkg/a.deb", "var/cache/pkg/b.deb", "var/log/app.1.log", "var/lib/db/data.sqlite"
    ], lines("big_files.txt")


@test
def old_logs_only_dot_log():
    assert lines("old_logs.txt") == ["var/log/app.1.log", "var/log/old/kern.log"], lines("old_logs.txt")


run_all()
