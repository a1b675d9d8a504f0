import os

from ale_testlib import py, read, run_all, test

HERE = os.path.dirname(os.path.abspath(__file__))

WANT = [
    "config/settings.ini:3:password_assignment",
    "config/settings.ini:6:aws_access_key",
    "deploy.key:1:private_key",
    "src/app.py:4:github_token",
    "src/app.py:5:password_assignment",
]


@test
def findings_file():
    assert [x for x in read("findings.txt").splitlines() if x.strip()] == WANT, read("findings.txt")


@test
def exit_status_reflects_findings():
    p = py("scan.py", "repo")
    assert p.returncode == 1 and p.stdout.split() == WANT, (p.returncode, p.stdout)


@test
def hidden_repo():
    root = os.path.join(HERE, "hidden")
    os.makedirs(os.path.join(root, "a"), exist_ok=True)
    with open(os.path.join(root, "a", "x.env"), "w") as f:
        f.write("Pwd=xxxxxx\nuser_passwd='abc' key=AKIAZZZZZZZZZZZZZZZZ\nPASSWORD=\nghp_" + "a" * 35 + "\n")
    with open(os.path.join(root, "bin.dat"), "wb") as f:
        f.write(b"\x00AKIAZZZZZZZZZZZZZZZZ")
    with open(os.path.join(root, "clean.txt"), "w") as f:
        f.write("nothing here\npassword = os.getenv('P')\n")
    p = py("scan.py", root)
    assert p.stdout.split() == ["a/x.env:2:aws_access_key", "a/x.env:2:password_assignment"], p.stdout


@test
def clean_dir_exit_zero():
    root = os.path.join(HERE, "clean")
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "ok.txt"), "w") as f:
        f.write("password = <set me>\n")
    p = py("scan.py", root)
    assert p.returncode == 0 and p.stdout.strip() == "", (p.returncode, p.stdout)


run_all()
