import os
import re
import sys

PATTERNS = [
    ("aws_access_key", re.compile(r"\bAKIA[A-Z0-9]{16}\b")),
    ("private_key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("github_token", re.compile(r"\bghp_[A-Za-z0-9]{36}\b")),
]
ASSIGN = re.compile(r"(?i)(?<![A-Za-z0-9])(?:[A-Za-z0-9]+_)*(?:password|passwd|pwd)\s*[=:]\s*(\"[^\"]*\"|'[^']*'|<[^>]*>|\$\{[^}]*\}|[^\s\"']+)")
PLACEHOLDER = re.compile(r"(?i)^(|changeme|<.*>|\$\{.*\}|x+|os\.environ\[.*|os\.getenv\(.*)$")


def scan_line(line):
    kinds = [k for k, rx in PATTERNS if rx.search(line)]
    for m in ASSIGN.finditer(line):
        val = m.group(1).strip("\"'")
        if not PLACEHOLDER.match(val):
            kinds.append("password_assignment")
            break
    return kinds


def main(root):
    found = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x != ".git"]
        for name in files:
            path = os.path.join(d, name)
            data = open(path, "rb").read()
            if b"\x00" in data:
                continue
            for n, line in enumerate(data.decode(errors="replace").splitlines(), 1):
                for kind in scan_line(line):
                    found.append((os.path.relpath(path, root), n, kind))
    order = {k: i for i, k in enumerate(["aws_access_key", "private_key", "github_token", "password_assignment"])}
    for rel, n, kind in sorted(found, key=lambda f: (f[0], f[1], order[f[2]])):
        print(f"{rel}:{n}:{kind}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
