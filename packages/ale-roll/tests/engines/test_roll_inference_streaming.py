"""Token streaming: the HF engine reports each token as it is sampled, the batcher hands each
request its own, and the InferenceService's ``Generate(stream=True)`` sends them as they come."""

from __future__ import annotations

import time

import grpc
import pytest
from ale_proto.v1 import inference_pb2, inference_pb2_grpc
from ale_roll.engines.base import SamplingParams, TokenStreamingEngine
from ale_roll.engines.batcher import MicroBatcher
from ale_roll.engines.hf_engine import HFInferenceEngine
from ale_roll.engines.inference_client import sampling_to_proto
from ale_roll.engines.inference_server import InferenceServicer, serve
from ale_roll.models import load_model


@pytest.fixture(scope="module")
def engine(tiny_model_dir) -> HFInferenceEngine:
    return HFInferenceEngine(load_model(tiny_model_dir)[0])


def _reported(engine: HFInferenceEngine, prompts: list[list[int]], params: SamplingParams) -> tuple[dict, list]:
    got: dict[int, list[tuple[int, float]]] = {i: [] for i in range(len(prompts))}
    gens = engine.generate_streaming(prompts, params, None, lambda r, t, lp: got[r].append((t, lp)))
    return got, gens


def test_the_hf_engine_reports_exactly_what_it_returns(engine, prompt_ids):
    assert isinstance(engine, TokenStreamingEngine)
    prompts = [prompt_ids, prompt_ids[:3], prompt_ids[2:6]]
    greedy = SamplingParams(max_tokens=10, temperature=0.0, ignore_eos=True)
    plain = engine.generate(prompts, greedy)
    # A stop token the greedy run samples at its 4th step: that row ends there, the others run on.
    stop = plain[0].token_ids[3]
    cases = [greedy, SamplingParams(max_tokens=10, temperature=1.0, seed=7, ignore_eos=True),
             SamplingParams(max_tokens=10, temperature=0.0, ignore_eos=True, stop_token_ids=(stop,))]
    for params in cases:
        got, gens = _reported(engine, prompts, params)
        for row, gen in enumerate(gens):
            assert [t for t, _ in got[row]] == gen.token_ids
            assert [lp for _, lp in got[row]] == pytest.approx(gen.logprobs, abs=1e-6)
    assert gens[0].stop_reason == "stop" and len(gens[0].token_ids) <= 4  # the stop case did stop
    assert engine.generate(prompts, greedy)[0].token_ids == plain[0].token_ids  # unchanged without a listener


def test_an_aborted_row_reports_a_prefix_of_what_it_returns(engine, prompt_ids):
    got: list[int] = []

    def listen(row: int, tok: int, lp: float) -> None:
        got.append(tok)
        if len(got) == 5:
            engine.abort("streamed")

    gen = engine.generate_streaming([prompt_ids], SamplingParams(max_tokens=50, ignore_eos=True), ["streamed"], listen)[0]
    assert gen.stop_reason == "aborted" and got == gen.token_ids and 5 <= len(got) < 50


def test_the_batcher_gives_each_request_its_own_tokens_up_to_its_max(engine, prompt_ids):
    batcher = MicroBatcher(engine, window_s=0.2)  # both requests in one engine call
    try:
        heard: dict[str, list[int]] = {"short": [], "long": []}
        futs = batcher.submit_many(
            [prompt_ids, prompt_ids[:4]],
            [SamplingParams(max_tokens=3, temperature=0.0, ignore_eos=True),
             SamplingParams(max_tokens=9, temperature=0.0, ignore_eos=True)],
            ["short", "long"],
            [lambda t, lp: heard["short"].append(t), lambda t, lp: heard["long"].append(t)])
        gens = [f.result(60) for f in futs]
        assert batcher.engine_calls == 1 and batcher.streams_tokens
        assert heard["short"] == gens[0].token_ids and len(gens[0].token_ids) == 3
        assert heard["long"] == gens[1].token_ids and len(gens[1].token_ids) == 9
        # A listener that raises is dropped; its request and the batch still complete.
        bad = batcher.submit(prompt_ids, SamplingParams(max_tokens=4, ignore_eos=True), "bad",
                             on_token=lambda t, lp: 1 / 0)
        assert len(bad.result(60).token_ids) == 4
    finally:
        batcher.close()


