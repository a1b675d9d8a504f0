"""One watch over this worker's sandbox pods: the backend's cache, never a poll.

A list gives the cache and a resourceVersion; a watch from that version streams every change.
When a watch ends (its server-side timeout, a dropped connection) it resumes from the last version
seen; when the server no longer has that version (410 Gone, the history was compacted) the watcher
lists again and reports what vanished in between as deleted.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

Pod = dict[str, Any]
OnEvent = Callable[[str, Pod], None]


class PodWatcher:
    """Keeps ``pods`` (name -> pod dict) current and calls ``on_event(type, pod)`` for each change."""

    def __init__(
        self,
        core: Any,
        namespace: str,
        selector: str,
        on_event: OnEvent,
        timeout_s: int,
        acquire: Callable[[], None],
    ) -> None:
        self._core = core
        self._ns = namespace
        self._selector = selector
        self._on_event = on_event
        self._timeout_s = timeout_s
        self._acquire = acquire
        self.pods: dict[str, Pod] = {}
        self.changed = threading.Condition()
        self.relists = 0
        """Lists done (1 at start, +1 per 410 Gone or failed watch)."""
        self.resumes = 0
        """Watches resumed from the last version (after a timeout or a dropped stream)."""
        self._stop = threading.Event()
        self._resp: Any = None
        self._synced = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"k8s-watch-{namespace}", daemon=True)

    def start(self, timeout_s: float = 30.0) -> None:
        """Start watching; returns once the first list is in the cache."""
        self._thread.start()
        if not self._synced.wait(timeout_s):
            raise TimeoutError("the first pod list did not arrive")

    def stop(self) -> None:
        """Stop the watch thread."""
        self._stop.set()
        resp = self._resp
        # Shut the socket down rather than close the response: close() waits for the reading
        # thread's buffer lock, which a blocked read holds; a shutdown wakes that read instead.
        sock = _socket_of(resp)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # already closed by the server
                pass
        self._thread.join(timeout=5)

    def wait_for(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until ``predicate()`` (checked under the cache's lock) holds, or time out."""
        with self.changed:
            return self.changed.wait_for(predicate, timeout_s)

    def _list(self) -> str:
        self._acquire()
        resp = self._core.list_namespaced_pod(self._ns, label_selector=self._selector, _preload_content=False)
        body = json.loads(resp.data)
        fresh = {p["metadata"]["name"]: p for p in body.get("items", [])}
        with self.changed:
            gone = [p for name, p in self.pods.items() if name not in fresh]
            self.pods = fresh
            self.relists += 1
            self.changed.notify_all()
        for pod in gone:  # deleted while we were not watching
            self._on_event("DELETED", pod)
        for pod in fresh.values():
            self._on_event("MODIFIED", pod)
        return str(body["metadata"]["resourceVersion"])

    def _run(self) -> None:
        from kubernetes.watch.watch import iter_resp_lines

        version = ""
        while not self._stop.is_set():
            try:
                if not version:
                    version = self._list()
                    self._synced.set()
                self._resp = self._core.list_namespaced_pod(
                    self._ns, label_selector=self._selector, watch=True, resource_version=version,
                    timeout_seconds=self._timeout_s, allow_watch_bookmarks=True, _preload_content=False,
                )  # fmt: skip
                if self._stop.is_set():  # stop() ran before _resp was set: it could not wake us
                    return
                for line in iter_resp_lines(self._resp):
                    if not line:
                        continue
                    event = json.loads(line)
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        if obj.get("code") == 410:  # our version was compacted away: list again
                            log.info("pod watch: %s; listing again", obj.get("message", "410 Gone"))
                        version = ""
                        break
                    version = obj["metadata"]["resourceVersion"]
                    if event["type"] != "BOOKMARK":
                        self._apply(event["type"], obj)
                else:
                    self.resumes += 1
            except Exception as e:  # noqa: BLE001 - a broken watch is resumed, never fatal
                if self._stop.is_set():
                    return
                log.warning("pod watch failed (%s); listing again", e)
                version = ""
                time.sleep(0.2)
            finally:
                self._resp = None

    def _apply(self, kind: str, pod: Pod) -> None:
        name = pod["metadata"]["name"]
        with self.changed:
            if kind == "DELETED":
                self.pods.pop(name, None)
            else:
                self.pods[name] = pod
            self.changed.notify_all()
        self._on_event(kind, pod)


def _socket_of(resp: Any) -> Any:
    """The socket under a streaming urllib3 response: its connection's, or, when the server said
    ``Connection: close`` (http.client then hands the socket to the response), the response's."""
    sock = getattr(getattr(resp, "connection", None), "sock", None)
    if sock is None:
        raw = getattr(getattr(getattr(resp, "_fp", None), "fp", None), "raw", None)
        sock = getattr(raw, "_sock", None)
    return sock
