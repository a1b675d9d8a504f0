import heapq
import time
from collections import OrderedDict


class LRUCache:
    def __init__(self, capacity, clock=time.monotonic):
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        self.clock = clock
        self._data = OrderedDict()  # key -> (value, expires_at or None)
        self._expiry = []  # heap of (expires_at, seq, key); stale items are skipped lazily
        self._seq = 0
        self._stats = {"hits": 0, "misses": 0, "evictions": 0}

    def _expired(self, key):
        exp = self._data[key][1]
        return exp is not None and self.clock() >= exp

    def _purge(self):
        now = self.clock()
        while self._expiry and self._expiry[0][0] <= now:
            exp, _, key = heapq.heappop(self._expiry)
            if key in self._data and self._data[key][1] == exp:
                del self._data[key]

    def put(self, key, value, ttl=None):
        exp = None if ttl is None else self.clock() + ttl
        if key in self._data:
            self._data.move_to_end(key)
        elif len(self._data) >= self.capacity:
            self._purge()
            if len(self._data) >= self.capacity:
                self._data.popitem(last=False)
                self._stats["evictions"] += 1
        self._data[key] = (value, exp)
        if exp is not None:
            self._seq += 1
            heapq.heappush(self._expiry, (exp, self._seq, key))

    def get(self, key, default=None):
        if key in self._data and not self._expired(key):
            self._data.move_to_end(key)
            self._stats["hits"] += 1
            return self._data[key][0]
        self._data.pop(key, None)
        self._stats["misses"] += 1
        return default

    def __contains__(self, key):
        return key in self._data and not self._expired(key)

    def __len__(self):
        self._purge()
        return len(self._data)

    def stats(self):
        return dict(self._stats)
