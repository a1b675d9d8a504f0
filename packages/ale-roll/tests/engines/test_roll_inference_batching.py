"""Micro-batching in the InferenceService: real gRPC server on a free port, real tiny HF model."""

from __future__ import annotations

import threading
import time
from concurrent import futures

import grpc
import pytest
from ale_proto.v1 import common_pb2, inference_pb2, inference_pb2_grpc
from ale_roll.engines.base import SamplingParams
from ale_roll.engines.hf_engine import HFInferenceEngine
from ale_roll.engines.inference_client import InferenceClient, sampling_to_proto
from ale_roll.engines.inference_server import InferenceServicer, serve
from ale_roll.models import build_tiny_model, load_model, load_tokenizer

GREEDY = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)


class CountingEngine:
    """Delegates to a real engine and records the batch size of every ``generate`` call."""

    def __init__(self, inner: HFInferenceEngine) -> None:
        self.inner, self.model, self.batch_sizes = inner, inner.model, []

    @property
    def policy_version(self) -> int:
        return self.inner.policy_version

    def generate(self, prompts, params, request_ids=None):
        self.batch_sizes.append(len(prompts))
        return self.inner.generate(prompts, params, request_ids)

    def abort(self, request_id):
        return self.inner.abort(request_id)

    def update_weights(self, weights, version):
        return self.inner.update_weights(weights, version)

    @property
    def max_model_len(self) -> int:
        return self.inner.max_model_len

    def close(self) -> None:
        self.inner.close()


def _start(engine, tokenizer, **kw):
    servicer = InferenceServicer(engine, tokenizer, backend="hf", **kw)
    server, port = serve(servicer)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    return servicer, server, port, inference_pb2_grpc.InferenceServiceStub(channel)


@pytest.fixture
def counted(tiny_model_dir, tiny_tokenizer):
    engine = CountingEngine(HFInferenceEngine(load_model(tiny_model_dir)[0]))
    servicer, server, port, stub = _start(engine, tiny_tokenizer, batch_window_s=0.005)
    yield engine, servicer, port, stub
    servicer.close()
    server.stop(grace=None)


def _prompts(prompt_ids: list[int], n: int) -> list[list[int]]:
    """n different prompts: the chat prompt with varying prefixes cut off and a varying last token."""
    return [prompt_ids[i % 5:] + [3 + i % 200] for i in range(n)]


def _req(rid: str, prompt: list[int], params: SamplingParams = GREEDY, **kw) -> inference_pb2.GenerateRequest:
    return inference_pb2.GenerateRequest(request_id=rid, prompt_token_ids=prompt, sampling=sampling_to_proto(params), **kw)


def _one(stub, req) -> inference_pb2.GenerateResponse:
    msgs = list(stub.Generate(req, timeout=120))
    assert msgs and msgs[-1].finished
    return msgs[-1]


def test_generate_batch_equals_per_request_generate(counted, prompt_ids):
    engine, _, _, stub = counted
    prompts = _prompts(prompt_ids, 6)
    singles = [_one(stub, _req(f"s{i}", p)) for i, p in enumerate(prompts)]
    assert engine.batch_sizes == [1] * 6
    batch = stub.GenerateBatch(inference_pb2.GenerateBatchRequest(
        requests=[_req(f"b{i}", p) for i, p in enumerate(prompts)]), timeout=120)
    assert engine.batch_sizes[6:] == [6]  # one engine call for the whole batch
    assert [r.request_id for r in batch.results] == [f"b{i}" for i in range(6)]
    for single, res in zip(singles, batch.results):
        assert list(res.token_ids) == list(single.token_ids) and len(res.token_ids) == 6
        assert list(res.logprobs) == pytest.approx(list(single.logprobs), abs=1e-4)
        assert res.finished and res.stop_reason == single.stop_reason == common_pb2.STOP_REASON_LENGTH
        assert res.policy_version == 0 and res.text == single.text


def test_an_empty_generate_batch_answers_at_once(counted):
    engine, _, _, stub = counted
    assert list(stub.GenerateBatch(inference_pb2.GenerateBatchRequest(), timeout=10).results) == []
    assert engine.batch_sizes == []


def test_concurrent_generate_calls_are_batched(counted, prompt_ids, tiny_model_dir):
    engine, servicer, _, stub = counted
    prompts = _prompts(prompt_ids, 64)
    # In-process reference in one call (batch == per-request is the test above).
    expected = [g.token_ids for g in HFInferenceEngine(load_model(tiny_model_dir)[0]).generate(prompts, GREEDY)]
    with futures.ThreadPoolExecutor(64) as pool:
        got = list(pool.map(lambda a: _one(stub, _req(f"c{a[0]}", a[1])), enumerate(prompts)))
    assert [list(g.token_ids) for g in got] == expected
    assert [g.request_id for g in got] == [f"c{i}" for i in range(64)]
    assert sum(engine.batch_sizes) == 64 and len(engine.batch_sizes) < 64
    assert max(engine.batch_sizes) > 1 and servicer.batcher.engine_calls == len(engine.batch_sizes)


def test_client_generate_is_one_batch_call(counted, prompt_ids):
    engine, _, port, _ = counted
    client = InferenceClient(f"127.0.0.1:{port}", timeout_s=120)
    try:
        gens = client.generate(_prompts(prompt_ids, 10), GREEDY, [f"r{i}" for i in range(10)])
    finally:
        client.close()
    assert engine.batch_sizes == [10]
    assert [g.request_id for g in gens] == [f"r{i}" for i in range(10)]
    assert all(len(g.token_ids) == 6 and g.stop_reason == "length" for g in gens)


