"""A FAKE Kubernetes API server, in-process, over real HTTP: the subset the ``kubernetes`` backend uses.

It is not Kubernetes. It serves, for the official client: pods create/get/list/watch/patch/delete
and eviction, and NetworkPolicies create/get, with resourceVersions (a merge patch carrying
``metadata.resourceVersion`` is refused with 409 Conflict when stale), watches that stream chunked
events, can be dropped (:meth:`FakeKube.drop_watches`) and answer 410 Gone for a compacted version
(:meth:`FakeKube.compact`), and the garbage collector's ownerReference cascade on delete.

Its "kubelet" makes the fake more than a mock: a pod whose container runs ``<dir>/bin/python -m
MODULE`` gets a real process (this interpreter, ``-m MODULE``) with the pod's env (the downward
API's ``status.podIP`` and ``metadata.name`` resolved), its own loopback address as pod IP
(127.N.x.y, so pods never share a port), readiness from a real gRPC health check on the container's
port (as a ``grpc`` readinessProbe), Failed when the process dies, and ``activeDeadlineSeconds``
enforced. Declared differences: no scheduling, images, init containers (the Rocklet comes from this
interpreter), volumes, resource enforcement or network policy; a Rocklet's ``workdir`` and
``spill_dir`` are moved under a per-pod temp dir (a host process cannot own ``/workspace``).
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

Obj = dict[str, Any]
_PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods(?:/([^/]+))?(/eviction)?$")
_NETPOL = re.compile(r"^/apis/networking\.k8s\.io/v1/namespaces/([^/]+)/networkpolicies(?:/([^/]+))?$")


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _status(code: int, reason: str, message: str) -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}  # fmt: skip


def _matches(labels: dict[str, str], selector: str) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.split("=", 1)
            if labels.get(k) != v.lstrip("="):
                return False
        elif term not in labels:
            return False
    return True


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.body = _status(code, reason, message)


class _Kubelet:
    """One pod's process (see the module docstring)."""

    def __init__(self, fake: FakeKube, ns: str, name: str) -> None:
        self.fake, self.ns, self.name = fake, ns, name
        self.proc: subprocess.Popen[bytes] | None = None
        self.dir = tempfile.mkdtemp(prefix="fake-kube-pod-")
        self.stopping = False
        threading.Thread(target=self._run, name=f"fake-kubelet-{name}", daemon=True).start()

    def _run(self) -> None:
        pod = self.fake.get_pod(self.ns, self.name)
        if pod is None:
            return
        ip = pod["status"]["podIP"]
        container = pod["spec"]["containers"][0]
        cmd = container.get("command") or []
        deadline = pod["spec"].get("activeDeadlineSeconds")
        if deadline:
            t = threading.Timer(float(deadline), self._deadline)
            t.daemon = True
            t.start()
        if len(cmd) >= 3 and cmd[0].endswith("/bin/python") and cmd[1] == "-m":
            env = dict(os.environ)
            for e in container.get("env") or []:
                ref = (e.get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath")
                env[e["name"]] = {"status.podIP": ip, "metadata.name": self.name}.get(
                    ref or "", e.get("value", "")
                )
            if "ALE_ROCKLET_SETTINGS" in env:
                settings = json.loads(env["ALE_ROCKLET_SETTINGS"])
                settings["workdir"] = os.path.join(self.dir, "work")
                settings["spill_dir"] = os.path.join(self.dir, "spill")
                env["ALE_ROCKLET_SETTINGS"] = json.dumps(settings)
            with open(os.path.join(self.dir, "log"), "wb") as log:  # the child keeps its own fd
                self.proc = subprocess.Popen(
                    [sys.executable, *cmd[1:]], env=env, cwd=self.dir, start_new_session=True,
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                )  # fmt: skip
            self.fake.started.append((self.proc.pid, self.dir))
        self.fake._set_status(self.ns, self.name, phase="Running", ready=False)
        port = next((p["containerPort"] for p in container.get("ports") or []), 0)
        if self.proc is None or not port:
            self.fake._set_status(self.ns, self.name, phase="Running", ready=True)
            return
        if self._probe(ip, port):
            self.fake._set_status(self.ns, self.name, phase="Running", ready=True)
        code = self.proc.wait()
        if not self.stopping:
            phase = "Succeeded" if code == 0 else "Failed"
            try:  # the container's last words, as `kubectl describe` shows a termination message
                with open(os.path.join(self.dir, "log"), "rb") as f:
                    tail = f.read()[-400:].decode(errors="replace").strip()
            except OSError:
                tail = ""
            message = f"exit code {code}: {tail}" if code else ""
            self.fake._set_status(
                self.ns, self.name, phase=phase, ready=False, reason="Error" if code else "", message=message
            )

    def _probe(self, ip: str, port: int) -> bool:
        import grpc
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        from ale_rock.grpc_options import channel_options

        with grpc.insecure_channel(f"{ip}:{port}", options=channel_options()) as ch:
            stub = health_pb2_grpc.HealthStub(ch)
            end = time.monotonic() + 60
            while time.monotonic() < end and self.proc is not None and self.proc.poll() is None:
                try:
                    if stub.Check(health_pb2.HealthCheckRequest(), timeout=1).status == 1:
                        return True
                except grpc.RpcError:
                    time.sleep(0.02)
        return False

    def _deadline(self) -> None:
        if self.stopping or self.fake.get_pod(self.ns, self.name) is None:
            return
        self.kill()
        self.fake._set_status(self.ns, self.name, phase="Failed", ready=False, reason="DeadlineExceeded",
                              message="Pod was active on the node longer than the specified deadline")  # fmt: skip

    def kill(self) -> None:
        self.stopping = True
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()

    def cleanup(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class FakeKube:
    """The fake API server (see the module docstring). ``url`` is what the client's ``host`` takes."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._rv = 100
        self._floor = 0  # watches from a version below this get 410 Gone
        self._events: list[tuple[int, str, str, Obj]] = []  # (rv, type, namespace, object)
        self._objects: dict[tuple[str, str, str], Obj] = {}  # (kind, ns, name)
        self._kubelets: dict[tuple[str, str], _Kubelet] = {}
        self._ips = 0
        # Each fake draws its own 127.N.0.0/16 for pod IPs: two fakes (two test runs) never
        # hand out the same pod IP and port.
        self._net = 2 + int.from_bytes(os.urandom(2), "big") % 250
        self._watch_gen = 0
        self._watches_paused = False
        self.before_patch: Any = None
        """Test hook: ``before_patch(namespace, name)`` runs before a patch is applied."""
        self.started: list[tuple[int, str]] = []
        """(pid, temp dir) of every pod process started, so tests can check nothing is left."""
        self.requests: list[tuple[str, str]] = []
        """(method, path) of every request, for tests that count calls."""
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def _body(self) -> Obj:
                n = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(n)) if n else {}

            def _send(self, code: int, obj: Obj) -> None:
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, method: str) -> None:
                url = urlparse(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                fake.requests.append((method, url.path))
                try:
                    body = self._body() if method in ("POST", "PATCH", "PUT") else {}
                    if method == "GET" and query.get("watch", "").lower() in ("true", "1"):
                        return fake._watch(self, url.path, query)
                    code, out = fake._route(
                        method, url.path, query, body, self.headers.get("Content-Type", "")
                    )
                except ApiError as e:
                    code, out = e.body["code"], e.body
                self._send(code, out)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def do_PATCH(self) -> None:
                self._handle("PATCH")

            def do_DELETE(self) -> None:
                self._handle("DELETE")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, name="fake-kube", daemon=True).start()

    def close(self) -> None:
        """Stop serving and kill every pod's process."""
        with self._lock:
            self._watch_gen += 1
            self._lock.notify_all()
            kubelets = list(self._kubelets.values())
        for k in kubelets:
            k.cleanup()
        self._server.shutdown()
        self._server.server_close()

    # -- test controls ------------------------------------------------------------------------------

    def drop_watches(self) -> None:
        """End every open watch stream (as an API server restart or a load balancer would)."""
        with self._lock:
            self._watch_gen += 1
            self._lock.notify_all()

    def pause_watches(self, paused: bool) -> None:
        """While paused, new watches wait before streaming (changes pile up unseen)."""
        with self._lock:
            self._watches_paused = paused
            self._lock.notify_all()

    def compact(self) -> None:
        """Forget the event history: a watch from any version seen so far gets 410 Gone."""
        with self._lock:
            self._floor = self._rv + 1
            self._events.clear()

    def bump(self, ns: str, name: str) -> None:
        """Change a pod's resourceVersion (a status update, as the kubelet makes)."""
        with self._lock:
            pod = self._objects[("pods", ns, name)]
            pod["status"].setdefault("conditions", [])
            self._commit("MODIFIED", ns, pod)

    def get_pod(self, ns: str, name: str) -> Obj | None:
        """A copy of the pod, or None."""
        with self._lock:
            pod = self._objects.get(("pods", ns, name))
            return copy.deepcopy(pod) if pod is not None else None

    def pods(self, ns: str) -> list[Obj]:
        """Copies of the namespace's pods."""
        with self._lock:
            return [copy.deepcopy(o) for (k, n, _), o in self._objects.items() if k == "pods" and n == ns]

    def pid_of(self, ns: str, name: str) -> int:
        """Host pid of a pod's process (0 if none)."""
        k = self._kubelets.get((ns, name))
        return k.proc.pid if k is not None and k.proc is not None else 0

    def expire(self, ns: str, name: str) -> None:
        """The kubelet's ``activeDeadlineSeconds`` check fires now (as if the deadline had passed)."""
        k = self._kubelets.get((ns, name))
        if k is not None:
            k._deadline()

    def kubelet_evict(
        self, ns: str, name: str, message: str = "The node was low on resource: memory."
    ) -> None:
        """Node-pressure eviction: the kubelet kills the pod and marks it Failed/Evicted (it stays)."""
        k = self._kubelets.get((ns, name))
        if k is not None:
            k.kill()
        self._set_status(ns, name, phase="Failed", ready=False, reason="Evicted", message=message)

    # -- the store ----------------------------------------------------------------------------------

    def _commit(self, kind: str, ns: str, obj: Obj) -> None:
        """Under the lock: give ``obj`` the next resourceVersion and record the event."""
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        self._events.append((self._rv, kind, ns, copy.deepcopy(obj)))
        self._lock.notify_all()

    def _set_status(
        self, ns: str, name: str, phase: str, ready: bool, reason: str = "", message: str = ""
    ) -> None:
        with self._lock:
            pod = self._objects.get(("pods", ns, name))
            if pod is None:
                return
            st = pod["status"]
            st["phase"] = phase
            if reason:
                st["reason"] = reason
            if message:
                st["message"] = message
            conds = [c for c in st.get("conditions") or [] if c["type"] != "Ready"]
            conds.append(
                {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": _now()}
            )
            st["conditions"] = conds
            self._commit("MODIFIED", ns, pod)

    def _route(self, method: str, path: str, query: dict[str, str], body: Obj, ctype: str) -> tuple[int, Obj]:
        if m := _PODS.match(path):
            ns, name, evict = m.group(1), m.group(2), m.group(3)
            if evict and method == "POST":
                return self._evict(ns, name or "")
            if name is None and method == "GET":
                return 200, self._list("pods", ns, query.get("labelSelector", ""))
            if name is None and method == "POST":
                return 201, self._create_pod(ns, body)
            if name and method == "GET":
                return 200, self._read("pods", ns, name)
            if name and method == "PATCH":
                return 200, self._patch(ns, name, body, ctype)
            if name and method == "DELETE":
                return 200, self._delete_pod(ns, name)
        if m := _NETPOL.match(path):
            ns, name = m.group(1), m.group(2)
            if name is None and method == "POST":
                return 201, self._create_plain("networkpolicies", ns, body)
            if name is None and method == "GET":
                return 200, self._list("networkpolicies", ns, "")
            if name and method == "GET":
                return 200, self._read("networkpolicies", ns, name)
        raise ApiError(404, "NotFound", f"the fake serves no {method} {path}")

    def _read(self, kind: str, ns: str, name: str) -> Obj:
        with self._lock:
            obj = self._objects.get((kind, ns, name))
            if obj is None:
                raise ApiError(404, "NotFound", f'{kind} "{name}" not found')
            return copy.deepcopy(obj)

    def _list(self, kind: str, ns: str, selector: str) -> Obj:
        with self._lock:
            items = [
                copy.deepcopy(o) for (k, n, _), o in sorted(self._objects.items())
                if k == kind and n == ns and _matches(o["metadata"].get("labels") or {}, selector)
            ]  # fmt: skip
            return {
                "kind": "List",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": str(self._rv)},
                "items": items,
            }

    def _new_meta(self, kind: str, ns: str, body: Obj) -> Obj:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        name = meta.get("name")
        if not name or (kind, ns, name) in self._objects:
            raise ApiError(409, "AlreadyExists", f'{kind} "{name}" already exists')
        meta.update({"namespace": ns, "uid": str(uuid.uuid4()), "creationTimestamp": _now()})
        return obj

    def _create_plain(self, kind: str, ns: str, body: Obj) -> Obj:
        with self._lock:
            obj = self._new_meta(kind, ns, body)
            self._objects[(kind, ns, obj["metadata"]["name"])] = obj
            self._commit("ADDED", ns, obj)
            return copy.deepcopy(obj)

    def _create_pod(self, ns: str, body: Obj) -> Obj:
        with self._lock:
            pod = self._new_meta("pods", ns, body)
            self._ips += 1
            ip = f"127.{self._net}.{self._ips // 250}.{self._ips % 250 + 2}"
            pod["status"] = {"phase": "Pending", "podIP": ip, "podIPs": [{"ip": ip}], "startTime": _now()}
            name = pod["metadata"]["name"]
            self._objects[("pods", ns, name)] = pod
            self._commit("ADDED", ns, pod)
            out = copy.deepcopy(pod)
        self._kubelets[(ns, name)] = _Kubelet(self, ns, name)
        return out

    def _patch(self, ns: str, name: str, body: Obj, ctype: str) -> Obj:
        if "json-patch" in ctype:
            raise ApiError(415, "UnsupportedMediaType", "the fake takes merge patches only")
        if self.before_patch is not None:
            self.before_patch(ns, name)
        with self._lock:
            pod = self._objects.get(("pods", ns, name))
            if pod is None:
                raise ApiError(404, "NotFound", f'pods "{name}" not found')
            want = (body.get("metadata") or {}).get("resourceVersion")
            if want is not None and want != pod["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on pods "{name}": the object has '
                               "been modified; please apply your changes to the latest version and try again")  # fmt: skip
            for field in ("labels", "annotations"):
                for k, v in ((body.get("metadata") or {}).get(field) or {}).items():
                    target = pod["metadata"].setdefault(field, {})
                    if v is None:
                        target.pop(k, None)
                    else:
                        target[k] = v
            self._commit("MODIFIED", ns, pod)
            return copy.deepcopy(pod)

    def _delete_pod(self, ns: str, name: str) -> Obj:
        with self._lock:
            pod = self._objects.get(("pods", ns, name))
            if pod is None:
                raise ApiError(404, "NotFound", f'pods "{name}" not found')
            if not pod["metadata"].get("deletionTimestamp"):
                pod["metadata"]["deletionTimestamp"] = _now()
                self._commit("MODIFIED", ns, pod)
            out = copy.deepcopy(pod)
        threading.Thread(target=self._finish_delete, args=(ns, name), daemon=True).start()
        return out

    def _finish_delete(self, ns: str, name: str) -> None:
        k = self._kubelets.pop((ns, name), None)
        if k is not None:
            k.cleanup()
        with self._lock:
            pod = self._objects.pop(("pods", ns, name), None)
            if pod is None:
                return
            self._commit("DELETED", ns, pod)
            uid = pod["metadata"]["uid"]
            dependents = [
                n for (kind, n_ns, n), o in self._objects.items()
                if kind == "pods" and n_ns == ns and any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])
            ]  # fmt: skip
        for dep in dependents:  # the garbage collector's background cascade
            try:
                self._delete_pod(ns, dep)
            except ApiError:
                pass

    def _evict(self, ns: str, name: str) -> tuple[int, Obj]:
        with self._lock:
            pod = self._objects.get(("pods", ns, name))
            if pod is None:
                raise ApiError(404, "NotFound", f'pods "{name}" not found')
            pod["status"].setdefault("conditions", []).append({
                "type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                "message": "Eviction API: evicting", "lastTransitionTime": _now(),
            })  # fmt: skip
            self._commit("MODIFIED", ns, pod)
        self._delete_pod(ns, name)
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    # -- watch ----------------------------------------------------------------------------------------

    def _watch(self, handler: BaseHTTPRequestHandler, path: str, query: dict[str, str]) -> None:
        m = _PODS.match(path)
        if m is None or m.group(2):
            raise ApiError(404, "NotFound", "the fake watches pod lists only")
        ns, selector = m.group(1), query.get("labelSelector", "")
        since = int(query.get("resourceVersion") or 0)
        timeout = float(query.get("timeoutSeconds") or 300)
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()

        def chunk(obj: Obj) -> None:
            data = json.dumps(obj).encode() + b"\n"
            handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            handler.wfile.flush()

        end = time.monotonic() + timeout
        try:
            with self._lock:
                gen = self._watch_gen
                self._lock.wait_for(lambda: not self._watches_paused or self._watch_gen != gen, timeout)
                gen = self._watch_gen
            while True:
                with self._lock:
                    if since and since < self._floor - 1:
                        gone = _status(410, "Expired", f"too old resource version: {since} ({self._floor})")
                        pending: list[Obj] = [{"type": "ERROR", "object": gone}]
                    else:
                        pending = [
                            {"type": t, "object": copy.deepcopy(o)} for rv, t, n, o in self._events
                            if rv > since and n == ns and _matches(o["metadata"].get("labels") or {}, selector)
                        ]  # fmt: skip
                        since = self._rv
                    if not pending:
                        left = end - time.monotonic()
                        if left <= 0 or self._watch_gen != gen:
                            break
                        self._lock.wait(min(left, 1.0))
                        if self._watch_gen != gen:
                            break
                        continue
                for ev in pending:
                    chunk(ev)
                if pending[0]["type"] == "ERROR":
                    break
            handler.wfile.write(b"0\r\n\r\n")
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            handler.close_connection = True
