import os

from ale_testlib import py, run_all, test

HERE = os.path.dirname(os.path.abspath(__file__))


def f(name, data):
    p = os.path.join(HERE, name)
    with open(p, "wb") as fh:
        fh.write(data)
    return p


@test
def default_counts_one_file():
    p = py("pywc.py", "sample.txt")
    assert p.returncode == 0 and p.stdout == "       3       9      56 sample.txt\n", repr(p.stdout)


@test
def flags_select_columns_in_fixed_order():
    p = py("pywc.py", "-c", "-l", "sample.txt")
    assert p.stdout == "       3      56 sample.txt\n", repr(p.stdout)
    p = py("pywc.py", "-w", "sample.txt")
    assert p.stdout == "       9 sample.txt\n", repr(p.stdout)


@test
def stdin_has_no_name():
    p = py("pywc.py", "-l", input="a\nb\n")
    assert p.stdout == "       2\n", repr(p.stdout)


@test
def multiple_files_total_and_missing():
    a = f("a.txt", b"one two\n")
    b = f("b.txt", "caf\u00e9 \t x\n\n".encode())
    p = py("pywc.py", a, os.path.join(HERE, "nope.txt"), b)
    assert p.returncode == 1, p.returncode
    assert "No such file or directory" in p.stderr and "nope.txt" in p.stderr, p.stderr
    assert p.stdout.splitlines() == [
        f"       1       2       8 {a}", f"       2       2      11 {b}", "       3       4      19 total"], p.stdout


run_all()
