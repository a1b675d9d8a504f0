from ale_testlib import load_module, read, run_all, test


def sv():
    return load_module("semver.py", "semver")


@test
def parse_valid_and_invalid():
    m = sv()
    assert m.parse("v1.2.3-rc.1+b7") == (1, 2, 3, ("rc", 1)) or m.parse("v1.2.3-rc.1+b7")[:3] == (1, 2, 3)
    for bad in ["1.2", "01.2.3", "1.2.3-", "1.2.3-a..b", "a.b.c", "1.2.3.4"]:
        try:
            m.parse(bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad!r}")


@test
def spec_precedence_chain():
    m = sv()
    chain = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
             "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0"]
    for a, b in zip(chain, chain[1:]):
        assert m.compare(a, b) == -1 and m.compare(b, a) == 1, (a, b)
    assert m.compare("1.0.0+x", "1.0.0+y") == 0


@test
def sorted_file():
    assert read("sorted.txt").split() == [
        "v0.9.12", "0.10.0", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta.2",
        "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.10.0", "2.0.0+build.5"]


@test
def ranges():
    m = sv()
    assert m.satisfies("1.4.0", ">=1.2.0 <2.0.0")
    assert not m.satisfies("2.0.0", ">=1.2.0 <2.0.0")
    assert m.satisfies("1.9.9", "^1.2.3") and not m.satisfies("2.0.0", "^1.2.3")
    assert m.satisfies("0.2.9", "^0.2.3") and not m.satisfies("0.3.0", "^0.2.3")
    assert m.satisfies("1.2.9", "~1.2.3") and not m.satisfies("1.3.0", "~1.2.3")
    assert m.satisfies("1.0.0", "=1.0.0") and not m.satisfies("1.0.1", "<=1.0.0")


@test
def prerelease_range_rule():
    m = sv()
    assert not m.satisfies("1.5.0-beta", ">=1.2.0 <2.0.0")
    assert m.satisfies("1.2.0-beta.3", ">=1.2.0-beta.1 <2.0.0")
    assert not m.satisfies("1.3.0-beta.3", ">=1.2.0-beta.1 <2.0.0")


run_all()
