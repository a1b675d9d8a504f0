import time

from ale_testlib import load_module, run_all, test


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def cache(cap, clock=None):
    return load_module("lru.py", "lru").LRUCache(cap, clock=clock or Clock())


@test
def evicts_least_recently_used():
    c = cache(2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("a") == 1
    c.put("c", 3)
    assert c.get("b") is None and c.get("a") == 1 and c.get("c") == 3
    assert c.stats()["evictions"] == 1


@test
def update_refreshes_recency():
    c = cache(2)
    c.put("a", 1)
    c.put("b", 2)
    c.put("a", 10)
    c.put("c", 3)
    assert c.get("a") == 10 and "b" not in c and len(c) == 2


@test
def ttl_expiry():
    clk = Clock()
    c = cache(3, clk)
    c.put("x", 1, ttl=5)
    c.put("y", 2)
    clk.t = 4.99
    assert c.get("x") == 1
    clk.t = 5.0
    assert c.get("x", "gone") == "gone" and len(c) == 1 and "x" not in c


@test
def expired_removed_before_lru_eviction():
    clk = Clock()
    c = cache(2, clk)
    c.put("old", 1)
    c.put("short", 2, ttl=1)
    clk.t = 2
    c.put("new", 3)
    assert c.get("old") == 1 and c.get("new") == 3
    assert c.stats()["evictions"] == 0


@test
def stats_and_validation():
    c = cache(1)
    c.get("nope")
    c.put("k", "v")
    c.get("k")
    assert c.stats() == {"hits": 1, "misses": 1, "evictions": 0}
    try:
        cache(0)
        raise AssertionError("capacity 0 accepted")
    except ValueError:
        pass


@test
def constant_time_operations():
    c = cache(50_000)
    start = time.process_time()
    for i in range(100_000):
        c.put(i, i)
        c.get(i - 10)
    assert time.process_time() - start < 3.0, "too slow for O(1) operations"


run_all()
