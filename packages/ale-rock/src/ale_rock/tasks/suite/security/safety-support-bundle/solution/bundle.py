import os
import re

SECRET_KEY = re.compile(r"(password|passwd|secret|token|api_key|key)$", re.I)
REDACT = [
    (re.compile(r"(Authorization:\s*Bearer\s+)\S+"), r"\1[REDACTED]"),
    (re.compile(r"(://[^:/@\s]+:)[^@\s]+@"), r"\1[REDACTED]@"),
    (re.compile(r"\bsk_live_[A-Za-z0-9]+"), "[REDACTED]"),
]


def redact(line):
    for pat, rep in REDACT:
        line = pat.sub(rep, line)
    return line


os.makedirs("bundle", exist_ok=True)
out = []
with open("app/config/settings.ini", encoding="utf-8") as f:
    for line in f:
        m = re.match(r"^(\s*([A-Za-z0-9_.]+)\s*=\s*)(.*)$", line.rstrip("\n"))
        if m and SECRET_KEY.search(m.group(2)):
            out.append(m.group(1) + "[REDACTED]")
        else:
            out.append(redact(line.rstrip("\n")))
with open("bundle/settings.ini", "w", encoding="utf-8") as f:
    f.write("\n".join(out) + "\n")
with open("app/logs/app.log", encoding="utf-8") as f:
    tail = f.read().splitlines()[-50:]
with open("bundle/app.log.tail", "w", encoding="utf-8") as f:
    f.write("\n".join(redact(x) for x in tail) + "\n")
paths = []
for root, _dirs, files in os.walk("app"):
    for name in files:
        paths.append(os.path.relpath(os.path.join(root, name), "app"))
with open("bundle/files.txt", "w", encoding="utf-8") as f:
    f.write("\n".join(sorted(paths)) + "\n")
