"""The ModelProxy's book of open episodes: per-episode credentials bound to one sandbox, the call
records, and subscribers waiting for new records. (The agent episode itself, setup → agent →
verify, is :mod:`ale_rock.episode`.)"""

from __future__ import annotations

import hmac
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ale_rock.proxy.records import CallRecord


class AuthError(Exception):
    """A call was refused; ``status`` is 401 (no valid credential) or 403 (wrong episode/sandbox)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Episode:
    """One open (or closed) episode."""

    episode_id: str
    sandbox_id: str
    api_key: str
    upstream: Any
    model: str
    max_calls: int
    records: list[CallRecord] = field(default_factory=list)
    closed: bool = False
    reserved: int = 0
    """Calls admitted so far (including ones still running), for ``max_calls``."""


class EpisodeBook:
    """All episodes; thread-safe. Records stay readable after an episode closes, for the last
    ``keep_closed`` closed episodes (older ones are forgotten, so a long run does not grow)."""

    def __init__(self, keep_closed: int = 1000) -> None:
        self._episodes: dict[str, Episode] = {}
        self._by_key: dict[str, str] = {}
        self._closed_order: list[str] = []
        self.keep_closed = keep_closed
        self._cond = threading.Condition()

    def open(self, episode_id: str, sandbox_id: str, upstream: Any, model: str, max_calls: int) -> Episode:
        with self._cond:
            if episode_id in self._episodes:
                raise KeyError(episode_id)
            key = "ale-ep-" + secrets.token_urlsafe(24)
            ep = Episode(episode_id, sandbox_id, key, upstream, model, max_calls)
            self._episodes[episode_id] = ep
            self._by_key[key] = episode_id
            return ep

    def get(self, episode_id: str) -> Episode | None:
        with self._cond:
            return self._episodes.get(episode_id)

    def close(self, episode_id: str) -> Episode | None:
        with self._cond:
            ep = self._episodes.get(episode_id)
            if ep is None or ep.closed:
                return ep
            ep.closed = True
            self._by_key.pop(ep.api_key, None)
            self._closed_order.append(episode_id)
            while len(self._closed_order) > self.keep_closed:
                self._episodes.pop(self._closed_order.pop(0), None)
            self._cond.notify_all()
        close = getattr(ep.upstream, "close", None)
        if callable(close):  # per-episode upstream resources (an HTTP client)
            close()
        return ep

    def authenticate(self, api_key: str, path_episode: str | None, sandbox_id: str | None) -> Episode:
        """The episode a call belongs to. The key must be an open episode's; a path that names an
        episode and a sandbox id (set by the Rocklet that forwarded the call) must both match it."""
        with self._cond:
            episode_id = self._by_key.get(api_key)
            ep = self._episodes.get(episode_id) if episode_id else None
        if ep is None or ep.closed or not hmac.compare_digest(ep.api_key, api_key):
            raise AuthError(401, "invalid or expired API key")
        if path_episode is not None and path_episode != ep.episode_id:
            raise AuthError(403, "this API key belongs to another episode")
        if sandbox_id is not None and sandbox_id != ep.sandbox_id:
            raise AuthError(403, "this API key belongs to another sandbox")
        return ep

    def admit(self, ep: Episode) -> int:
        """Reserve the next call index; -1 when the episode's call limit is reached."""
        with self._cond:
            if ep.max_calls and ep.reserved >= ep.max_calls:
                return -1
            ep.reserved += 1
            return ep.reserved - 1

    def add(self, ep: Episode, record: CallRecord) -> None:
        with self._cond:
            ep.records.append(record)
            ep.records.sort(key=lambda r: r.index)
            self._cond.notify_all()

    def follow(
        self, episode_id: str, from_index: int, is_active: Any, poll_s: float = 0.5
    ) -> Iterator[CallRecord]:
        """Yield records with index >= from_index as they arrive, until the episode is closed (and
        drained) or ``is_active()`` turns false."""
        sent = from_index
        while True:
            with self._cond:
                ep = self._episodes.get(episode_id)
                if ep is None:
                    return
                ready = [r for r in ep.records if r.index >= sent]
                if not ready:
                    if ep.closed:
                        return
                    self._cond.wait(poll_s)
                    continue
            for r in ready:
                yield r
                sent = r.index + 1
            if not is_active():
                return
