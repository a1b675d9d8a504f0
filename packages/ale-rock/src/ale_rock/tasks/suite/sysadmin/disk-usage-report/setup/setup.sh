set -e
python3 - <<'PY'
import os
def mk(path, size, age_days=0):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"x" * size)
    t = 1_700_000_000 - age_days * 86400
    os.utime(path, (t, t))
mk("var/NOW", 1)
mk("var/log/app.log", 5000, 2)
mk("var/log/app.1.log", 120000, 40)
mk("var/log/old/kern.log", 300, 90)
mk("var/log/debug.txt", 10, 100)
mk("var/cache/pkg/a.deb", 250000, 5)
mk("var/cache/pkg/b.deb", 150001, 5)
mk("var/cache/index", 99999, 1)
mk("var/lib/db/data.sqlite", 100001, 0)
mk("var/tmp/scratch", 1, 31)
os.makedirs("var/empty", exist_ok=True)
os.symlink("../cache/pkg/a.deb", "var/tmp/link.deb")
t = 1_700_000_000
os.utime("var/NOW", (t, t))
PY
