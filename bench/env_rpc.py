"""EnvService calls per second for many concurrent tiny-game episodes: one unary RPC per call
against micro-batched ``EnvService.Batch`` calls.

    python bench/env_rpc.py [--json] [--episodes 512] [--rounds 3] [--transport thread|aio]

Starts ``python -m ale_rock.envs.server`` in a separate process, then plays ``--episodes``
concurrent GuessTheNumber episodes (Make, Reset, a binary-search guess per turn, Close) in one
event loop, ``--rounds`` times per mode:
- single: each call is one unary grpc.aio RPC (all episodes' calls concurrent on one channel);
- batched: each call goes through :class:`ale_rock.envs.batch_client.BatchEnvClient`, with its
  ``thread`` and its ``aio`` transport (``--transport`` picks the one reported as batched).
Prints JSON ``{"single_calls_per_s", "batched_calls_per_s", "ratio", ...}`` (best round of each;
the modes' rounds are interleaved).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from ale_proto.serving import free_port
from ale_proto.v1 import env_pb2, env_pb2_grpc
from ale_rock.envs.batch_client import BatchEnvClient

ENV_ID = "game:GuessTheNumber-v0"
Call = Callable[[str, Any], Awaitable[Any]]


def start_server(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "ale_rock.envs.server", "--port", str(port)])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
                grpc.channel_ready_future(ch).result(timeout=1)
                return proc
        except grpc.FutureTimeoutError:
            if proc.poll() is not None:
                raise RuntimeError("the EnvService exited during start-up") from None
    proc.kill()
    raise RuntimeError("the EnvService did not start within 60 s")


async def episode(call: Call, seed: int) -> int:
    """Binary search over 1..20; returns the number of calls made."""
    handle = (await call("make", env_pb2.MakeRequest(env_id=ENV_ID))).env_handle
    await call("reset", env_pb2.ResetRequest(env_handle=handle, seed=seed))
    lo, hi, calls = 1, 20, 2
    while True:
        guess = (lo + hi) // 2
        resp = await call("step", env_pb2.StepRequest(env_handle=handle, action=str(guess)))
        calls += 1
        if resp.terminated or resp.truncated:
            break
        if re.search(r"\bhigher\b", resp.observation):
            lo = guess + 1
        else:
            hi = guess - 1
    await call("close", env_pb2.CloseRequest(env_handle=handle))
    return calls + 1


async def run_single(address: str, episodes: int) -> tuple[int, float]:
    async with grpc.aio.insecure_channel(address) as ch:
        stub = env_pb2_grpc.EnvServiceStub(ch)

        async def call(kind: str, req: Any) -> Any:
            return await getattr(stub, kind.capitalize())(req, timeout=60)

        t0 = time.perf_counter()
        counts = await asyncio.gather(*(episode(call, s) for s in range(episodes)))
        return sum(counts), time.perf_counter() - t0


async def run_batched(address: str, episodes: int, transport: str) -> tuple[int, float]:
    client = BatchEnvClient(address, transport=transport, rpc_timeout_s=60)

    async def call(kind: str, req: Any) -> Any:
        return await client._call(kind, env_pb2.EnvCall(**{kind: req}))

    try:
        t0 = time.perf_counter()
        counts = await asyncio.gather(*(episode(call, s) for s in range(episodes)))
        return sum(counts), time.perf_counter() - t0
    finally:
        await client.aclose()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true", help="print only the JSON line")
    p.add_argument("--episodes", type=int, default=512)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--transport", choices=["thread", "aio"], default="thread")
    args = p.parse_args()
    port = free_port()
    server = start_server(port)
    address = f"127.0.0.1:{port}"
    rates: dict[str, list[float]] = {"single": [], "thread": [], "aio": []}
    calls = 0
    try:
        for _ in range(args.rounds):  # interleaved, so load from other work hits every mode alike
            for mode in rates:
                run = run_single(address, args.episodes) if mode == "single" else run_batched(
                    address, args.episodes, mode)
                calls, seconds = asyncio.run(run)
                rates[mode].append(calls / seconds)
    finally:
        server.terminate()
        server.wait(10)
    best = {mode: max(r) for mode, r in rates.items()}
    out: dict[str, Any] = {
        "single_calls_per_s": round(best["single"], 1),
        "batched_calls_per_s": round(best[args.transport], 1),
        "ratio": round(best[args.transport] / best["single"], 2),
        "batched_thread_calls_per_s": round(best["thread"], 1),
        "batched_aio_calls_per_s": round(best["aio"], 1),
        "episodes": args.episodes,
        "calls_per_round": calls,
        "transport": args.transport,
    }
    if not args.json:
        print(f"{args.episodes} concurrent GuessTheNumber episodes, {calls} calls each round")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
