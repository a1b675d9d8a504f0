"""A real InferenceService (gRPC, on a free port) over a byte-level "model" whose replies are
scripted, and a real ModelProxy in front of it. Token ids are UTF-8 bytes: what the proxy records
can be checked exactly, and nothing heavy (torch) is loaded."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from ale_proto.v1 import common_pb2, inference_pb2, inference_pb2_grpc

POLICY_VERSION = 5
TEMPLATE = "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}<assistant>"


def render(messages: list[dict[str, Any]]) -> str:
    """The template above, in Python (messages as the agent sent them)."""
    return "".join(f"<{m['role']}>{m.get('content') or ''}\n" for m in messages) + "<assistant>"


class ByteModel(inference_pb2_grpc.InferenceServiceServicer):
    """Replies ``policy(prompt_text)``; ``on_call`` runs first (tests kill sandboxes from it)."""

    version = POLICY_VERSION
    render = staticmethod(render)

    def __init__(self) -> None:
        self.policy: Callable[[str], str] = lambda prompt: "ok"
        self.on_call: Callable[[str], None] | None = None
        self.calls = 0
        self.lock = threading.Lock()

    def GetModelInfo(self, request: Any, context: Any) -> Any:
        return inference_pb2.GetModelInfoResponse(model="bytes", policy_version=POLICY_VERSION,
                                                  eos_token_ids=[0], chat_template=TEMPLATE, backend="scripted")

    def ApplyChatTemplate(self, request: Any, context: Any) -> Any:
        text = render(json.loads(request.messages_json))
        return inference_pb2.ApplyChatTemplateResponse(token_ids=list(text.encode()), text=text)

    def Detokenize(self, request: Any, context: Any) -> Any:
        return inference_pb2.DetokenizeResponse(text=bytes(request.token_ids).decode(errors="replace"))

    def Generate(self, request: Any, context: Any) -> Iterator[Any]:
        prompt = bytes(request.prompt_token_ids).decode(errors="replace")
        with self.lock:
            self.calls += 1
        if self.on_call is not None:
            self.on_call(prompt)
        ids = list(self.policy(prompt).encode())
        yield inference_pb2.GenerateResponse(
            request_id=request.request_id, token_ids=ids, logprobs=[-0.25] * len(ids), finished=True,
            stop_reason=common_pb2.STOP_REASON_STOP, policy_version=POLICY_VERSION,
        )  # fmt: skip


@pytest.fixture(scope="module")
def byte_model() -> Iterator[tuple[str, ByteModel]]:
    """(address, servicer) of the scripted InferenceService."""
    servicer = ByteModel()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    inference_pb2_grpc.add_InferenceServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}", servicer
    server.stop(0)


@pytest.fixture(scope="module")
def proxy() -> Iterator[Any]:
    """A running ModelProxy (agents on this host reach it directly)."""
    from ale_rock.proxy import ModelProxyConfig, serve_model_proxy

    srv = serve_model_proxy(ModelProxyConfig(retries=0))
    yield srv
    srv.stop(0)
