"""A real (tiny) transformers model behind an OpenAI-compatible endpoint started in the test.

A byte-level Llama (~0.1M parameters) is trained for a few seconds to emit a text-format tool
call for the task and a final answer after the tool result. The agent then drives it over HTTP:
a valid generation creates the file; a max_tokens cut yields a truncated call that the client
detects and reports; an untrained (random-init) model's garbage never crashes the loop.
torch is used here only, never by ale_flow itself.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from ale_flow import Agent, AgentStopReason, Settings
from ale_flow.events import MalformedToolCall
from ale_flow.models.openai import OpenAIConfig, OpenAIModel
from ale_flow.trajectory import load_trajectory

from .._json_server import JsonServer

torch = pytest.importorskip("torch", reason="torch is needed to serve a real tiny model")
transformers = pytest.importorskip("transformers", reason="transformers is needed to build a tiny model")

BOS, EOS, SEP = 256, 257, 258
TASK = "create hello.txt containing hi"
CALL = '<tool_call>{"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi"}}</tool_call>'
RESULT = "Wrote 2 bytes to hello.txt"


def prompt_ids(messages: list[dict[str, Any]]) -> list[int]:
    """The 'chat template': BOS + the last message's last 24 bytes + SEP."""
    return [BOS, *list(str(messages[-1].get("content") or "").encode()[-24:]), SEP]


def build_model(train: bool) -> Any:
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=260, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=256, bos_token_id=BOS, eos_token_id=EOS, pad_token_id=EOS,
    )
    model = transformers.LlamaForCausalLM(cfg)
    if train:
        pairs = [(TASK, CALL), (f"<tool_result name=write_file>\n{RESULT}\n</tool_result>", "Done.")]
        rows = [(prompt_ids([{"content": p}]), list(t.encode()) + [EOS]) for p, t in pairs]
        width = max(len(p) + len(t) for p, t in rows)
        ids = torch.full((len(rows), width), EOS)
        labels = torch.full((len(rows), width), -100)
        for i, (p, t) in enumerate(rows):
            ids[i, : len(p) + len(t)] = torch.tensor(p + t)
            labels[i, len(p) : len(p) + len(t)] = torch.tensor(t)  # loss on the completion (incl. EOS) only
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        mask = labels[:, 1:] != -100
        for _ in range(500):
            out = model(input_ids=ids, labels=labels)
            # Stop once teacher-forced argmax matches every target token: greedy decoding then
            # reproduces the targets exactly.
            if bool((out.logits[:, :-1].argmax(-1)[mask] == labels[:, 1:][mask]).all()):
                break
            opt.zero_grad()
            out.loss.backward()
            opt.step()
    model.eval()
    return model


class TinyModelServer(JsonServer):
    """POST /v1/chat/completions → greedy generation with per-token logprobs."""

    def __init__(self, model: Any) -> None:
        lock = threading.Lock()

        def answer(path: str, headers: Any, req: dict[str, Any]) -> tuple[int, Any]:
            ids = prompt_ids(req["messages"])
            with lock, torch.no_grad():
                out = model.generate(
                    torch.tensor([ids]), max_new_tokens=int(req.get("max_tokens") or 128), do_sample=False,
                    eos_token_id=EOS, pad_token_id=EOS, output_scores=True, return_dict_in_generate=True,
                )
            new = out.sequences[0, len(ids):].tolist()
            logprobs = [float(torch.log_softmax(s[0], -1)[t]) for s, t in zip(out.scores, new)]
            finish = "stop" if new and new[-1] == EOS else "length"
            text = bytes(t for t in new if t < 256).decode("utf-8", errors="replace")
            return 200, {
                "choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": text},
                             "logprobs": {"content": [{"token": str(t), "logprob": lp} for t, lp in zip(new, logprobs)]}}],
                "usage": {"prompt_tokens": len(ids), "completion_tokens": len(new)},
            }

        super().__init__(answer)


pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> Iterator[None]:
    # On a shared 2-core machine OpenMP spin-waiting makes multi-threaded training crawl (~7x slower).
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(prev)


@pytest.fixture(scope="module")
def trained_server() -> Iterator[TinyModelServer]:
    s = TinyModelServer(build_model(train=True))
    yield s
    s.close()


def client(url: str, **kw: Any) -> OpenAIModel:
    return OpenAIModel(OpenAIConfig(base_url=url, model="tiny-llama", native_tools=False, logprobs=True, context_window=4096, **kw))


def test_real_generation_drives_a_tool_call(trained_server, ws):
    agent = Agent(client(trained_server.url), ws, Settings(mode="yolo", model={"native_tools": False}))
    stopped = agent.run_to_end(TASK)
    assert ws.read_bytes("hello.txt") == b"hi"
    assert stopped.reason == AgentStopReason.COMPLETED and stopped.final_message == "Done."
    rec = load_trajectory(agent.trajectory_path)
    first = rec.turns[0]
    assert first.tool_calls[0]["name"] == "write_file" and not first.error
    assert first.completion_tokens == len(first.completion_logprobs) > 0
    assert all(lp <= 0.0 for lp in first.completion_logprobs)


def test_truncated_real_generation_is_detected_and_reported(trained_server, ws):
    agent = Agent(client(trained_server.url, max_tokens=30), ws, Settings(mode="yolo", model={"native_tools": False}, limits={"max_steps": 4}))
    events = list(agent.run(TASK))
    problems = [p for e in events if isinstance(e, MalformedToolCall) for p in e.problems]
    assert any("cut off" in p for p in problems) and any("max_tokens" in p for p in problems)
    assert not (ws.root and __import__("os").path.exists(ws.root + "/hello.txt"))
    rec = load_trajectory(agent.trajectory_path)
    assert rec.turns[0].error and rec.turns[0].finish_reason == "length"
    assert rec.stop_reason == events[-1].reason.value  # whatever the model did next, the run ended cleanly


def test_untrained_model_garbage_never_crashes_the_loop(ws):
    srv = TinyModelServer(build_model(train=False))
    try:
        agent = Agent(client(srv.url, max_tokens=40), ws, Settings(mode="yolo", model={"native_tools": False}, limits={"max_steps": 3}))
        stopped = agent.run_to_end(TASK)
    finally:
        srv.close()
    assert stopped.reason in {AgentStopReason.COMPLETED, AgentStopReason.MALFORMED_LIMIT, AgentStopReason.MAX_STEPS}
    assert load_trajectory(agent.trajectory_path).stop_reason == stopped.reason.value
