python3 - <<'PY'
import hashlib
def h(pw, salt):
    return f"pbkdf2_sha256$2000${salt}${hashlib.pbkdf2_hmac('sha256', pw.encode(), bytes.fromhex(salt), 2000).hex()}"
users = [("alice", "Tr0ub4dor&3xyz", "a1b2"), ("bob", "letmein", "c3d4"), ("carol", "Summer2024!", "e5f6"),
         ("dave", "correct horse battery staple", "0708")]
open("users.txt", "w").write("".join(f"{u}:{h(p, s)}\n" for u, p, s in users))
PY
