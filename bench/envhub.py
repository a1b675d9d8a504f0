"""EnvHub: cold vs cached docker build, and sandbox start from a built spec vs from the plain base image.

    python bench/envhub.py --json [--starts 3]

Prints one JSON object. Needs a Docker engine and the base image; without an engine it prints
``{"skipped": "<why>"}`` (``make bench`` runs every script here).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from ale_rock.envhub.service import EnvHubConfig, make_hub
from ale_rock.envhub.spec import parse_spec


def run(starts: int = 3, cached_builds: int = 20) -> dict[str, float]:
    """Measure; everything it creates (images, containers, dirs) is removed afterwards."""
    from ale_rock.backends.docker import DockerBackend, DockerBackendConfig
    from ale_rock.backends.docker_runtime import default_base_image

    tmp = Path(tempfile.mkdtemp(prefix="ale-envhub-bench-"))
    hub = make_hub(EnvHubConfig(db_path=tmp / "hub.db"))
    token = uuid.uuid4().hex[:8]  # a fresh hash: the first build is really cold
    hub.register(parse_spec(
        f"name: envhub-bench\nbase: {{docker_image: '{default_base_image()}'}}\n"
        f"setup: ['mkdir -p /opt/x && echo {token} > /opt/x/f', 'echo data > data.txt']"
    ))
    worker = f"ehb{token[:5]}"
    backend = DockerBackend(DockerBackendConfig(worker=worker, root_dir=tmp / "w", pool_size=0))
    try:
        t = time.monotonic()
        assert not list(hub.build("envhub-bench"))[-1].cached
        cold = time.monotonic() - t
        cached = []
        for _ in range(cached_builds):
            t = time.monotonic()
            assert list(hub.build("envhub-bench"))[-1].cached
            cached.append(time.monotonic() - t)
        cfg = hub.sandbox_config("envhub-bench")
        times: dict[str, list[float]] = {"built": [], "base": []}
        for i in range(starts):
            for kind, c in (("built", cfg), ("base", cfg.model_copy(update={"image": ""}))):
                t = time.monotonic()
                backend.start(f"{kind}{i}", c)
                times[kind].append(time.monotonic() - t)
                backend.remove(f"{kind}{i}")
    finally:
        backend.reap_orphans(set())
        backend.close()
        hub.delete("envhub-bench")
        hub.registry.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "envhub_cold_build_s": round(cold, 3),
        "envhub_cached_build_p50_ms": round(statistics.median(cached) * 1000, 2),
        "sandbox_start_built_spec_p50_s": round(statistics.median(times["built"]), 3),
        "sandbox_start_base_image_p50_s": round(statistics.median(times["base"]), 3),
    }


def main(argv: list[str] | None = None) -> None:
    """Print the figures as JSON."""
    from ale_rock.backends.docker_engine import engine_problem

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--starts", type=int, default=3)
    p.add_argument("--json", action="store_true", help="(default) print one JSON object")
    args = p.parse_args(argv)
    if problem := engine_problem():
        print(json.dumps({"skipped": problem}))
        return
    print(json.dumps(run(args.starts)))


if __name__ == "__main__":
    main()
