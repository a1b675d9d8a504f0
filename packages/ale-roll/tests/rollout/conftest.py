"""The agent-native stack for rollout tests, all real processes and servers on free ports:

- a LocalCluster (ale-rock Admin + one Worker with bubblewrap sandboxes), whose worker's egress
  gateway forwards the reserved host ``model-proxy`` to ``sandbox_proxy``;
- two ModelProxies: ``host_proxy`` for agents in this process (ale-flow's loop with its tools in
  the sandbox) and ``sandbox_proxy`` for agents inside sandboxes (they see it as http://model-proxy);
- our InferenceService over :class:`ScriptedEngine`, an InferenceEngine whose replies are scripted
  (a random-init model would never write a tool call); token ids and logprobs reach the trajectory
  only through the proxies' records.
"""

from __future__ import annotations

import json
import shutil
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from ale_roll.engines.base import Generation, SamplingParams, WeightUpdate

# ChatML that renders tools and the assistant's tool calls the way the scripted model writes them,
# so an agent that echoes its replies back keeps the prompt an extension of the last context.
TOOL_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\nTools: {{ tools | tojson }}\n"
    'Call one as <tool_call>{"name": ..., "arguments": {...}}</tool_call><|im_end|>\n{% endif %}'
    "{%- for m in messages %}"
    "{%- if m.role == 'assistant' and m.tool_calls %}<|im_start|>assistant\n{{ m.content or '' }}"
    '{%- for tc in m.tool_calls %}<tool_call>{"name": "{{ tc.function.name }}", "arguments": '
    "{{ tc.function.arguments if tc.function.arguments is string else tc.function.arguments | tojson }}}</tool_call>"
    "{%- endfor %}<|im_end|>\n"
    "{% else %}<|im_start|>{{ m.role }}\n{{ m.content or '' }}<|im_end|>\n{% endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
POLICY_VERSION = 3
SOLVE_MARKER = "sales.csv"


def tool_call_text(name: str, arguments: dict[str, Any]) -> str:
    """A tool call exactly as the template renders it back (json.dumps, as ale-flow sends arguments)."""
    return f'<tool_call>{{"name": "{name}", "arguments": {json.dumps(arguments)}}}</tool_call>'


@dataclass
class ScriptedEngine:
    """InferenceEngine whose reply is ``policy(prompt_text)``, encoded once; logprobs are a fixed
    function of the token (scripted, but what the trajectory must carry bit for bit)."""

    tokenizer: Any
    policy: Callable[[str], str]
    version: int = POLICY_VERSION
    on_call: Callable[[str], None] | None = None
    """Called with the decoded prompt before answering (tests kill sandboxes from here)."""
    log: list[Generation] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    max_model_len = 0  # the InferenceEngine Protocol's: no length check of its own

    def close(self) -> None:
        """Nothing to release."""

    @property
    def policy_version(self) -> int:
        return self.version

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
                 request_ids: Sequence[str] | None = None) -> list[Generation]:
        out = []
        for i, prompt in enumerate(prompts):
            text = self.tokenizer.decode(list(prompt))
            if self.on_call is not None:
                self.on_call(text)
            ids = [*self.tokenizer.encode(self.policy(text), add_special_tokens=False), self.tokenizer.eos_token_id]
            stop = "stop"
            if len(ids) > params.max_tokens:
                ids, stop = ids[:params.max_tokens], "length"
            gen = Generation(request_ids[i] if request_ids else f"r{len(self.log)}", ids,
                             [-0.01 * (1 + t % 13) for t in ids], stop, self.version, list(prompt))  # type: ignore[arg-type]
            with self.lock:
                self.log.append(gen)
            out.append(gen)
        return out

    def abort(self, request_id: str) -> bool:
        return False

    def update_weights(self, weights: Any, version: int) -> WeightUpdate:
        self.version = version
        return WeightUpdate(version, "", 0)


class SyncedEngine:
    """A scripted engine loading weights the way a real one reports them (fingerprinted), so a
    Controller's verified WeightSync accepts it."""

    def __init__(self, scripted: ScriptedEngine) -> None:
        self.scripted = scripted
        self.loads: list[int] = []

    @property
    def policy_version(self) -> int:
        return int(self.scripted.version)

    def generate(self, prompts: Any, params: SamplingParams, request_ids: Any = None) -> list[Generation]:
        return list(self.scripted.generate(prompts, params, request_ids))

    def abort(self, request_id: str) -> bool:
        return False

    def update_weights(self, weights: Any, version: int) -> WeightUpdate:
        from ale_roll.engines.weight_sync import fingerprint, read_weight_source

        tensors = read_weight_source(weights)
        self.scripted.version = version
        self.loads.append(version)
        return WeightUpdate(version, fingerprint(tensors), len(tensors))


def solving_policy(solve_command: str) -> Callable[[str], str]:
    """Call the shell once (the reference solution on the sales task, `ls` elsewhere), then finish."""

    def policy(prompt: str) -> str:
        if "<|im_start|>tool" in prompt:
            return "Done."
        return tool_call_text("shell", {"command": solve_command if SOLVE_MARKER in prompt else "ls"})

    return policy


