python3 - <<'PY'
import os, stat
def want(p):
    if os.path.isdir(p):
        return {"site/secrets": 0o700, "site/uploads": 0o1777}.get(p, 0o755)
    if p.startswith("site/bin/"):
        return 0o755 if p.endswith(".sh") else 0o644
    if p.startswith("site/secrets/"):
        return 0o600
    return 0o644
paths = ["site"]
for d, dirs, files in os.walk("site"):
    paths += [os.path.join(d, x) for x in dirs + files]
changed = []
for p in sorted(paths):
    if stat.S_IMODE(os.lstat(p).st_mode) != want(p):
        os.chmod(p, want(p))
        changed.append(p)
open("changed.txt", "w").write("".join(c + "\n" for c in sorted(changed)))
PY
