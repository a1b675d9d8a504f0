import os
import stat
import tempfile

from ale_testlib import run, run_all, test


def scratch():
    d = tempfile.mkdtemp(dir=".")
    for name, body in [("app.log", "a1"), ("my service.log", "s1"), ("empty.log", ""), ("notes.txt", "n")]:
        with open(os.path.join(d, name), "w") as f:
            f.write(body)
    os.chmod(os.path.join(d, "app.log"), 0o640)
    with open(os.path.join(d, "empty.log.1"), "w") as f:
        f.write("old")
    return d


def rotate(d, keep="3"):
    p = run(["bash", "rotate.sh", d, keep])
    assert p.returncode == 0, p.stderr[-300:]
    return p.stdout


def write(d, name, body):
    with open(os.path.join(d, name), "w") as f:
        f.write(body)


@test
def first_rotation():
    d = scratch()
    out = rotate(d)
    assert out.split("\n")[:2] == ["rotated app.log", "rotated my service.log"], out
    assert open(os.path.join(d, "app.log.1")).read() == "a1"
    assert open(os.path.join(d, "my service.log.1")).read() == "s1"
    assert os.path.getsize(os.path.join(d, "app.log")) == 0


@test
def keeps_permissions_and_leaves_others():
    d = scratch()
    rotate(d)
    assert stat.S_IMODE(os.stat(os.path.join(d, "app.log")).st_mode) == 0o640
    assert sorted(os.listdir(d)) == sorted(
        ["app.log", "app.log.1", "my service.log", "my service.log.1", "empty.log", "empty.log.1", "notes.txt"])
    assert open(os.path.join(d, "empty.log.1")).read() == "old"


@test
def shifting_and_keep_limit():
    d = scratch()
    for i in range(2, 6):
        rotate(d)
        write(d, "app.log", f"a{i}")
    rotate(d)
    names = sorted(n for n in os.listdir(d) if n.startswith("app.log"))
    assert names == ["app.log", "app.log.1", "app.log.2", "app.log.3"], names
    assert [open(os.path.join(d, f"app.log.{k}")).read() for k in (1, 2, 3)] == ["a5", "a4", "a3"]


@test
def empty_logs_not_rotated():
    d = scratch()
    rotate(d)
    out = rotate(d, "2")
    assert out.strip() == "", out
    assert open(os.path.join(d, "app.log.1")).read() == "a1"


run_all()