class PacedEngine(HFInferenceEngine):
    """The HF engine, 5 ms per reported token: a 400-token stream takes seconds, so "still running
    when the first message arrived" does not depend on how fast this machine is."""

    def _generate(self, prompts, params, request_ids, on_token):  # type: ignore[no-untyped-def]
        if on_token is None:
            return super()._generate(prompts, params, request_ids, None)

        def paced(row: int, tok: int, lp: float) -> None:
            time.sleep(0.005)
            on_token(row, tok, lp)

        return super()._generate(prompts, params, request_ids, paced)


@pytest.fixture(scope="module")
def stub(tiny_model_dir, tiny_tokenizer):
    servicer = InferenceServicer(PacedEngine(load_model(tiny_model_dir)[0]), tiny_tokenizer, backend="hf")
    server, port = serve(servicer)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield inference_pb2_grpc.InferenceServiceStub(channel), servicer
    channel.close()
    servicer.close()
    server.stop(grace=None)


def _request(prompt: list[int], max_tokens: int, stream: bool, rid: str = "", stop: tuple[str, ...] = ()) -> inference_pb2.GenerateRequest:
    sp = sampling_to_proto(SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True))
    sp.stop.extend(stop)
    return inference_pb2.GenerateRequest(request_id=rid, prompt_token_ids=prompt, sampling=sp, stream=stream)


def test_a_streamed_generate_sends_tokens_while_it_generates(stub, prompt_ids):
    stub, servicer = stub
    whole = list(stub.Generate(_request(prompt_ids, 24, stream=False), timeout=60))
    assert len(whole) == 1 and whole[0].finished and len(whole[0].token_ids) == 24
    messages = list(stub.Generate(_request(prompt_ids, 24, stream=True), timeout=60))
    assert len(messages) > 2 and messages[-1].finished and not any(m.finished for m in messages[:-1])
    assert [t for m in messages for t in m.token_ids] == list(whole[0].token_ids)
    assert [lp for m in messages for lp in m.logprobs] == pytest.approx(list(whole[0].logprobs), abs=1e-6)
    assert messages[-1].stop_reason == whole[0].stop_reason
    # The first message arrives while the request is still generating.
    call = stub.Generate(_request(prompt_ids, 400, stream=True, rid="live"), timeout=120)
    first = next(call)
    running = servicer.batcher.running()
    rest = list(call)
    assert first.token_ids and not first.finished and "live" in running
    assert len(first.token_ids) + sum(len(m.token_ids) for m in rest) == 400


def test_a_streamed_request_with_stop_strings_is_answered_whole(stub, prompt_ids, tiny_tokenizer):
    stub, _ = stub
    plain = list(stub.Generate(_request(prompt_ids, 12, stream=False), timeout=60))[0]
    stop = tiny_tokenizer.decode(list(plain.token_ids[4:6]))
    messages = list(stub.Generate(_request(prompt_ids, 12, stream=True, stop=(stop,)), timeout=60))
    assert len(messages) == 1 and messages[0].finished and len(messages[0].token_ids) <= 6


def test_a_streaming_caller_that_leaves_aborts_its_request(stub, prompt_ids):
    stub, servicer = stub
    call = stub.Generate(_request(prompt_ids, 4000, stream=True, rid="leaver"), timeout=120)
    assert next(call).token_ids and "leaver" in servicer.batcher.running()  # (paced: seconds to go)
    call.cancel()
    deadline = time.monotonic() + 10
    while "leaver" in servicer.batcher.running():
        assert time.monotonic() < deadline, "the abandoned stream kept generating"
        time.sleep(0.01)
