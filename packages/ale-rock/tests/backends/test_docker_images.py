"""ImageCache without an engine: cached only while subscribed, dropped by any event, a lookup
that raced an event is not kept, and a broken stream means uncached lookups until resubscribed."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ale_rock.backends.docker_images import ImageCache


def _wait(pred: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.005)
    return pred()


class _Stream:
    """An event stream the test feeds; ``close`` ends it like the docker SDK's."""

    def __init__(self) -> None:
        self.q: queue.Queue[Any] = queue.Queue()

    def __iter__(self) -> Iterator[Any]:
        while (item := self.q.get()) is not None:
            if isinstance(item, Exception):
                raise item
            yield item

    def close(self) -> None:
        self.q.put(None)


class _Api:
    def __init__(self) -> None:
        self.ids = {"img": "sha256:1"}
        self.inspects = 0
        self.streams: list[_Stream] = []
        self.subscribe = threading.Event()  # set: subscriptions succeed
        self.during_inspect: Callable[[], None] = lambda: None

    def inspect_image(self, name: str) -> dict[str, Any]:
        self.inspects += 1
        self.during_inspect()
        return {"Id": self.ids[name], "Config": {"Labels": {"k": "v"}}, "Size": 7}

    def events(self, **_: Any) -> _Stream:
        if not self.subscribe.is_set():
            raise ConnectionError("engine down")
        self.streams.append(_Stream())
        return self.streams[-1]


def test_cached_only_while_subscribed_and_every_event_drops_it() -> None:
    api = _Api()
    cache = ImageCache(api, recheck_s=60)
    cache.start()
    try:
        assert cache.get("img").id == "sha256:1" and cache.get("img").size == 7
        assert api.inspects == 2  # not subscribed: every lookup asks the engine
        api.subscribe.set()
        assert _wait(lambda: cache.live)
        cache.get("img")
        n = api.inspects
        assert cache.get("img").labels == {"k": "v"} and api.inspects == n  # from memory
        # Someone re-tags: the event drops the cache, the next lookup sees the new id.
        api.ids["img"] = "sha256:2"
        api.streams[-1].q.put({"Type": "image", "Action": "tag"})
        assert _wait(lambda: cache.get("img").id == "sha256:2")
        # A lookup that raced an event answers, but is not kept.
        cache.invalidate()

        def event_now() -> None:
            api.during_inspect = lambda: None
            cache.invalidate()

        api.during_inspect = event_now
        cache.get("img")
        n = api.inspects
        cache.get("img")
        assert api.inspects == n + 1
        # The stream breaks: uncached until the watcher has subscribed again.
        first = api.streams[-1]
        api.subscribe.clear()
        first.q.put(ConnectionError("reset"))
        assert _wait(lambda: not cache.live)
        n = api.inspects
        cache.get("img")
        cache.get("img")
        assert api.inspects == n + 2
        api.subscribe.set()
        assert _wait(lambda: cache.live and len(api.streams) == 2)
    finally:
        cache.close()
    assert all(not t.is_alive() for t in cache._threads)


def test_own_commit_invalidates_synchronously_and_recheck_catches_a_silent_change() -> None:
    api = _Api()
    api.subscribe.set()
    cache = ImageCache(api, recheck_s=0.05)
    cache.start()
    try:
        assert _wait(lambda: cache.live)
        cache.get("img")
        api.ids["img"] = "sha256:3"  # changed, and no event arrives (a stalled stream)
        assert _wait(lambda: cache.get("img").id == "sha256:3", 2)  # the re-check dropped it
        api.ids["img"] = "sha256:4"
        cache.invalidate()  # what the backend's commit does before it returns
        assert cache.get("img").id == "sha256:4"
    finally:
        cache.close()


def test_disabled_cache_never_subscribes() -> None:
    api = _Api()
    api.subscribe.set()
    cache = ImageCache(api, enabled=False)
    cache.start()
    cache.get("img")
    cache.get("img")
    cache.close()
    assert api.streams == [] and api.inspects == 2
