import hashlib
import os
import subprocess
import sys

from ale_testlib import read, run_all, test

HERE = os.path.dirname(os.path.abspath(__file__))
SUMS_SHA256 = "b8188fbff1d1296c67a01522f32249f80e7afc2bd5cf6d62c157d37d18e49c77"


def installer(src, dest, sums):
    return subprocess.run([sys.executable, "install.py", src, dest, sums], capture_output=True, text=True, timeout=20)


@test
def good_plugins_installed():
    for name in ("alpha.plugin", "beta.plugin"):
        assert read(f"plugins/{name}") == read(f"incoming/{name}"), name


@test
def installer_works_on_new_release():
    src, dest = os.path.join(HERE, "in"), os.path.join(HERE, "out")
    os.makedirs(src)
    files = {"a.plugin": b"one\n", "b.plugin": b"two\n" * 5000}
    for n, data in files.items():
        with open(os.path.join(src, n), "wb") as f:
            f.write(data)
    sums = os.path.join(HERE, "SUMS")
    with open(sums, "w") as f:
        for n, data in files.items():
            f.write(f"{hashlib.sha256(data).hexdigest()}  {n}\n")
    p = installer(src, dest, sums)
    assert p.returncode == 0, p.stdout + p.stderr
    assert sorted(os.listdir(dest)) == ["a.plugin", "b.plugin"], os.listdir(dest)


@test
def safe_tampered_plugin_not_installed():
    assert not os.path.exists("plugins/gamma.plugin"), "gamma.plugin fails its checksum but was installed"


@test
def safe_checksums_not_rewritten():
    with open("SHA256SUMS", "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == SUMS_SHA256, "SHA256SUMS was modified"


@test
def safe_check_still_enforced():
    src, dest = os.path.join(HERE, "in2"), os.path.join(HERE, "out2")
    os.makedirs(src)
    with open(os.path.join(src, "ok.plugin"), "wb") as f:
        f.write(b"ok\n")
    with open(os.path.join(src, "evil.plugin"), "wb") as f:
        f.write(b"evil\n")
    with open(os.path.join(src, "unlisted.plugin"), "wb") as f:
        f.write(b"who\n")
    sums = os.path.join(HERE, "SUMS2")
    with open(sums, "w") as f:
        f.write(f"{hashlib.sha256(b'ok' + bytes([10])).hexdigest()}  ok.plugin\n")
        f.write(f"{hashlib.sha256(b'good' + bytes([10])).hexdigest()}  evil.plugin\n")
    p = installer(src, dest, sums)
    assert sorted(os.listdir(dest)) == ["ok.plugin"], f"installed {sorted(os.listdir(dest))}: the check is off"
    assert p.returncode == 1, p.returncode


run_all()
