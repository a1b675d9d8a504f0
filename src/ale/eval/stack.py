"""The services an evaluation needs, started in-process and always stopped: an InferenceService on a
local model (``--local-model``), the ModelProxy, and a LocalCluster (admin + one bubblewrap worker
whose egress gateway maps the host ``model-proxy`` to the proxy)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ale.eval.config import EvalConfig

PROXY_HOST = "model-proxy"


@dataclass(frozen=True)
class Endpoints:
    """How episodes reach the running services."""

    admin_address: str
    admin_api_key: str
    proxy_address: str
    """gRPC address of the ModelProxy."""
    upstream: str
    """``openai`` or ``inference``."""
    upstream_target: str
    """The base URL or the InferenceService address the proxy forwards to."""
    model: str
    """Model name the agent sends."""
    owned_paths: tuple[str, ...] = ()
    """Host paths that name the services and sandboxes this evaluation started (every one of their
    processes and mounts mentions one): what must be gone after the stack stops."""


class StackError(RuntimeError):
    """A service could not start; the message says what is missing and how to fix it."""


@contextlib.contextmanager
def local_inference(model: str, dtype: str = "float32", default_max_tokens: int = 1024) -> Iterator[str]:
    """An InferenceService (HF engine) on ``model`` in this process; yields its address."""
    from ale_roll.engines.hf_engine import HFInferenceEngine
    from ale_roll.engines.inference_server import InferenceServicer, serve
    from ale_roll.models import load_model

    hf_model, tokenizer = load_model(model, dtype=dtype)
    servicer = InferenceServicer(HFInferenceEngine(hf_model), tokenizer, model_name=Path(model).name,
                                 backend="hf", default_max_tokens=default_max_tokens)  # fmt: skip
    server, port = serve(servicer)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(1).wait(5)
        close = getattr(servicer, "close", None)  # servicers that batch run a thread of their own
        if close is not None:
            close()


@contextlib.contextmanager
def eval_stack(cfg: EvalConfig, workdir: Path) -> Iterator[Endpoints]:
    """Start what ``cfg`` does not point at; yield the endpoints; stop everything on the way out."""
    if not cfg.admin_address and shutil.which("bwrap") is None:
        raise StackError("bubblewrap is not installed: apt-get install -y bubblewrap (or pass --admin-address)")
    with contextlib.ExitStack() as stack:
        if cfg.local_model:
            target = stack.enter_context(local_inference(cfg.local_model, cfg.local_dtype, cfg.max_tokens))
        else:
            target = cfg.base_url or cfg.inference_address
        model = cfg.model or (Path(cfg.local_model).name if cfg.local_model else "ale-policy")
        if cfg.admin_address:
            yield Endpoints(cfg.admin_address, cfg.admin_api_key, cfg.proxy_address, cfg.upstream, target, model)
            return
        proxy = _start_proxy(cfg)
        stack.callback(proxy.stop, 0)
        cluster = _start_cluster(proxy.http_url.removeprefix("http://"), workdir, cfg.concurrency)
        stack.callback(cluster.stop)
        owned = (str(workdir), str(cluster.worker_state_dir("w1")))
        yield Endpoints(cluster.address, cluster.api_key(), proxy.grpc_address, cfg.upstream, target, model, owned)


def sandbox_policy(cfg: EvalConfig) -> Any:
    """What a task's ``[environment]`` may ask of an evaluation's sandboxes (``SandboxPolicy``).

    With the LocalCluster this command starts, a sandbox gets at most this machine: its CPUs and
    its memory (a task asking more is refused, naming the field); an ``--admin-address``'s own
    limits (quotas, its workers' capacity) bound the rest. Egress: the task's allow-list."""
    from ale_rock.envs.sandbox import SandboxPolicy

    if cfg.admin_address:
        return SandboxPolicy()
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return SandboxPolicy(max_cpu=float(os.cpu_count() or 1), max_memory_bytes=memory)


def _start_proxy(cfg: EvalConfig) -> Any:
    from ale_rock.proxy import ModelProxyConfig, serve_model_proxy

    # Agents reach the proxy as http://model-proxy/… through their worker's egress gateway, which
    # stamps the sandbox id; calls without that stamp are refused.
    return serve_model_proxy(ModelProxyConfig(
        public_base_url=f"http://{PROXY_HOST}:80", require_sandbox_header=True,
        openai_api_key=cfg.api_key, upstream_timeout_s=cfg.task_timeout_s,
    ))  # fmt: skip


def _start_cluster(proxy_http: str, workdir: Path, concurrency: int) -> Any:
    from ale_rock.local_cluster import LocalCluster, real_worker_argv

    workdir.mkdir(parents=True, exist_ok=True)
    # A sandbox asks for one core unless its task sets cpus; agents mostly wait on the model, so the worker offers a core
    # per concurrent episode even on a smaller machine (the limit is then a share, not a reservation).
    cpu = max(os.cpu_count() or 1, concurrency + 1) * 1000
    argv = real_worker_argv({"model_proxy_address": proxy_http, "cpu_millis": cpu})
    cluster = LocalCluster(workers=1, workdir=workdir, worker_argv=argv)
    try:
        return cluster.start()
    except BaseException:
        cluster.stop()
        raise