@dataclass
class Stack:
    cluster: Any
    host_proxy: Any
    sandbox_proxy: Any
    engine: ScriptedEngine
    inference_address: str
    tokenizer: Any

    def scripted(self, policy: Callable[[str], str]) -> ScriptedEngine:
        """Another scripted engine with this stack's tokenizer (for in-process generation)."""
        return ScriptedEngine(self.tokenizer, policy)

    def trainable_policy(self, tmp: Path, policy: Callable[[str], str] | None = None) -> Any:
        """A tiny real train engine over this stack's tokenizer; generation is a scripted engine
        (``policy``, default the stack engine's) behind a :class:`SyncedEngine`."""
        from ale_roll.engines.torch_engine import OptimConfig, TorchTrainEngine
        from ale_roll.models import build_tiny_model, load_model
        from ale_roll.trainer.setup import Policy

        model_dir = build_tiny_model(tmp / "model", vocab_size=512, hidden_size=64, num_layers=1, num_heads=2,
                                     num_kv_heads=1, head_dim=32, intermediate_size=64,
                                     max_position_embeddings=16384)
        model, _ = load_model(model_dir)
        assert model.get_input_embeddings().num_embeddings >= len(self.tokenizer)
        return Policy(model_dir, self.tokenizer, TorchTrainEngine(model, OptimConfig(lr=1e-3)),
                      SyncedEngine(self.scripted(policy or self.engine.policy)))

    def provider(self, allow: tuple[str, ...] = ()) -> Any:
        from ale_rock.envs.sandbox import SdkProvider

        return SdkProvider(self.cluster.address, self.cluster.api_key(), allow=allow)


@pytest.fixture(scope="session")
def agent_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (apt bubblewrap) is not installed: no real sandboxes")
    from ale_rock.envs.terminal import find_task
    from ale_rock.local_cluster import LocalCluster, real_worker_argv
    from ale_rock.proxy import ModelProxyConfig, serve_model_proxy
    from ale_roll.engines.inference_server import InferenceServicer, serve
    from ale_roll.models.tiny import train_tokenizer

    tok = train_tokenizer(512)
    tok.chat_template = TOOL_TEMPLATE
    solve = find_task("csv-sales-rollup").solution["solve.sh"].decode()
    engine = ScriptedEngine(tok, solving_policy(solve))
    server, port = serve(InferenceServicer(engine, tok, backend="scripted", default_max_tokens=4096))
    host_proxy = serve_model_proxy(ModelProxyConfig())
    sandbox_proxy = serve_model_proxy(ModelProxyConfig(public_base_url="http://model-proxy:80"))
    workdir: Path = tmp_path_factory.mktemp("roll-agent-cluster")
    # Room for 16 one-core sandboxes whatever the machine: the worker offers its core count by
    # default, and on 2 cores a sandbox whose delete is still landing (a killed one, the last
    # test's) made the next create RESOURCE_EXHAUSTED — an extra rollout exception or an eval
    # error that depended on the machine's speed. Agents here mostly wait on the scripted model.
    argv = real_worker_argv({"model_proxy_address": sandbox_proxy.http_url.removeprefix("http://"),
                             "cpu_millis": 16000})
    try:
        with LocalCluster(workers=1, workdir=workdir, worker_argv=argv) as cluster:
            yield Stack(cluster, host_proxy, sandbox_proxy, engine, f"127.0.0.1:{port}", tok)
    finally:
        host_proxy.stop(0)
        sandbox_proxy.stop(0)
        server.stop(grace=None)


def _live_sandboxes(stack: Stack) -> list[Any]:
    from ale_rock.sdk import Sandbox

    return list(Sandbox.list(client=stack.cluster.client(), states=["pending", "running"]))


@pytest.fixture(autouse=True)
def _agent_stack_left_as_found(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test that uses the shared ``agent_stack`` leaves it as it found it: the engine's hook and
    version reset, and no sandbox of the test still alive (deleted and waited for, so the worker's
    capacity is whole again; one a test left is deleted and named in a warning). The next test then
    starts from a clean stack instead of finding its creates refused or its kill target taken."""
    import time

    if "agent_stack" not in request.fixturenames:
        yield
        return
    stack: Stack = request.getfixturevalue("agent_stack")
    yield
    stack.engine.on_call, stack.engine.version = None, POLICY_VERSION
    from ale_rock.sdk import Sandbox

    deadline = time.monotonic() + 5  # deletes the test made may still be landing
    while (leaked := _live_sandboxes(stack)) and time.monotonic() < deadline:
        time.sleep(0.05)
    for sb in leaked:
        try:
            Sandbox.connect(sb.id, client=stack.cluster.client()).delete()
        except Exception:  # already gone between the list and the delete
            pass
    deadline = time.monotonic() + 30
    while _live_sandboxes(stack):
        assert time.monotonic() < deadline, f"sandboxes still alive 30 s after delete: {_live_sandboxes(stack)}"
        time.sleep(0.05)
    if leaked:
        warnings.warn(f"{request.node.name} left {len(leaked)} sandbox(es) alive (deleted now): "
                      f"{[(s.id, dict(s.labels)) for s in leaked]}", stacklevel=1)


@pytest.fixture
def trained_batches(monkeypatch: pytest.MonkeyPatch) -> list[list[Any]]:
    """Every batch a Controller's train step gets, in order (the step itself runs unchanged)."""
    import ale_roll.trainer.controller as controller_mod

    batches: list[list[Any]] = []
    real_train_step = controller_mod.train_step

    def spy_train_step(train: Any, batch: list[Any], *args: Any, **kwargs: Any) -> Any:
        batches.append(list(batch))
        return real_train_step(train, batch, *args, **kwargs)

    monkeypatch.setattr(controller_mod, "train_step", spy_train_step)
    return batches
