python3 - <<'PY'
import random
import sqlite3
rng = random.Random(7)
db = sqlite3.connect("shop.db")
db.executescript("""
CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT, country TEXT);
CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INTEGER, status TEXT, created TEXT);
CREATE TABLE items(order_id INTEGER, sku TEXT, qty INTEGER, unit_price REAL);
""")
names = ["Avery", "Blake", "Casey", "Drew", "Emery", "Finley", "Gray", "Harper"]
countries = ["DE", "FR", "DE", "US", "US", "JP", "FR", "NL"]
for i, (n, c) in enumerate(zip(names, countries), 1):
    db.execute("INSERT INTO customers VALUES (?,?,?)", (i, n, c))
statuses = ["paid", "shipped", "cancelled", "refunded", "pending"]
oid = 0
for cid in range(1, 8):
    for _ in range(rng.randint(1, 5)):
        oid += 1
        db.execute("INSERT INTO orders VALUES (?,?,?,?)", (oid, cid, rng.choice(statuses), f"2024-0{rng.randint(1,9)}-1{rng.randint(0,9)}"))
        for _ in range(rng.randint(1, 3)):
            db.execute("INSERT INTO items VALUES (?,?,?,?)", (oid, f"SKU{rng.randint(1,20)}", rng.randint(1, 4), round(rng.uniform(2, 80), 2)))
db.commit()
PY
