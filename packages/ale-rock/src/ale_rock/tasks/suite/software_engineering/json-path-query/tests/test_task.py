import json

from ale_testlib import load_module, py, read, run_all, test

DOC = json.loads(read("store.json"))


def q(path, doc=DOC):
    return load_module("jpath.py", "jpath").query(doc, path)


@test
def keys_and_indexes():
    assert q("store.books[0].title") == ["Dune"]
    assert q("store.books[-1].price") == [12.25]
    assert q("store.books[7].title") == [] and q("store.nothing") == []
    assert q("") == [DOC]


@test
def wildcards_and_slices():
    assert q("store.books[*].title") == ["Dune", "Emma", "Neuromancer"]
    assert q("store.books[1:].title") == ["Emma", "Neuromancer"]
    assert q("store.books[:1].tags[*]") == ["scifi", "classic"]
    assert q("store.*.color") == ["red"]


@test
def recursive_descent():
    assert q("..price") == [9.5, 5, 12.25, 120, 0]
    assert q("store..title") == ["Dune", "Emma", "Neuromancer"]
    assert q("..tags[0]") == ["scifi", "classic"]


@test
def nested_lists():
    assert q("m[1][0]", {"m": [[1, 2], [3, 4]]}) == [3]
    assert q("m[*][-1]", {"m": [[1, 2], [3, 4]]}) == [2, 4]


@test
def invalid_syntax_raises():
    for bad in ["store.books[", "store..", "store.books[x]", "a.[0]", "store books"]:
        try:
            q(bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad!r}")


@test
def cli_prints_compact_json_lines():
    p = py("jpath.py", "store.json", "store.books[0]")
    assert p.returncode == 0, p.stderr[-200:]
    assert json.loads(p.stdout.strip()) == DOC["store"]["books"][0]
    assert ", " not in p.stdout and ": " not in p.stdout, p.stdout


run_all()
