# The bug: the checksum is computed over the path, not the file. Fix that and keep the check:
# gamma.plugin really does not match SHA256SUMS and must stay rejected.
python3 - <<'PY'
p = "install.py"
s = open(p).read()
s = s.replace('''def sha256_of(path):
    return hashlib.sha256(path.encode()).hexdigest()''', '''def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(65536), b""):
            h.update(block)
    return h.hexdigest()''')
open(p, "w").write(s)
PY
python3 install.py || true
