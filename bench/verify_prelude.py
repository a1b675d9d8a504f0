"""What an episode pays before its hidden tests run, so the agent cannot rig them: killing every
process it left (``SandboxProvider.stop_processes`` → ``SignalProcess(all_processes)``) and clearing
``.ale_tests/`` and ``.ale_logs/`` (one exec), against one plain exec in the same sandbox.

    python bench/verify_prelude.py --json [--rounds 30] [--backend local]

A real LocalCluster (Admin + one worker) and one sandbox; each round leaves a background process
running, then times the kill, the clear and a plain ``true``. p50 of each; ``prelude_vs_exec`` is
(kill + clear) over one plain exec, measured in the same rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path


def run(rounds: int = 30, backend: str = "") -> dict:
    from ale_rock.envs.sandbox import SdkProvider
    from ale_rock.local_cluster import LocalCluster, real_worker_argv
    from ale_rock.tasks.evaluate import _CLEAR

    kill, clear, plain = [], [], []
    with LocalCluster(workers=1, workdir=Path(tempfile.mkdtemp(prefix="ale-bench-verify-")),
                      worker_argv=real_worker_argv({})) as cluster:
        provider = SdkProvider(cluster.address, cluster.api_key(), backend=backend)
        sid = provider.create()
        try:
            for _ in range(rounds):
                provider.exec(sid, "sleep 100 >/dev/null 2>&1 & true", 10)  # something the agent left
                for samples, fn in ((kill, lambda: provider.stop_processes(sid)),
                                    (clear, lambda: provider.exec(sid, _CLEAR, 10)),
                                    (plain, lambda: provider.exec(sid, "true", 10))):
                    t0 = time.perf_counter()
                    fn()
                    samples.append(time.perf_counter() - t0)
        finally:
            provider.delete(sid)

    def p50_ms(v: list[float]) -> float:
        return round(statistics.median(v) * 1000, 2)

    return {"kill_all_p50_ms": p50_ms(kill), "clear_p50_ms": p50_ms(clear), "plain_exec_p50_ms": p50_ms(plain),
            "prelude_vs_exec": round((statistics.median(kill) + statistics.median(clear)) / statistics.median(plain), 2),
            "rounds": rounds, "backend": backend or "server default", "load_avg": os.getloadavg()[0]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--backend", default="", help="sandbox backend (default: the server's)")
    args = p.parse_args()
    out = run(args.rounds, args.backend)
    print(json.dumps(out) if args.json else json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
