"""A real (tiny, random-init) model behind a minimal in-test InferenceService (streaming one token
per message, like a streaming engine), ale-roll's own InferenceService over ale-roll's tiny model,
and a running ModelProxy in front. torch/transformers are used here only, never by ale_rock."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from ale_proto.v1 import common_pb2, inference_pb2, inference_pb2_grpc

CHAT_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\nYou may call these tools: {{ tools | tojson }}\n"
    'Call one as <tool_call>{"name": ..., "arguments": {...}}</tool_call><|im_end|>\n{% endif %}'
    "{%- for m in messages %}"
    "{%- if m.role == 'assistant' and m.tool_calls %}<|im_start|>assistant\n{{ m.content or '' }}"
    '{%- for tc in m.tool_calls %}<tool_call>{"name": "{{ tc.function.name }}", "arguments": '
    "{{ tc.function.arguments if tc.function.arguments is string else tc.function.arguments | tojson }}}</tool_call>"
    "{%- endfor %}<|im_end|>\n"
    "{%- else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>',
    "user assistant system tool You may call these tools. Hello, how are you today?",
    "def main():\n    print('hello world')\n    return 0\n",
] * 20
POLICY_VERSION = 7
# ChatML without tool support (SmolLM2's and ale-roll's tiny model's): `content` must be a string.
NO_TOOLS_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def build_tokenizer() -> Any:
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(CORPUS, trainer)
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        additional_special_tokens=["<|im_start|>"],
        chat_template=CHAT_TEMPLATE,
    )


class TinyInference(inference_pb2_grpc.InferenceServiceServicer):
    """InferenceService over a random-init Qwen2. ``script`` queues texts the model is made to
    emit (teacher-forced: the ids and logprobs still come from the real model), for tool calls
    a random model would never produce."""

    def __init__(self, tokenizer: Any, model: Any, template: str = CHAT_TEMPLATE) -> None:
        self.tok, self.model, self.template = tokenizer, model, template
        self.script: list[str] = []
        self.calls = 0
        self.lock = threading.Lock()
        self.delay_s = 0.0
        """Pause after each generated token (to see a stream arrive while it is generated)."""
        self.fail_next = 0
        """Fail this many next Generate calls with UNAVAILABLE (an engine that went away)."""

    def GetModelInfo(self, request: Any, context: Any) -> Any:
        return inference_pb2.GetModelInfoResponse(
            model="tiny-qwen2",
            policy_version=POLICY_VERSION,
            eos_token_ids=[self.tok.eos_token_id],
            chat_template=self.template,
            backend="hf",
        )

    def ApplyChatTemplate(self, request: Any, context: Any) -> Any:
        messages = json.loads(request.messages_json)
        tools = json.loads(request.tools_json) if request.tools_json else None
        text = self.tok.apply_chat_template(
            messages, tools=tools, add_generation_prompt=request.add_generation_prompt, tokenize=False,
            chat_template=self.template,
        )
        ids = self.tok(text, add_special_tokens=False)["input_ids"]
        return inference_pb2.ApplyChatTemplateResponse(token_ids=ids, text=text)

    def Detokenize(self, request: Any, context: Any) -> Any:
        text = self.tok.decode(list(request.token_ids), skip_special_tokens=request.skip_special_tokens)
        return inference_pb2.DetokenizeResponse(text=text)

    def Generate(self, request: Any, context: Any) -> Iterator[Any]:
        import torch

        sp = request.sampling
        max_tokens = sp.max_tokens or 16
        gen = torch.Generator().manual_seed(sp.seed if sp.HasField("seed") else 0)
        ids = list(request.prompt_token_ids)
        with self.lock:
            self.calls += 1
            if self.fail_next:
                self.fail_next -= 1
                context.abort(grpc.StatusCode.UNAVAILABLE, "engine restarting")
            forced = (
                self.tok(self.script.pop(0), add_special_tokens=False)["input_ids"] if self.script else None
            )
        if forced is not None:
            forced = [*forced, self.tok.eos_token_id]
        out: list[int] = []
        stop = common_pb2.STOP_REASON_LENGTH
        n = len(forced) if forced else max_tokens
        with torch.no_grad():
            for i in range(n):
                logits = self.model(torch.tensor([ids + out])).logits[0, -1]
                logp = torch.log_softmax(logits, -1)
                if forced:
                    nxt = forced[i]
                elif sp.temperature == 0:
                    nxt = int(torch.argmax(logits))
                else:
                    probs = torch.softmax(logits / sp.temperature, -1)
                    nxt = int(torch.multinomial(probs, 1, generator=gen))
                out.append(nxt)
                done = nxt == self.tok.eos_token_id or i == n - 1
                if nxt == self.tok.eos_token_id:
                    stop = common_pb2.STOP_REASON_STOP
                yield inference_pb2.GenerateResponse(  # one token per message, as it is generated
                    request_id=request.request_id,
                    token_ids=[nxt],
                    logprobs=[float(logp[nxt])],
                    finished=done,
                    stop_reason=stop if done else common_pb2.STOP_REASON_UNSPECIFIED,
                    policy_version=POLICY_VERSION,
                )
                if done:
                    break
                if self.delay_s:
                    time.sleep(self.delay_s)


def _serve(servicer: Any) -> tuple[Any, str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    inference_pb2_grpc.add_InferenceServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}"


@pytest.fixture(scope="session")
def tiny_model() -> tuple[Any, Any]:
    """(tokenizer, model): a tiny random-init Qwen2."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    torch.manual_seed(0)
    tok = build_tokenizer()
    cfg = transformers.Qwen2Config(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
    )
    return tok, transformers.Qwen2ForCausalLM(cfg).eval()


@pytest.fixture(scope="session")
def tiny_inference(tiny_model: tuple[Any, Any]) -> Iterator[tuple[str, TinyInference]]:
    """(address, servicer) of a running InferenceService over a tiny random-init Qwen2."""
    servicer = TinyInference(*tiny_model)
    server, addr = _serve(servicer)
    yield addr, servicer
    server.stop(0)


@pytest.fixture(scope="session")
def tiny_inference_no_tools(tiny_model: tuple[Any, Any]) -> Iterator[tuple[str, TinyInference]]:
    """The same model behind a chat template with no tool support (as SmolLM2's)."""
    servicer = TinyInference(*tiny_model, template=NO_TOOLS_TEMPLATE)
    server, addr = _serve(servicer)
    yield addr, servicer
    server.stop(0)


@pytest.fixture(scope="session")
def roll_inference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    """(address, tokenizer) of ale-roll's real InferenceService (HF engine) over ale-roll's tiny
    random-init model, whose ChatML template has no tool support."""
    pytest.importorskip("ale_roll")
    pytest.importorskip("transformers")
    from ale_roll.engines.hf_engine import HFInferenceEngine
    from ale_roll.engines.inference_server import InferenceServicer, serve
    from ale_roll.models import build_tiny_model, load_model, load_tokenizer

    path = build_tiny_model(tmp_path_factory.mktemp("roll-tiny") / "model", seed=0)
    tok = load_tokenizer(path)
    servicer = InferenceServicer(HFInferenceEngine(load_model(path)[0]), tok, backend="hf")
    server, port = serve(servicer)
    yield f"127.0.0.1:{port}", tok
    server.stop(0)
    servicer.close()


@pytest.fixture()
def proxy_server() -> Iterator[Any]:
    from ale_rock.proxy import ModelProxyConfig, serve_model_proxy

    srv = serve_model_proxy(ModelProxyConfig())
    yield srv
    srv.stop(0)
