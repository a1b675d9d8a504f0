import os
import tempfile

from ale_testlib import load_module, run_all, test


def site():
    base = os.path.abspath(tempfile.mkdtemp(dir="."))
    root = os.path.join(base, "public")
    os.makedirs(os.path.join(root, "docs"))
    os.makedirs(os.path.join(root, "empty"))
    with open(os.path.join(base, "secret.txt"), "w") as f:
        f.write("TOP SECRET")
    with open(os.path.join(root, "index.html"), "w") as f:
        f.write("home")
    with open(os.path.join(root, "docs", "a b.txt"), "w") as f:
        f.write("spaced")
    os.symlink(os.path.join(base, "secret.txt"), os.path.join(root, "leak.txt"))
    os.symlink(os.path.join(root, "index.html"), os.path.join(root, "home.html"))
    return load_module("fileserver.py", "fileserver"), root


@test
def normal_requests():
    m, root = site()
    assert m.serve(root, "/") == (200, b"home")
    assert m.serve(root, "/docs/a%20b.txt") == (200, b"spaced")
    assert m.serve(root, "/home.html") == (200, b"home")
    assert m.serve(root, "/nope.txt")[0] == 404
    assert m.serve(root, "/empty/")[0] == 404


@test
def dotdot_variants_forbidden():
    m, root = site()
    for p in ["/../secret.txt", "/docs/../../secret.txt", "/%2e%2e/secret.txt", "/%2E%2E%2Fsecret.txt",
              "/docs/%2e%2e/%2e%2e/secret.txt"]:
        status, body = m.serve(root, p)
        assert status == 403 and b"SECRET" not in body, (p, status)


@test
def absolute_backslash_nul_forbidden():
    m, root = site()
    secret = os.path.abspath(os.path.join(root, "..", "secret.txt"))
    for p in ["/..\\secret.txt", "/index.html%00.png", "/docs\\..\\..\\secret.txt", "/%5c..%5csecret.txt"]:
        status, body = m.serve(root, p)
        assert status == 403 and b"SECRET" not in body, (p, status)
    # "//abs/path": refusing it (403) or mapping it under root (404) are both safe
    status, body = m.serve(root, "//" + secret.lstrip("/"))
    assert status in (403, 404) and b"SECRET" not in body, status


@test
def symlink_escape_forbidden():
    m, root = site()
    status, body = m.serve(root, "/leak.txt")
    assert status == 403 and b"SECRET" not in body, status
    try:
        m.resolve(root, "/leak.txt")
    except ValueError:
        return
    raise AssertionError("resolve accepted an escaping symlink")


@test
def dotdot_inside_root_allowed():
    m, root = site()
    assert m.serve(root, "/docs/../index.html") == (200, b"home")


run_all()
