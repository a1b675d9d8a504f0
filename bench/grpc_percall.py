"""CPU per gRPC call: the sync stack (thread-pool server, one client thread per call) vs grpc.aio.

    python bench/grpc_percall.py                   # JSON on stdout; ~2 min on 2 loaded cores
    python bench/grpc_percall.py --model-repeats 0  # the per-call CPU figures only (~35 s)
    python bench/grpc_percall.py --repeats 0        # the model section only (~60 s)

Issue 14 item 4: 64 concurrent single one-token calls to the InferenceService are bounded by what
one call costs in Python gRPC, not by the batcher. This measures that cost directly, on the
InferenceService's own messages, with the real :class:`~ale_roll.engines.batcher.MicroBatcher` in
front of an engine that answers at once (so only the call path is measured):

- ``noop``: unary ``GetModelInfo`` (nothing behind it);
- ``unary``: unary ``GenerateBatch`` of one request, answered by the batcher's driver thread;
- ``stream``: server-streaming ``Generate``, answered the same way.

Each is served by a sync ``grpc.server`` (ThreadPoolExecutor) and by a ``grpc.aio`` server (async
handlers awaiting the batcher's future), and called by 64 client threads with sync stubs and by 64
coroutines on one event loop with an aio stub. Reported: CPU microseconds per call in the server
process (/proc) and in the client process (``time.process_time``), and calls/s. The server runs
in its own process. Compare the rows with each other (same run, same load), not across runs.

The model section (``model``) is the end-to-end check: 64 single 1-token ``Generate`` calls on the
tiny model bench/engines.py's service section uses, to ``ale-roll serve-inference`` (a grpc.aio
server since 2026-12-02; this file's sync-vs-aio rows are what decided it), from both client styles,
over the same 64 requests made in-process through ``BatchingGenerator``
(``service_vs_inprocess``'s baseline); best of ``--model-repeats``, interleaved.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent import futures
from pathlib import Path
from typing import Any

CONCURRENCY = 64
KINDS = ("noop", "unary", "stream")


def _servicer_parts() -> tuple[Any, Any, Any]:
    from ale_proto.v1 import common_pb2, inference_pb2
    from ale_roll.engines.base import Generation, SamplingParams
    from ale_roll.engines.batcher import MicroBatcher
    from ale_roll.types import StopReason

    class Instant:
        """An engine that answers every prompt with one token at once."""

        policy_version = 0
        max_model_len = 0

        def generate(self, prompts: list[list[int]], params: SamplingParams, ids: list[str]) -> list[Generation]:
            return [Generation(r, [1], [0.0], StopReason.LENGTH, 0, p) for p, r in zip(prompts, ids)]

        def abort(self, rid: str) -> bool:
            return False

    batcher = MicroBatcher(Instant())  # type: ignore[arg-type]
    params = SamplingParams(max_tokens=1)

    def response(g: Generation) -> Any:
        return inference_pb2.GenerateResponse(request_id=g.request_id, token_ids=g.token_ids, logprobs=g.logprobs,
                                              finished=True, stop_reason=common_pb2.STOP_REASON_LENGTH)

    return batcher, params, response


def serve(mode: str, port_file: Path) -> None:
    import grpc
    from ale_proto.v1 import inference_pb2, inference_pb2_grpc

    batcher, params, response = _servicer_parts()
    info = inference_pb2.GetModelInfoResponse(model="x")

    if mode == "sync":
        class Sync(inference_pb2_grpc.InferenceServiceServicer):
            def GetModelInfo(self, request: Any, context: Any) -> Any:
                return info

            def GenerateBatch(self, request: Any, context: Any) -> Any:
                r = request.requests[0]
                g = batcher.submit(list(r.prompt_token_ids), params).result()
                return inference_pb2.GenerateBatchResponse(results=[response(g)])

            def Generate(self, request: Any, context: Any) -> Any:
                yield response(batcher.submit(list(request.prompt_token_ids), params).result())

        server = grpc.server(futures.ThreadPoolExecutor(512))
        inference_pb2_grpc.add_InferenceServiceServicer_to_server(Sync(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        port_file.write_text(str(port))
        server.wait_for_termination()
        return

    class Aio(inference_pb2_grpc.InferenceServiceServicer):
        async def GetModelInfo(self, request: Any, context: Any) -> Any:
            return info

        async def GenerateBatch(self, request: Any, context: Any) -> Any:
            r = request.requests[0]
            g = await asyncio.wrap_future(batcher.submit(list(r.prompt_token_ids), params))
            return inference_pb2.GenerateBatchResponse(results=[response(g)])

        async def Generate(self, request: Any, context: Any) -> Any:
            yield response(await asyncio.wrap_future(batcher.submit(list(request.prompt_token_ids), params)))

    async def main() -> None:
        server = grpc.aio.server()
        inference_pb2_grpc.add_InferenceServiceServicer_to_server(Aio(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        port_file.write_text(str(port))
        await server.wait_for_termination()

    asyncio.run(main())


def model_section(work: Path, repeats: int) -> dict[str, Any]:
    """64 single 1-token ``Generate`` calls on the tiny model to ``ale-roll serve-inference``, per
    client style, over the same 64 requests made in-process through ``BatchingGenerator`` (best of
    ``repeats``, interleaved)."""
    import torch
    from ale_proto.v1 import inference_pb2
    from ale_roll.engines.base import SamplingParams
    from ale_roll.engines.hf_engine import HFInferenceEngine
    from ale_roll.engines.inference_client import sampling_to_proto
    from ale_roll.models import build_tiny_model, load_model
    from ale_roll.rollout.generation import BatchingGenerator

    path = work / "service-tiny"  # the same model bench/engines.py's service section builds
    if not (path / "config.json").exists():
        build_tiny_model(path)
    params = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True)
    prompts = [[1, 5 + i % 300, 7 + (i * 7) % 300, 9 + (i * 13) % 300] for i in range(CONCURRENCY)]
    torch.set_num_threads(1)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # as `ale up` runs the service
    port = work / "percall-service.port"
    port.unlink(missing_ok=True)
    procs = [subprocess.Popen([sys.executable, "-m", "ale_roll.cli", "serve-inference", "--model", str(path),
                               "--port-file", str(port)], env=env, stdout=subprocess.DEVNULL)]
    generator = BatchingGenerator(HFInferenceEngine(load_model(path)[0]), max_batch=256, timeout_s=300)
    clients: dict[str, _Clients] = {}
    best: dict[str, float] = {}
    try:
        deadline = time.monotonic() + 300
        while not port.exists():
            if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
                raise RuntimeError("ale-roll serve-inference did not start")
            time.sleep(0.2)
        clients["service"] = _Clients(f"127.0.0.1:{port.read_text()}")
        sp = sampling_to_proto(params)
        clients["service"].reqs["stream"] = [inference_pb2.GenerateRequest(prompt_token_ids=p, sampling=sp)
                                             for p in prompts]
        loop = clients["service"].loop

        async def inprocess() -> None:
            await asyncio.gather(*(generator.generate(p, params) for p in prompts))

        ways: dict[str, Any] = {"inprocess": lambda: loop.run_until_complete(inprocess())}
        for style in ("threads", "aio"):
            ways[f"service/{style}"] = lambda c=clients["service"], s=style: c.run(s, "stream")
        for fn in ways.values():
            fn()  # warm-up
        for _ in range(repeats):
            for w, fn in ways.items():
                t0 = time.perf_counter()
                fn()
                best[w] = max(best.get(w, 0.0), CONCURRENCY / (time.perf_counter() - t0))
        loop.run_until_complete(generator.close())
    finally:
        for c in clients.values():
            c.close()
        for p in procs:
            p.terminate()
            p.wait(30)
    out: dict[str, Any] = {f"{w}_vs_inprocess": v / best["inprocess"] for w, v in best.items() if w != "inprocess"}
    out["tokens_per_s"] = best
    return out


def _proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _requests() -> dict[str, Any]:
    from ale_proto.v1 import inference_pb2

    one = inference_pb2.GenerateRequest(prompt_token_ids=[1, 5, 7, 9], sampling=inference_pb2.SamplingParams(max_tokens=1))
    return {"noop": inference_pb2.GetModelInfoRequest(), "unary": inference_pb2.GenerateBatchRequest(requests=[one]),
            "stream": one}


class _Clients:
    """64 client threads with sync stubs and 64 coroutines on one loop with an aio stub, to one address."""

    def __init__(self, address: str) -> None:
        import grpc
        from ale_proto.v1 import inference_pb2_grpc

        self.reqs = _requests()
        self.channel = grpc.insecure_channel(address)
        self.stub = inference_pb2_grpc.InferenceServiceStub(self.channel)
        self.pool = futures.ThreadPoolExecutor(CONCURRENCY)
        self.loop = asyncio.new_event_loop()

        async def open_aio() -> tuple[Any, Any]:
            ch = grpc.aio.insecure_channel(address)
            return ch, inference_pb2_grpc.InferenceServiceStub(ch)

        self.achannel, self.astub = self.loop.run_until_complete(open_aio())

    def _sync_call(self, kind: str) -> None:
        if kind == "noop":
            self.stub.GetModelInfo(self.reqs[kind], timeout=60)
        elif kind == "unary":
            self.stub.GenerateBatch(self.reqs[kind], timeout=60)
        else:
            list(self.stub.Generate(self._stream_request(), timeout=60))

    async def _aio_call(self, kind: str) -> None:
        if kind == "noop":
            await self.astub.GetModelInfo(self.reqs[kind], timeout=60)
        elif kind == "unary":
            await self.astub.GenerateBatch(self.reqs[kind], timeout=60)
        else:
            async for _ in self.astub.Generate(self._stream_request(), timeout=60):
                pass

    def _stream_request(self) -> Any:
        # One request for every call, or (the model section) a distinct prompt per call in turn.
        req = self.reqs["stream"]
        if not isinstance(req, list):
            return req
        self._turn = (getattr(self, "_turn", -1) + 1) % len(req)
        return req[self._turn]

    def run(self, style: str, kind: str) -> None:
        """One batch of 64 concurrent calls."""
        if style == "threads":
            list(self.pool.map(self._sync_call, [kind] * CONCURRENCY))
            return

        async def all_() -> None:
            await asyncio.gather(*(self._aio_call(kind) for _ in range(CONCURRENCY)))
        self.loop.run_until_complete(all_())

    def close(self) -> None:
        self.pool.shutdown()
        self.channel.close()
        self.loop.run_until_complete(self.achannel.close())
        self.loop.close()


def measure(clients: _Clients, pid: int, style: str, kind: str, rounds: int) -> dict[str, float]:
    """CPU µs per call on each side and calls/s over ``rounds`` batches of 64 concurrent calls."""
    clients.run(style, kind)  # warm-up
    s0, c0, t0 = _proc_cpu_s(pid), time.process_time(), time.perf_counter()
    for _ in range(rounds):
        clients.run(style, kind)
    wall = time.perf_counter() - t0
    calls = rounds * CONCURRENCY
    return {"server_cpu_us_per_call": (_proc_cpu_s(pid) - s0) / calls * 1e6,
            "client_cpu_us_per_call": (time.process_time() - c0) / calls * 1e6, "calls_per_s": calls / wall}


def _start(mode: str, port_file: Path) -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen([sys.executable, __file__, "--serve", mode, "--port-file", str(port_file)])
    deadline = time.monotonic() + 60
    while not port_file.exists() or not port_file.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"the {mode} server did not start")
        time.sleep(0.05)
    return proc, f"127.0.0.1:{port_file.read_text()}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=20, help="batches of 64 concurrent calls per measurement")
    p.add_argument("--repeats", type=int, default=3, help="interleaved measurements of every cell (medians)")
    p.add_argument("--model-repeats", type=int, default=10,
                   help="the model section (best of N): 64 single Generate calls on the tiny model per stack; 0 skips it")
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "ale-bench-engines"),
                   help="cache directory for the tiny model (shared with bench/engines.py)")
    p.add_argument("--serve", choices=("sync", "aio"), help=argparse.SUPPRESS)
    p.add_argument("--port-file", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        serve(args.serve, Path(args.port_file))
        return
    from _stdout import json_stdout  # a sibling module: run as a script, bench/ is on sys.path

    with json_stdout() as emit:  # stdout carries the JSON alone (libraries print on their own)
        result: dict[str, Any] = run(args.rounds, args.repeats) if args.repeats else {"load_avg_1m": os.getloadavg()[0]}
        if args.model_repeats:
            work = Path(args.work)
            work.mkdir(parents=True, exist_ok=True)
            result["model"] = model_section(work, args.model_repeats)
            result["load_avg_1m_end"] = os.getloadavg()[0]
        emit(json.dumps(result, indent=1))


def run(rounds: int, repeats: int) -> dict[str, Any]:
    """Both servers in their own processes, every cell measured ``repeats`` times interleaved."""
    result: dict[str, Any] = {"load_avg_1m": os.getloadavg()[0], "concurrency": CONCURRENCY, "rounds": rounds,
                              "repeats": repeats}
    samples: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        servers: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
        clients: dict[str, _Clients] = {}
        try:
            for mode in ("sync", "aio"):
                servers[mode] = _start(mode, Path(tmp) / f"{mode}.port")
                clients[mode] = _Clients(servers[mode][1])
            # Interleaved (every cell once per repeat), medians: the shared machine's load drifts.
            for _ in range(repeats):
                for mode, (proc, _) in servers.items():
                    for kind in KINDS:
                        for style in ("threads", "aio"):
                            key = f"{mode}_server/{kind}/{style}"
                            samples.setdefault(key, []).append(measure(clients[mode], proc.pid, style, kind, rounds))
        finally:
            for c in clients.values():
                c.close()
            for proc, _ in servers.values():
                proc.terminate()
                proc.wait(30)
    for key, rows in samples.items():
        result[key] = {m: statistics.median(r[m] for r in rows) for m in rows[0]}

    def total(key: str) -> float:
        return float(result[key]["server_cpu_us_per_call"] + result[key]["client_cpu_us_per_call"])
    def ratio(a: float, b: float) -> float:  # /proc counts 10 ms ticks: a short run may read 0
        return a / b if b else float("nan")

    for kind in KINDS:
        # The headline comparisons: today (sync server, thread clients) vs aio on both sides, and
        # the server side alone with the same (aio) clients.
        today, aio = f"sync_server/{kind}/threads", f"aio_server/{kind}/aio"
        result[f"{kind}_total_cpu_aio_vs_sync"] = ratio(total(aio), total(today))
        result[f"{kind}_server_cpu_aio_vs_sync"] = ratio(result[aio]["server_cpu_us_per_call"],
                                                         result[f"sync_server/{kind}/aio"]["server_cpu_us_per_call"])
        result[f"{kind}_client_cpu_aio_vs_threads"] = ratio(result[aio]["client_cpu_us_per_call"],
                                                            result[f"aio_server/{kind}/threads"]["client_cpu_us_per_call"])
    result["load_avg_1m_end"] = os.getloadavg()[0]
    return result


if __name__ == "__main__":
    main()
