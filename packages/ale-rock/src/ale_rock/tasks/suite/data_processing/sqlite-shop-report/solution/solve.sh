python3 - <<'PY'
import json
import sqlite3
db = sqlite3.connect("shop.db")
spend_sql = ("SELECT c.name, c.country, COALESCE(SUM(CASE WHEN o.status IN ('paid','shipped') "
             "THEN i.qty*i.unit_price END), 0) FROM customers c LEFT JOIN orders o ON o.customer_id=c.id "
             "LEFT JOIN items i ON i.order_id=o.id GROUP BY c.id")
rows = db.execute(spend_sql).fetchall()
top = sorted(rows, key=lambda r: (-round(r[2], 2), r[0]))[:3]
country = {}
for _, c, s in rows:
    country[c] = country.get(c, 0.0) + s
json.dump({
    "top_customers": [{"name": n, "spend": round(s, 2)} for n, _, s in top],
    "orders_by_status": dict(db.execute("SELECT status, COUNT(*) FROM orders GROUP BY status")),
    "revenue_by_country": {k: round(v, 2) for k, v in country.items()},
}, open("report.json", "w"), indent=2)
PY