def test_mixed_max_tokens_share_a_call_and_are_cut_back(counted, prompt_ids):
    engine, _, _, stub = counted
    lengths = [2, 5, 9]
    reqs = [_req(f"m{n}", prompt_ids, SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True)) for n in lengths]
    res = stub.GenerateBatch(inference_pb2.GenerateBatchRequest(requests=reqs), timeout=120).results
    assert engine.batch_sizes == [3]
    assert [len(r.token_ids) for r in res] == lengths
    assert list(res[0].token_ids) == list(res[2].token_ids)[:2]
    assert all(r.stop_reason == common_pb2.STOP_REASON_LENGTH for r in res)


def test_queued_request_is_aborted_without_running(counted, prompt_ids):
    engine, servicer, port, stub = counted
    long_req = _req("long", prompt_ids, SamplingParams(max_tokens=100_000, temperature=1.0, ignore_eos=True))
    out: dict = {}
    t_long = threading.Thread(target=lambda: out.update(long=_one(stub, long_req)), daemon=True)
    t_long.start()
    deadline = time.monotonic() + 60
    while not engine.batch_sizes:  # the long request is now inside the engine
        assert time.monotonic() < deadline
        time.sleep(0.01)
    # Different sampling params: cannot join the running call, so it waits in the queue.
    t_q = threading.Thread(target=lambda: out.update(queued=_one(stub, _req("queued", prompt_ids))), daemon=True)
    t_q.start()
    while "queued" not in servicer.batcher.running():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert stub.Abort(inference_pb2.AbortRequest(request_ids=["queued"]), timeout=30).aborted == 1
    t_q.join(30)
    assert out["queued"].stop_reason == common_pb2.STOP_REASON_ABORTED and len(out["queued"].token_ids) == 0
    assert t_long.is_alive() and engine.batch_sizes == [1]  # the queued one never reached the engine
    assert stub.Abort(inference_pb2.AbortRequest(), timeout=30).aborted == 1  # abort everything
    t_long.join(60)
    assert out["long"].stop_reason == common_pb2.STOP_REASON_ABORTED
    assert servicer.batcher.running() == []


def test_stop_strings_cut_the_completion(counted, prompt_ids, tiny_tokenizer):
    _, _, _, stub = counted
    # Greedy decoding of a random model repeats one token; a seeded sample is varied and reproducible.
    params = SamplingParams(max_tokens=24, temperature=1.0, ignore_eos=True, seed=7)
    full = _one(stub, _req("full", prompt_ids, params))
    assert list(_one(stub, _req("again", prompt_ids, params)).token_ids) == list(full.token_ids)
    text = tiny_tokenizer.decode(list(full.token_ids))
    stop = text[len(text) // 2:len(text) // 2 + 2]
    assert len(stop) == 2
    req = _req("stopped", prompt_ids, params)
    req.sampling.stop.append(stop)
    got = _one(stub, req)
    toks = list(got.token_ids)
    assert got.stop_reason == common_pb2.STOP_REASON_STOP
    assert toks == list(full.token_ids)[:len(toks)] and len(got.logprobs) == len(toks)
    assert stop in tiny_tokenizer.decode(toks) and stop not in tiny_tokenizer.decode(toks[:-1])
    assert stop not in got.text and text.startswith(got.text + stop)


def test_max_tokens_is_clamped_to_the_context(tmp_path, prompt_ids):
    model_dir = build_tiny_model(tmp_path / "short", max_position_embeddings=48)
    tok = load_tokenizer(model_dir)
    servicer, server, _, stub = _start(HFInferenceEngine(load_model(model_dir)[0]), tok)
    try:
        assert servicer.max_model_len == 48
        prompt = prompt_ids[:20]
        big = SamplingParams(max_tokens=100_000, temperature=0.0, ignore_eos=True)
        res = stub.GenerateBatch(inference_pb2.GenerateBatchRequest(
            requests=[_req("a", prompt, big), _req("b", prompt[:10], big)]), timeout=120).results
        assert [len(r.token_ids) for r in res] == [48 - 20, 48 - 10]
        assert all(r.stop_reason == common_pb2.STOP_REASON_LENGTH for r in res)
        with pytest.raises(grpc.RpcError) as err:
            _one(stub, _req("too-long", list(range(3, 60)), big))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "context" in err.value.details()
    finally:
        servicer.close()
        server.stop(grace=None)


def test_duplicate_request_ids_are_refused(counted, prompt_ids):
    engine, servicer, _, stub = counted
    with pytest.raises(grpc.RpcError) as err:
        stub.GenerateBatch(inference_pb2.GenerateBatchRequest(
            requests=[_req("same", prompt_ids), _req("same", prompt_ids)]), timeout=30)
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert engine.batch_sizes == [] and servicer.batcher.running() == []


def test_abort_during_the_batch_window_keeps_the_batcher_alive(tiny_model_dir, tiny_tokenizer, prompt_ids):
    engine = CountingEngine(HFInferenceEngine(load_model(tiny_model_dir)[0]))
    servicer, server, _, stub = _start(engine, tiny_tokenizer, batch_window_s=0.5)
    try:
        batcher = servicer.batcher
        fut = batcher.submit(prompt_ids, GREEDY, "early")
        assert batcher.abort("early") and fut.result(5).stop_reason == "aborted"  # aborted inside the window
        time.sleep(0.6)
        assert batcher._thread.is_alive()
        assert len(_one(stub, _req("after", prompt_ids)).token_ids) == 6
        assert engine.batch_sizes == [1]
    finally:
        servicer.close()
        server.stop(grace=None)
