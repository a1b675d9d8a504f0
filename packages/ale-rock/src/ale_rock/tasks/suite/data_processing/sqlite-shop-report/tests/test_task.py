import json
import sqlite3

from ale_testlib import read, run_all, test

GOOD = ("paid", "shipped")


def expected():
    db = sqlite3.connect("shop.db")
    spend = {}
    for name, country, s in db.execute(
        "SELECT c.name, c.country, COALESCE(SUM(CASE WHEN o.status IN ('paid','shipped') THEN i.qty*i.unit_price END), 0) "
        "FROM customers c LEFT JOIN orders o ON o.customer_id = c.id LEFT JOIN items i ON i.order_id = o.id GROUP BY c.id"
    ):
        spend[name] = (country, s)
    top = sorted(spend.items(), key=lambda kv: (-round(kv[1][1], 2), kv[0]))[:3]
    by_country = {}
    for country, s in spend.values():
        by_country[country] = by_country.get(country, 0.0) + s
    status = dict(db.execute("SELECT status, COUNT(*) FROM orders GROUP BY status"))
    return top, {k: round(v, 2) for k, v in by_country.items()}, status


def report():
    return json.loads(read("report.json"))


@test
def top_customers():
    top, _, _ = expected()
    got = report()["top_customers"]
    assert [c["name"] for c in got] == [n for n, _ in top], got
    for c, (_, (_, s)) in zip(got, top):
        assert abs(c["spend"] - round(s, 2)) < 0.006, (c, s)


@test
def orders_by_status():
    assert report()["orders_by_status"] == expected()[2]


@test
def revenue_by_country_includes_zero_countries():
    want = expected()[1]
    got = report()["revenue_by_country"]
    assert sorted(got) == sorted(want), got
    for k in want:
        assert abs(got[k] - want[k]) < 0.006, (k, got[k], want[k])


run_all()
