python3 - <<'PY'
import csv
seen, totals, counts = set(), {}, {}
with open("sales.csv") as f:
    for row in csv.DictReader(f):
        if row["order_id"] in seen:
            continue
        try:
            amount = float(row["amount"])
        except ValueError:
            continue
        seen.add(row["order_id"])
        region = row["region"].strip().lower()
        totals[region] = totals.get(region, 0.0) + amount
        counts[region] = counts.get(region, 0) + 1
with open("summary.csv", "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["region", "total", "orders"])
    for region in sorted(totals):
        w.writerow([region, f"{totals[region]:.2f}", counts[region]])
PY
