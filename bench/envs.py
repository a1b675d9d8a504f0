"""Benchmarks of ale-rock's environments and ModelProxy.

    python bench/envs.py [--json] [--steps 2000] [--episodes 200]

Prints JSON (and a short table without --json):
- env_step_p50_ms: a GuessTheNumber step through the EnvService (gRPC, loopback) and in-process,
  and their ratio (goal: service p50 <= 10 ms).
- env_make_p50_ms: EnvService.Make of a game (warm: nothing to build), Close not included.
- proxy_overhead_p50_ms: a chat call through the ModelProxy (HTTP, openai wire format) minus the
  same call made straight to the upstream InferenceService (ApplyChatTemplate -> Generate ->
  Detokenize). The upstream here is a constant-time in-bench servicer, so the figure is the
  proxy's own cost (goal <= 5 ms).
- concurrent_episodes: GEM episodes held in flight at once through the async vector client, and
  how many calls failed (goal: 200 with zero errors).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from concurrent import futures
from typing import Any

import grpc
import httpx
from ale_proto.v1 import common_pb2, inference_pb2, inference_pb2_grpc, model_proxy_pb2, model_proxy_pb2_grpc
from ale_rock.envs import make
from ale_rock.envs.client import AsyncVectorEnvClient
from ale_rock.envs.server import EnvServerConfig, serve_env_service
from ale_rock.proxy import ModelProxyConfig, serve_model_proxy


def p50(xs: list[float]) -> float:
    return round(statistics.median(xs) * 1000, 3)


def step_times(env: Any, n: int) -> list[float]:
    times: list[float] = []
    env.reset(seed=0)
    seed = 0
    while len(times) < n:
        t = time.perf_counter()
        _, _, term, trunc, _ = env.step(str(len(times) % 20 + 1))
        times.append(time.perf_counter() - t)
        if term or trunc:
            seed += 1
            env.reset(seed=seed)
    return times


class ConstantInference(inference_pb2_grpc.InferenceServiceServicer):
    """Answers in constant time: the bench measures the proxy, not a model."""

    def ApplyChatTemplate(self, request: Any, context: Any) -> Any:
        return inference_pb2.ApplyChatTemplateResponse(token_ids=list(request.messages_json.encode()[:512]))

    def Generate(self, request: Any, context: Any) -> Any:
        ids = list(range(1, 33))
        yield inference_pb2.GenerateResponse(
            token_ids=ids,
            logprobs=[-0.5] * len(ids),
            finished=True,
            stop_reason=common_pb2.STOP_REASON_STOP,
            policy_version=1,
        )

    def Detokenize(self, request: Any, context: Any) -> Any:
        return inference_pb2.DetokenizeResponse(text="".join(chr(97 + i % 26) for i in request.token_ids))


def bench_proxy(n: int) -> dict[str, float]:
    upstream = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    inference_pb2_grpc.add_InferenceServiceServicer_to_server(ConstantInference(), upstream)
    port = upstream.add_insecure_port("127.0.0.1:0")
    upstream.start()
    target = f"127.0.0.1:{port}"
    proxy = serve_model_proxy(ModelProxyConfig())
    try:
        stub = model_proxy_pb2_grpc.ModelProxyServiceStub(grpc.insecure_channel(proxy.grpc_address))
        ep = stub.OpenEpisode(
            model_proxy_pb2.OpenEpisodeRequest(
                episode_id="bench",
                sandbox_id="sb",
                upstream=model_proxy_pb2.UPSTREAM_KIND_INFERENCE_SERVICE,
                upstream_target=target,
                model="m",
            ),
            timeout=10,
        )
        body = {"model": "m", "messages": [{"role": "user", "content": "hello " * 20}], "max_tokens": 32}
        direct_stub = inference_pb2_grpc.InferenceServiceStub(grpc.insecure_channel(target))

        def direct() -> None:
            t = direct_stub.ApplyChatTemplate(
                inference_pb2.ApplyChatTemplateRequest(
                    messages_json=json.dumps(body["messages"]), add_generation_prompt=True
                )
            )
            ids: list[int] = []
            for m in direct_stub.Generate(inference_pb2.GenerateRequest(prompt_token_ids=t.token_ids)):
                ids += m.token_ids
            direct_stub.Detokenize(inference_pb2.DetokenizeRequest(token_ids=ids, skip_special_tokens=True))

        via, straight = [], []
        with httpx.Client(headers={"Authorization": f"Bearer {ep.api_key}"}) as h:
            url = ep.base_url + "/chat/completions"
            for i in range(n + 20):
                t0 = time.perf_counter()
                direct()
                t1 = time.perf_counter()
                r = h.post(url, json=body)
                t2 = time.perf_counter()
                assert r.status_code == 200, r.text
                if i >= 20:  # warm-up
                    straight.append(t1 - t0)
                    via.append(t2 - t1)
        return {
            "proxy_call_p50_ms": p50(via),
            "upstream_direct_p50_ms": p50(straight),
            "proxy_overhead_p50_ms": round(p50(via) - p50(straight), 3),
        }
    finally:
        proxy.stop(0)
        upstream.stop(0)


async def hold_episodes(address: str, n: int) -> dict[str, Any]:
    errors = 0
    t = time.perf_counter()
    vec = AsyncVectorEnvClient(["game:GuessTheNumber-v0"] * n, address, return_exceptions=True)
    await vec.make()
    await vec.reset(seeds=list(range(n)))
    lo, hi, done, wins, steps = [1] * n, [20] * n, [False] * n, 0, 0
    while not all(done):
        guesses = [(a + b) // 2 for a, b in zip(lo, hi)]
        results = await vec.step([None if d else str(g) for d, g in zip(done, guesses)])
        for i, res in enumerate(results):
            if res is None:
                continue
            if isinstance(res, BaseException):
                errors += 1
                done[i] = True
                continue
            steps += 1
            obs, r, term, trunc, _ = res
            wins += int(r)
            done[i] = term or trunc
            lo[i] = guesses[i] + 1 if "higher" in obs else lo[i]
            hi[i] = guesses[i] - 1 if "lower" in obs else hi[i]
    await vec.close()
    return {
        "concurrent_episodes": n,
        "concurrent_errors": errors,
        "concurrent_wins": wins,
        "concurrent_steps": steps,
        "concurrent_wall_s": round(time.perf_counter() - t, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true", help="print only the JSON")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--episodes", type=int, default=200)
    args = ap.parse_args()
    srv = serve_env_service(EnvServerConfig(max_workers=32))
    try:
        local = step_times(make("game:GuessTheNumber-v0"), args.steps)
        remote_env = make("game:GuessTheNumber-v0", address=srv.address)
        step_times(remote_env, 100)  # warm-up
        remote = step_times(remote_env, args.steps)
        remote_env.close()
        ch = grpc.insecure_channel(srv.address)
        from ale_proto.v1 import env_pb2, env_pb2_grpc

        stub = env_pb2_grpc.EnvServiceStub(ch)
        makes = []
        for _ in range(200):
            t = time.perf_counter()
            h = stub.Make(env_pb2.MakeRequest(env_id="game:GuessTheNumber-v0"), timeout=10).env_handle
            makes.append(time.perf_counter() - t)
            stub.Close(env_pb2.CloseRequest(env_handle=h), timeout=10)
        out: dict[str, Any] = {
            "env_step_p50_ms": p50(remote),
            "env_step_inprocess_p50_ms": p50(local),
            "env_step_ratio": round(statistics.median(remote) / statistics.median(local), 1),
            "env_step_p99_ms": round(sorted(remote)[int(len(remote) * 0.99)] * 1000, 3),
            "env_make_p50_ms": p50(makes[20:]),
        }
        out |= asyncio.run(hold_episodes(srv.address, args.episodes))
    finally:
        srv.stop(0)
    out |= bench_proxy(200)
    print(json.dumps(out))
    if not args.json:
        for k, v in out.items():
            print(f"  {k:28s} {v}")


if __name__ == "__main__":
    main()
