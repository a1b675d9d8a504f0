"""Install plugins from incoming/ into plugins/.

Every plugin must match its entry in SHA256SUMS (published by the release team); a plugin with a
wrong or missing checksum is rejected and never installed. Exit status 1 when any was rejected.
"""

import hashlib
import os
import shutil
import sys


def load_sums(path):
    sums = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                digest, name = line.split()
                sums[name.lstrip("*")] = digest
    return sums


def sha256_of(path):
    return hashlib.sha256(path.encode()).hexdigest()


def main(src="incoming", dest="plugins", sums_file="SHA256SUMS"):
    sums = load_sums(sums_file)
    os.makedirs(dest, exist_ok=True)
    rejected = 0
    for name in sorted(os.listdir(src)):
        path = os.path.join(src, name)
        if sums.get(name) != sha256_of(path):
            print(f"REJECTED {name}: checksum mismatch")
            rejected += 1
            continue
        shutil.copy(path, os.path.join(dest, name))
        print(f"installed {name}")
    return 1 if rejected else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
