"""What an episode pays before its hidden tests run, so the agent cannot rig them: killing every
process it left (``SandboxProvider.stop_processes`` → ``SignalProcess(all_processes)``, one call) and
putting the tests in place from their staging directory (``tasks.evaluate.upload_tests``: shell run at
the start of the verifier's own command), against one plain exec in the same sandbox.

    python bench/verify_prelude.py --json [--rounds 30] [--backend local]

A real LocalCluster (Admin + one worker) and one sandbox; each round leaves a background process
running and a stale ``.ale_tests/``, stages a test file, then times the kill, an exec of the install
shell + ``true``, and a plain ``true``. p50 of each; ``prelude_vs_exec`` is (kill + the install's
extra time over the plain exec) over one plain exec, from the same rounds.
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
    from ale_rock.envs.sandbox import ProviderRunner, SdkProvider
    from ale_rock.local_cluster import LocalCluster, real_worker_argv
    from ale_rock.tasks.evaluate import upload_tests

    kill: list[float] = []
    install: list[float] = []
    plain: list[float] = []
    with LocalCluster(workers=1, workdir=Path(tempfile.mkdtemp(prefix="ale-bench-verify-")),
                      worker_argv=real_worker_argv({})) as cluster:
        provider = SdkProvider(cluster.address, cluster.api_key(), backend=backend)
        sid = provider.create()
        runner = ProviderRunner(provider)
        runner.sandbox_id = sid
        try:
            for _ in range(rounds):
                # What the agent left: a process, and a file where the tests will go.
                provider.exec(sid, "sleep 100 >/dev/null 2>&1 & mkdir -p .ale_tests && touch .ale_tests/csv.py", 10)
                shell = upload_tests(runner, {".ale_tests/test_task.py": b"print('PASS a')\n"})
                for samples, fn in ((kill, lambda: provider.stop_processes(sid)),
                                    (install, lambda shell=shell: provider.exec(sid, shell + "true", 10)),
                                    (plain, lambda: provider.exec(sid, "true", 10))):
                    t0 = time.perf_counter()
                    fn()
                    samples.append(time.perf_counter() - t0)
        finally:
            provider.delete(sid)

    def p50_ms(v: list[float]) -> float:
        return round(statistics.median(v) * 1000, 2)

    extra = max(0.0, statistics.median(install) - statistics.median(plain))
    return {"kill_all_p50_ms": p50_ms(kill), "install_exec_p50_ms": p50_ms(install), "plain_exec_p50_ms": p50_ms(plain),
            "prelude_vs_exec": round((statistics.median(kill) + extra) / statistics.median(plain), 2),
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
