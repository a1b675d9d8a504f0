"""InferenceService over gRPC (real server on a free port) wrapping the HF engine."""

from __future__ import annotations

import json
import threading
import time

import grpc
import pytest
import torch
from ale_proto.v1 import inference_pb2, inference_pb2_grpc
from ale_roll.engines.base import InferenceEngine, SamplingParams, WeightSyncError
from ale_roll.engines.hf_engine import HFInferenceEngine
from ale_roll.engines.inference_client import InferenceClient
from ale_roll.engines.inference_server import InferenceServicer, serve
from ale_roll.engines.torch_engine import OptimConfig, TorchTrainEngine
from ale_roll.engines.weight_sync import ProbeCheck, WeightSync
from ale_roll.models import load_model

TOKEN = "s3cret"


@pytest.fixture
def served(tiny_model_dir, tiny_tokenizer):
    engine = HFInferenceEngine(load_model(tiny_model_dir)[0])
    server, port = serve(InferenceServicer(engine, tiny_tokenizer, backend="hf", token=TOKEN))
    client = InferenceClient(f"127.0.0.1:{port}", token=TOKEN, timeout_s=120)
    yield engine, client, port
    client.close()
    server.stop(grace=None)


def test_remote_generation_equals_local(served, prompt_ids):
    engine, client, _ = served
    assert isinstance(client, InferenceEngine)
    greedy = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
    local = engine.generate([prompt_ids], greedy)[0]
    remote = client.generate([prompt_ids, prompt_ids[:4]], greedy)
    assert remote[0].token_ids == local.token_ids and remote[0].stop_reason == "length"
    assert remote[0].logprobs == pytest.approx(local.logprobs, abs=1e-6)
    assert len(remote[1].token_ids) == 8


def test_auth_is_required(served):
    _, _, port = served
    stub = inference_pb2_grpc.InferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
    with pytest.raises(grpc.RpcError) as err:
        stub.GetModelInfo(inference_pb2.GetModelInfoRequest(), timeout=30)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_model_info_template_and_detokenize(served, tiny_tokenizer):
    _, client, _ = served
    info = client.model_info()
    assert info.backend == "hf" and info.policy_version == 0 and "im_start" in info.chat_template
    md = client.metadata
    resp = client.stub.ApplyChatTemplate(inference_pb2.ApplyChatTemplateRequest(
        messages_json=json.dumps([{"role": "user", "content": "hi"}]), add_generation_prompt=True), timeout=30, metadata=md)
    assert resp.text.endswith("<|im_start|>assistant\n")
    back = client.stub.Detokenize(inference_pb2.DetokenizeRequest(token_ids=resp.token_ids), timeout=30, metadata=md)
    assert back.text == resp.text


def test_remote_abort(served, prompt_ids):
    _, client, _ = served
    out: dict = {}
    t = threading.Thread(target=lambda: out.update(g=client.generate(
        [prompt_ids], SamplingParams(max_tokens=400, ignore_eos=True), ["rid-1"])[0]), daemon=True)
    t.start()
    deadline = time.monotonic() + 60
    while not client.abort("rid-1"):
        assert time.monotonic() < deadline and t.is_alive()
        time.sleep(0.02)
    t.join(60)
    assert out["g"].stop_reason == "aborted" and len(out["g"].token_ids) < 400


def test_weight_sync_over_grpc(served, tiny_model_dir, prompt_ids):
    engine, client, _ = served
    train = TorchTrainEngine(load_model(tiny_model_dir)[0], OptimConfig(lr=1e-2))
    ids = torch.tensor([prompt_ids])
    for _ in range(2):
        train.backward(ids, torch.ones_like(ids), loss_fn=lambda lp, m: (lp * m).sum())
        train.step()
    greedy = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)
    before = client.generate([prompt_ids], greedy)[0]
    report = WeightSync([client], probe=ProbeCheck(train, tuple(prompt_ids), tolerance=1e-3)).push(
        train.export_weights(), 2)
    after = client.generate([prompt_ids], greedy)[0]
    assert client.policy_version == engine.policy_version == after.policy_version == 2
    assert report.probe_max_diff is not None and report.probe_max_diff < 1e-3
    assert after.logprobs != before.logprobs


def test_corrupted_stream_is_refused(served):
    engine, client, _ = served
    t = torch.zeros(4)
    reqs = [
        inference_pb2.UpdateWeightsRequest(header=inference_pb2.WeightUpdateHeader(policy_version=5, sha256="0" * 64)),
        inference_pb2.UpdateWeightsRequest(tensor=inference_pb2.TensorHeader(
            name="model.norm.weight", shape=[4], dtype=inference_pb2.D_TYPE_FLOAT32)),
        inference_pb2.UpdateWeightsRequest(chunk=t.numpy().tobytes()),
    ]
    with pytest.raises(grpc.RpcError) as err:
        client.stub.UpdateWeights(iter(reqs), timeout=30, metadata=client.metadata)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "sha256" in err.value.details()
    assert engine.policy_version == 0


def test_version_mismatch_raises(served):
    _, client, _ = served
    with pytest.raises(WeightSyncError):
        WeightSync([_LyingClient(client)]).push({"model.norm.weight": torch.ones(128)}, 3)


class _LyingClient:
    """Reports a different version than it was asked to load."""

    def __init__(self, inner: InferenceClient) -> None:
        self.inner = inner

    def update_weights(self, weights, version):
        got = self.inner.update_weights(weights, version)
        return type(got)(version + 1, got.fingerprint, got.num_tensors)
