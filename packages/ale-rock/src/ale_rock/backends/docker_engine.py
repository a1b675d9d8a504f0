"""Whether a Docker engine can be used from here (tools and tests decide before they try)."""

from __future__ import annotations


def engine_problem(timeout_s: float = 5.0) -> str:
    """Why no Docker engine can be used, or "" when one answers a ping."""
    try:
        import docker
    except ImportError:
        return "docker SDK not installed (pip install 'ale-rock[docker]')"
    try:
        client = docker.from_env(timeout=timeout_s)
        client.ping()
        client.close()
    except Exception as e:  # noqa: BLE001 - any failure means "no engine"
        return f"no Docker engine reachable: {e}"
    return ""
