import os
import stat

from ale_testlib import read, run_all, test


def want(path):
    full = os.path.join(path)
    if os.path.isdir(full):
        return {"site/secrets": 0o700, "site/uploads": 0o1777}.get(path, 0o755)
    if path.startswith("site/bin/"):
        return 0o755 if path.endswith(".sh") else 0o644
    if path.startswith("site/secrets/"):
        return 0o600
    return 0o644


def all_paths():
    out = ["site"]
    for d, dirs, files in os.walk("site"):
        out += [os.path.join(d, x) for x in dirs + files]
    return sorted(out)


CHANGED = sorted([
    "site/bin/README", "site/bin/deploy.sh", "site/bin/run.sh", "site/config.ini", "site/public/css/site.css",
    "site/public/index.html", "site/public/js", "site/secrets", "site/secrets/api.env", "site/secrets/db.pass",
    "site/uploads",
])


@test
def directory_modes():
    for p in all_paths():
        if os.path.isdir(p):
            assert stat.S_IMODE(os.stat(p).st_mode) == want(p), (p, oct(os.stat(p).st_mode))


@test
def file_modes():
    for p in all_paths():
        if os.path.isfile(p):
            assert stat.S_IMODE(os.stat(p).st_mode) == want(p), (p, oct(os.stat(p).st_mode))


@test
def nothing_created_or_deleted_and_contents_kept():
    files = [p for p in all_paths() if os.path.isfile(p)]
    assert len(files) == 10, files
    assert read("site/secrets/api.env") == "KEY=abc\n"


@test
def changed_list():
    assert [x for x in read("changed.txt").splitlines() if x.strip()] == CHANGED


run_all()
