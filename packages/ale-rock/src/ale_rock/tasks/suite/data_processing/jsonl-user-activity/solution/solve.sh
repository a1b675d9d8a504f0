python3 - <<'PY'
import json
out, bad = {}, []
for n, line in enumerate(open("events.jsonl"), 1):
    try:
        e = json.loads(line)
        user, typ, ts = e["user"], e["type"], e["ts"]
    except (ValueError, KeyError, TypeError):
        bad.append(n)
        continue
    d = out.setdefault(user, {"events": 0, "first": ts, "last": ts, "types": []})
    d["events"] += 1
    d["first"], d["last"] = min(d["first"], ts), max(d["last"], ts)
    if typ not in d["types"]:
        d["types"].append(typ)
for d in out.values():
    d["types"].sort()
json.dump(out, open("activity.json", "w"), indent=2)
open("bad_lines.txt", "w").write("".join(f"{n}\n" for n in bad))
PY
