import hashlib
import hmac
import os
import re

_COMMON_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "common.txt")


def _common():
    if not os.path.exists(_COMMON_PATH):
        return set()
    return {line.strip().lower() for line in open(_COMMON_PATH) if line.strip()}


def violations(password, username=""):
    out = []
    if len(password) < 12:
        out.append("length")
    if not re.search(r"[a-z]", password):
        out.append("lower")
    if not re.search(r"[A-Z]", password):
        out.append("upper")
    if not re.search(r"[0-9]", password):
        out.append("digit")
    if not re.search(r"[^a-zA-Z0-9]", password):
        out.append("symbol")
    if len(username) >= 3 and username.lower() in password.lower():
        out.append("username")
    if re.search(r"(.)\1{3}", password):
        out.append("repeat")
    if password.lower() in _common():
        out.append("common")
    return out


def hash_password(password, salt):
    return hashlib.pbkdf2_hmac("sha256", password.encode(), bytes.fromhex(salt), 100000).hex()


def verify(password, stored):
    algo, iters, salt, digest = stored.split("$")
    if algo != "pbkdf2_sha256":
        return False
    got = hashlib.pbkdf2_hmac("sha256", password.encode(), bytes.fromhex(salt), int(iters)).hex()
    return hmac.compare_digest(got, digest)


if __name__ == "__main__":
    common = [line.strip() for line in open("common.txt") if line.strip()]
    weak = []
    for line in open("users.txt"):
        user, stored = line.strip().split(":", 1)
        if any(verify(pw, stored) for pw in common):
            weak.append(user)
    open("weak_users.txt", "w").write("".join(u + "\n" for u in sorted(weak)))
