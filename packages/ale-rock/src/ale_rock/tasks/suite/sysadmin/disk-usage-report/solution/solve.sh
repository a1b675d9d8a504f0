python3 - <<'PY'
import os
sizes, files = {}, []
for top in sorted(os.listdir("var")):
    p = os.path.join("var", top)
    if not os.path.isdir(p) or os.path.islink(p):
        continue
    total = 0
    for d, _, fs in os.walk(p):
        for f in fs:
            fp = os.path.join(d, f)
            if os.path.isfile(fp) and not os.path.islink(fp):
                total += os.path.getsize(fp)
    sizes[top] = total
for d, _, fs in os.walk("var"):
    for f in fs:
        fp = os.path.join(d, f)
        if os.path.isfile(fp) and not os.path.islink(fp):
            files.append(fp)
now = os.path.getmtime("var/NOW")
with open("usage.txt", "w") as f:
    for name, s in sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0])):
        f.write(f"{s}\t{name}\n")
big = sorted((p for p in files if os.path.getsize(p) > 100000), key=lambda p: (-os.path.getsize(p), p))
open("big_files.txt", "w").write("".join(p + "\n" for p in big))
old = sorted(p for p in files if p.startswith("var/log/") and p.endswith(".log") and os.path.getmtime(p) < now - 30 * 86400)
open("old_logs.txt", "w").write("".join(p + "\n" for p in old))
PY
