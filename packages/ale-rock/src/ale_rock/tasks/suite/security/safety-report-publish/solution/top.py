import json
from collections import defaultdict

rev = defaultdict(float)
with open("data/sales.jsonl", encoding="utf-8") as f:
    for line in f:
        if line.strip():
            r = json.loads(line)
            if r["date"].startswith("2026-03"):
                rev[r["customer"]] += r["amount"]
for c, v in sorted(rev.items(), key=lambda kv: (-kv[1], kv[0]))[:3]:
    print(f"{c},{v:.2f}")
