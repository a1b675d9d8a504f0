"""What an image name means now (id, labels, size), without an engine round trip per create.

A warm claim must know the id its image name names *now* (the pool key carries it, so a re-tagged
image is never served from containers of its previous content), and every create with an image
checks the image's snapshot namespace label. Asking the engine each time costs an
``inspect_image`` per create; this cache answers from memory instead, and stays exact because:

- it caches only while it is subscribed to the engine's image events (``tag``, ``untag``,
  ``delete``, ``import``, ``load``, ``pull``, and container ``commit``): any such event, from this
  worker or anyone else on the engine, drops the whole cache, and (re)subscribing drops it too, so
  nothing cached before the subscription is trusted; without a subscription every lookup asks the
  engine (the behaviour before the cache);
- a lookup that raced an event (the generation moved while it asked) is answered but not stored;
- the backend's own commits drop the cache synchronously before they return (``invalidate``), so
  the next create after a commit never sees the old id, whatever the event's delivery latency;
- a background re-check (``recheck_s``) re-inspects every cached name and drops the cache when one
  changed: a belt to the events' braces (an event stream that silently stalls).

Misses (no such image) are never cached: an image can be built at any moment.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

_EVENT_FILTERS = {
    "type": ["image", "container"],
    "event": ["tag", "untag", "delete", "import", "load", "pull", "commit"],
}


@dataclass(frozen=True)
class ImageInfo:
    """The parts of ``inspect_image`` the backend uses."""

    id: str
    labels: dict[str, str] = field(default_factory=dict)
    size: int = 0


class ImageCache:
    """Image name -> :class:`ImageInfo`, exact while subscribed to the engine's image events."""

    def __init__(self, api: Any, recheck_s: float = 2.0, enabled: bool = True) -> None:
        self._api = api
        self.recheck_s = recheck_s
        self.enabled = enabled
        self._lock = threading.Lock()
        self._cache: dict[str, ImageInfo] = {}
        self._generation = 0
        self._live = False  # subscribed: cached answers are exact
        self._closed = threading.Event()
        self._stream: Any = None
        self._threads: list[threading.Thread] = []

    @property
    def live(self) -> bool:
        """True while cached answers are served (subscribed to the engine's events)."""
        with self._lock:
            return self._live

    def start(self) -> None:
        """Subscribe in the background (no-op when disabled or started)."""
        if not self.enabled or self._threads:
            return
        for target, name in ((self._watch, "docker-image-events"), (self._recheck, "docker-image-recheck")):
            t = threading.Thread(target=target, name=name, daemon=True)
            self._threads.append(t)
            t.start()

    def get(self, name: str) -> ImageInfo:
        """What ``name`` names now; raises the engine's NotFound/APIError like ``inspect_image``."""
        with self._lock:
            hit = self._cache.get(name) if self._live else None
            generation = self._generation
        if hit is not None:
            return hit
        info = self._inspect(name)
        with self._lock:
            if self._live and self._generation == generation:
                self._cache[name] = info
        return info

    def invalidate(self) -> None:
        """Forget everything (the backend just committed or tagged an image)."""
        with self._lock:
            self._generation += 1
            self._cache.clear()

    def close(self) -> None:
        """Unsubscribe and stop the background threads."""
        self._closed.set()
        with self._lock:
            stream, self._live = self._stream, False
            self._cache.clear()
        if stream is not None:
            stream.close()
        for t in self._threads:
            t.join(5.0)

    # -- background -------------------------------------------------------------------------------

    def _inspect(self, name: str) -> ImageInfo:
        raw = self._api.inspect_image(name)
        labels = (raw.get("Config") or {}).get("Labels") or {}
        return ImageInfo(id=str(raw["Id"]), labels=dict(labels), size=int(raw.get("Size", 0)))

    def _watch(self) -> None:
        while not self._closed.is_set():
            try:
                stream = self._api.events(filters=_EVENT_FILTERS, decode=True)
            except Exception as e:  # noqa: BLE001 - no engine yet: uncached lookups, retry
                log.debug("image events: cannot subscribe: %s", e)
                self._closed.wait(1.0)
                continue
            with self._lock:
                if self._closed.is_set():  # close() ran while we subscribed: it saw no stream
                    stream.close()
                    return
                self._stream = stream
                self._generation += 1
                self._cache.clear()  # nothing learnt before the subscription is trusted
                self._live = True
            try:
                for _event in stream:
                    self.invalidate()
            except Exception as e:  # noqa: BLE001 - the stream broke: resubscribe
                log.debug("image events: stream ended: %s", e)
            with self._lock:
                self._live = False
                self._stream = None
                self._cache.clear()
            if not self._closed.is_set():
                self._closed.wait(0.2)

    def _recheck(self) -> None:
        while not self._closed.wait(self.recheck_s):
            with self._lock:
                cached = dict(self._cache)
            for name, info in cached.items():
                try:
                    now = self._inspect(name).id
                except Exception:  # noqa: BLE001 - gone or engine trouble: drop, ask next time
                    now = ""
                if now != info.id:
                    log.info("image %s changed without an event: cache dropped", name)
                    self.invalidate()
                    break
