"""The one batching layer: continuous batching across clients, Pause/Resume, the in-process path.

One real InferenceService on a free port over the tiny HF model (module-scoped: every test resets
what it changes); the in-process path is a BatchingGenerator over the same servicer's batcher.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from ale_proto.v1 import inference_pb2, inference_pb2_grpc
from ale_roll.engines.base import SamplingParams
from ale_roll.engines.hf_engine import HFInferenceEngine
from ale_roll.engines.inference_client import InferenceClient, sampling_to_proto
from ale_roll.engines.inference_server import InferenceServicer, serve
from ale_roll.models import load_model
from ale_roll.rollout.generation import BatchingGenerator, GenerationTimeout

GREEDY = SamplingParams(max_tokens=3, temperature=0.0, ignore_eos=True)


class Recorder:
    """A real engine that records each call's batch size, can be slowed down, and notes whether
    the batcher was paused when weights were loaded."""

    def __init__(self, inner: HFInferenceEngine) -> None:
        self.inner, self.batch_sizes, self.delay_s = inner, [], 0.0
        self.paused_during_update: list[bool] = []
        self.servicer: InferenceServicer | None = None
        self.started = threading.Event()

    @property
    def policy_version(self) -> int:
        return self.inner.policy_version

    def generate(self, prompts: Any, params: SamplingParams, request_ids: Any = None) -> Any:
        self.batch_sizes.append(len(prompts))
        self.started.set()
        time.sleep(self.delay_s)
        return self.inner.generate(prompts, params, request_ids)

    def abort(self, request_id: str) -> bool:
        return self.inner.abort(request_id)

    def update_weights(self, weights: Any, version: int) -> Any:
        assert self.servicer is not None
        self.paused_during_update.append(self.servicer.batcher.is_paused)
        return self.inner.update_weights(weights, version)

    @property
    def max_model_len(self) -> int:
        return self.inner.max_model_len

    def close(self) -> None:
        self.inner.close()


@pytest.fixture(scope="module")
def service(tiny_model_dir, tiny_tokenizer) -> Iterator[tuple[Recorder, InferenceServicer, Any, str]]:
    engine = Recorder(HFInferenceEngine(load_model(tiny_model_dir)[0]))
    servicer = InferenceServicer(engine, tiny_tokenizer, backend="hf", pause_timeout_s=30)
    engine.servicer = servicer
    server, port = serve(servicer)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield engine, servicer, inference_pb2_grpc.InferenceServiceStub(channel), f"127.0.0.1:{port}"
    channel.close()
    servicer.close()
    server.stop(grace=None)


@pytest.fixture
def svc(service):
    engine, servicer, stub, address = service
    engine.batch_sizes.clear()
    engine.delay_s = 0.0
    engine.started.clear()
    yield service
    stub.Resume(inference_pb2.ResumeRequest(), timeout=30)
    servicer.batcher.pause_timeout_s = 30
    assert not servicer.batcher.is_paused and servicer.batcher.running() == []


def _prompts(prompt_ids: list[int], n: int) -> list[list[int]]:
    return [prompt_ids[i % 5:] + [3 + i % 200] for i in range(n)]


def _req(prompt: list[int], rid: str = "") -> inference_pb2.GenerateRequest:
    return inference_pb2.GenerateRequest(request_id=rid, prompt_token_ids=prompt, sampling=sampling_to_proto(GREEDY))


def _call(stub: Any, prompt: list[int], rid: str = "") -> inference_pb2.GenerateResponse:
    return list(stub.Generate(_req(prompt, rid), timeout=60))[-1]


def _wait(cond: Any, what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def test_concurrent_single_calls_are_batched_and_equal_the_in_process_path(svc, prompt_ids):
    engine, servicer, stub, _ = svc
    prompts = _prompts(prompt_ids, 48)
    before = servicer.batcher.stats.batch_sizes.copy()
    # Hold the engine in its first call so the other single calls arrive while it runs: the
    # continuous batcher must send them out together, not one engine call each.
    engine.delay_s = 0.3
    with futures.ThreadPoolExecutor(48) as pool:
        got = list(pool.map(lambda a: _call(stub, a[1], f"c{a[0]}"), enumerate(prompts)))
    engine.delay_s = 0.0
    sizes = servicer.batcher.stats.batch_sizes - before  # the service's own counters
    assert sum(n * k for n, k in sizes.items()) == 48 and max(sizes) > 1
    assert sum(sizes.values()) < 48 and sum(sizes.values()) == len(engine.batch_sizes)
    assert [g.request_id for g in got] == [f"c{i}" for i in range(48)]

    async def in_process() -> list[Any]:  # the rollout's path: coroutines on a BatchingGenerator
        gen = BatchingGenerator(engine.inner, timeout_s=60)
        try:
            return await asyncio.gather(*(gen.generate(p, GREEDY) for p in prompts))
        finally:
            await gen.close()

    local = asyncio.run(in_process())
    assert [list(g.token_ids) for g in got] == [g.token_ids for g in local]
    for remote, mine in zip(got, local, strict=True):
        assert list(remote.logprobs) == pytest.approx(mine.logprobs, abs=1e-4)


def test_pause_holds_new_calls_and_resume_releases_them(svc, prompt_ids):
    engine, servicer, stub, _ = svc
    first = stub.Pause(inference_pb2.PauseRequest(), timeout=30)
    assert first.newly_paused and first.drained == 0
    assert not stub.Pause(inference_pb2.PauseRequest(), timeout=30).newly_paused  # idempotent
    with futures.ThreadPoolExecutor(4) as pool:
        held = [pool.submit(_call, stub, p, f"h{i}") for i, p in enumerate(_prompts(prompt_ids, 4))]
        _wait(lambda: len(servicer.batcher.running()) == 4, "the calls never reached the service")
        time.sleep(0.2)
        assert not any(f.done() for f in held) and engine.batch_sizes == []  # nothing reached the engine
        assert stub.Resume(inference_pb2.ResumeRequest(), timeout=30).resumed
        results = [f.result(60) for f in held]
    assert all(len(r.token_ids) == 3 for r in results)
    assert engine.batch_sizes == [4]  # released together: one engine call
    assert not stub.Resume(inference_pb2.ResumeRequest(), timeout=30).resumed  # nothing to resume


def test_pause_waits_for_the_running_call(svc, prompt_ids):
    engine, servicer, stub, _ = svc
    engine.delay_s = 0.4
    with futures.ThreadPoolExecutor(1) as pool:
        running = pool.submit(_call, stub, prompt_ids, "running")
        assert engine.started.wait(30)
        resp = stub.Pause(inference_pb2.PauseRequest(), timeout=30)
        # The in-flight call finished (on the old weights) before Pause returned.
        assert resp.drained == 1 and servicer.batcher.running() == [] and engine.batch_sizes == [1]
        assert len(running.result(30).token_ids) == 3


def test_a_call_held_past_the_pause_timeout_fails_clearly(svc, prompt_ids):
    engine, servicer, stub, _ = svc
    servicer.batcher.pause_timeout_s = 0.2
    stub.Pause(inference_pb2.PauseRequest(), timeout=30)
    t0 = time.monotonic()
    with pytest.raises(grpc.RpcError) as err:
        _call(stub, prompt_ids, "late")
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE and "paused" in err.value.details()
    assert 0.2 <= time.monotonic() - t0 < 10 and engine.batch_sizes == []
    assert stub.Resume(inference_pb2.ResumeRequest(), timeout=30).resumed
    assert len(_call(stub, prompt_ids, "after").token_ids) == 3  # the service works again


def test_in_process_callers_wait_out_a_pause_and_time_out_after_it(svc, prompt_ids):
    engine, servicer, _, _ = svc

    async def go() -> None:
        gen = BatchingGenerator(engine, timeout_s=0.3)
        try:
            async with gen.paused():
                with pytest.raises(GenerationTimeout):
                    await gen.generate(prompt_ids, GREEDY)
                task = asyncio.ensure_future(gen.generate(prompt_ids, GREEDY))
                await asyncio.sleep(0.05)
                assert not task.done()
            assert len((await task).token_ids) == 3  # released by the end of the pause
        finally:
            await gen.close()

    asyncio.run(go())
    assert engine.batch_sizes == [1]


def test_update_weights_through_the_client_loads_inside_a_pause(svc, tiny_model_dir):
    engine, servicer, _, address = svc
    client = InferenceClient(address, timeout_s=60)
    try:
        weights = {k: v.clone() for k, v in load_model(tiny_model_dir)[0].state_dict().items()}
        update = client.update_weights(weights, engine.policy_version + 1)
    finally:
        client.close()
    assert update.version == engine.policy_version and engine.paused_during_update[-1] is True
    assert not servicer.batcher.is_paused  # resumed after the load


def test_a_pause_nobody_resumes_lapses(svc, prompt_ids):
    _, servicer, stub, _ = svc
    servicer.max_pause_s = 0.3
    try:
        assert stub.Pause(inference_pb2.PauseRequest(), timeout=30).newly_paused
        assert servicer.batcher.is_paused
        _wait(lambda: not servicer.batcher.is_paused, "the pause never lapsed", timeout_s=10)
        assert len(_call(stub, prompt_ids, "after-lapse").token_ids) == 3
        assert not stub.Resume(inference_pb2.ResumeRequest(), timeout=30).resumed  # already lifted
    finally:
        servicer.max_pause_s = 600.0


def test_a_sync_cancelled_while_draining_leaves_the_batcher_unpaused(svc, prompt_ids):
    engine, _, _, _ = svc
    engine.delay_s = 0.3

    async def go() -> None:
        gen = BatchingGenerator(engine, timeout_s=30)
        try:
            running = asyncio.ensure_future(gen.generate(prompt_ids, GREEDY))
            await asyncio.to_thread(engine.started.wait, 30)

            async def sync() -> None:
                async with gen.paused():
                    raise AssertionError("never entered: cancelled while the running call drains")

            task = asyncio.ensure_future(sync())
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await running
            for _ in range(200):  # the pause completes on its thread, then is undone
                if not gen.batcher.is_paused:
                    break
                await asyncio.sleep(0.01)
            assert not gen.batcher.is_paused
            assert len((await gen.generate(prompt_ids, GREEDY)).token_ids) == 3
        finally:
            await gen.close()

    asyncio.run(go())


def test_update_weights_reaches_a_service_without_pause(svc, tiny_model_dir, tiny_tokenizer):
    engine, _, _, _ = svc

    class BeforePause(InferenceServicer):
        def Pause(self, request: Any, context: Any) -> Any:  # as a service built before the RPC existed
            return inference_pb2_grpc.InferenceServiceServicer.Pause(self, request, context)

    old = BeforePause(engine.inner, tiny_tokenizer, backend="hf")
    server, port = serve(old)
    client = InferenceClient(f"127.0.0.1:{port}", timeout_s=60)
    try:
        weights = {k: v.clone() for k, v in load_model(tiny_model_dir)[0].state_dict().items()}
        assert client.update_weights(weights, engine.policy_version + 1).version == engine.policy_version
    finally:
        client.close()
        old.close()
        server.stop(grace=None)


@pytest.mark.parametrize("leave", ["deadline", "cancel"])
def test_a_caller_that_goes_away_aborts_its_held_request(svc, prompt_ids, leave):
    """A held Generate whose client gives up (its deadline passes, or it cancels) is aborted in the
    batcher: it never reaches the engine after the resume, and nothing of it stays queued."""
    engine, servicer, stub, _ = svc
    stub.Pause(inference_pb2.PauseRequest(), timeout=30)
    if leave == "deadline":
        with pytest.raises(grpc.RpcError) as err:
            list(stub.Generate(_req(prompt_ids, "gone"), timeout=0.5))
        assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    else:
        call = stub.Generate(_req(prompt_ids, "gone"), timeout=60)
        _wait(lambda: servicer.batcher.running() == ["gone"], "the call never reached the service")
        call.cancel()
    # Well before the pause timeout (30 s) would fail it anyway.
    _wait(lambda: servicer.batcher.running() == [], "the abandoned request stayed queued", timeout_s=5)
    assert stub.Resume(inference_pb2.ResumeRequest(), timeout=30).resumed
    assert len(_call(stub, prompt_ids, "after").token_ids) == 3 and engine.batch_sizes == [1]


def test_many_held_calls_do_not_hold_the_service(svc, prompt_ids):
    """300 Generate calls waiting out a pause (more than any handler pool) leave the service
    answering other calls, and all 300 complete after the resume."""
    engine, servicer, stub, _ = svc
    stub.Pause(inference_pb2.PauseRequest(), timeout=30)
    # A server-streaming call returns at once; its messages are read below.
    held = [stub.Generate(_req(p, f"m{i}"), timeout=120) for i, p in enumerate(_prompts(prompt_ids, 300))]
    _wait(lambda: len(servicer.batcher.running()) == 300, "the calls never reached the service")
    info = stub.GetModelInfo(inference_pb2.GetModelInfoRequest(), timeout=10)
    assert info.max_model_len > 0
    assert stub.Resume(inference_pb2.ResumeRequest(), timeout=30).resumed
    assert all(len(list(c)[-1].token_ids) == 3 for c in held)
    assert sum(engine.batch_sizes) == 300
