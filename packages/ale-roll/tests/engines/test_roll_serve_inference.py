"""`ale-roll serve-inference`: a real process on a free port serving a tiny word-level model."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
from ale_roll.engines.base import SamplingParams
from ale_roll.engines.inference_client import InferenceClient
from ale_roll.models import load_model, load_tokenizer, save_model
from ale_roll.trainer.setup import word_tokenizer
from grpc_health.v1 import health_pb2, health_pb2_grpc


def _word_model(tiny_model_dir: Path, out: Path) -> Path:
    """A tiny model with a word-level tokenizer, saved the way the trainer's init_model/ is."""
    model, _ = load_model(tiny_model_dir)
    tok = word_tokenizer(["start", "higher", "lower", *[str(i) for i in range(1, 21)]])
    tok.chat_template = load_tokenizer(tiny_model_dir).chat_template
    model.resize_token_embeddings(len(tok))
    return save_model(model, tok, out)


def test_serve_inference_process(tiny_model_dir, tmp_path):
    model_dir = _word_model(tiny_model_dir, tmp_path / "word-model")
    port_file = tmp_path / "port"
    proc = subprocess.Popen([sys.executable, "-m", "ale_roll.cli", "serve-inference", "--model", str(model_dir),
                             "--port", "0", "--port-file", str(port_file)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 240
        while not port_file.exists():
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, "the server did not start in time"
            time.sleep(0.2)
        address = f"127.0.0.1:{int(port_file.read_text())}"
        with grpc.insecure_channel(address) as channel:
            health = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service="ale.v1.InferenceService"), timeout=30)
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        client = InferenceClient(address, timeout_s=120)
        try:
            tok = load_tokenizer(model_dir)
            prompt = tok.encode("start 10 lower", add_special_tokens=False)
            gens = client.generate([prompt, prompt[:2]], SamplingParams(max_tokens=3, temperature=0.0, ignore_eos=True))
            assert [len(g.token_ids) for g in gens] == [3, 3] and all(g.stop_reason == "length" for g in gens)
            assert all(t < len(tok) + 64 for g in gens for t in g.token_ids)
            assert client.model_info().backend == "hf"
        finally:
            client.close()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
        assert f"InferenceService listening on {address}" in out and "stopping" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_serve_inference_on_a_taken_port_says_so_and_exits(tiny_model_dir):
    """One line naming the port and a non-zero exit (the asyncio server once hung 60 s instead:
    the port check's SystemExit, raised on the server's loop, ended the loop's thread)."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        t0 = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "ale_roll.cli", "serve-inference", "--model", str(tiny_model_dir),
                               "--port", str(port)], capture_output=True, text=True, timeout=180)
    assert done.returncode != 0 and f"port {port} is already in use" in done.stderr
    assert time.monotonic() - t0 < 60  # model load and exit, no wait on a dead server thread
