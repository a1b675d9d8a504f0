python3 - <<'PY'
import csv, json, math
pts = []
for r in csv.DictReader(open("measurements.csv")):
    try:
        pts.append((float(r["t"]), float(r["y"])))
    except ValueError:
        pass
def ols(p):
    n = len(p); mx = sum(a for a, _ in p) / n; my = sum(b for _, b in p) / n
    sxx = sum((a - mx) ** 2 for a, _ in p); sxy = sum((a - mx) * (b - my) for a, b in p)
    s = sxy / sxx; i = my - s * mx
    r2 = 1 - sum((b - s * a - i) ** 2 for a, b in p) / sum((b - my) ** 2 for _, b in p)
    return s, i, r2
s, i, r2 = ols(pts)
ls, li, _ = ols([(t, math.log(y)) for t, y in pts if y > 0])
json.dump({"linear": {"slope": s, "intercept": i, "r2": r2}, "exponential": {"a": math.exp(li), "k": -ls},
           "half_life": math.log(2) / -ls, "n": len(pts)}, open("fit.json", "w"), indent=2)
PY
