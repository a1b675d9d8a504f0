import os
import tempfile

from ale_testlib import run, run_all, test

FILES = ["a.txt", "notes/b.md", "my docs/c d.txt", "-dash.txt", "deep/er/e.md", "x.log", "y.txt.bak", "z.MD"]
WANT = {"a.txt", "notes/b.md", "my docs/c d.txt", "-dash.txt", "deep/er/e.md"}


def make_tree(root):
    for rel in FILES:
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write("content of " + rel)


def backup():
    tmp = tempfile.mkdtemp(dir=".")
    src, dest = os.path.join(tmp, "src dir"), os.path.join(tmp, "out")
    make_tree(src)
    p = run(["bash", "backup.sh", src, dest])
    got = set()
    for d, _, files in os.walk(dest):
        for f in files:
            got.add(os.path.relpath(os.path.join(d, f), dest))
    return p, got, src, dest


@test
def copies_exactly_the_wanted_files():
    p, got, _, _ = backup()
    assert got == WANT, (sorted(got), p.stderr[-300:])


@test
def contents_preserved():
    _, got, src, dest = backup()
    for rel in WANT & got:
        assert open(os.path.join(dest, rel)).read() == "content of " + rel
    assert got >= WANT


@test
def reports_count():
    p, _, _, _ = backup()
    assert p.stdout.strip().endswith("backed up 5 files"), p.stdout[-200:]


@test
def glob_not_expanded_in_cwd():
    open("trap.txt", "w").write("x")
    try:
        p, got, _, _ = backup()
        assert got == WANT, sorted(got)
    finally:
        os.remove("trap.txt")


run_all()
