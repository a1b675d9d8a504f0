"""What an `ale eval` run does: the suite, the model endpoint, the budget, where results go."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

BUILTIN = "builtin"


class EvalConfig(BaseModel):
    """Settings of one evaluation (the `ale eval` flags, one field each)."""

    model_config = ConfigDict(extra="forbid")

    suite: str = BUILTIN
    """``builtin`` (ale-rock's shipped suite) or a directory of task dirs."""
    split: Literal["train", "held_out", "all"] | None = None
    """Which split to run; default: ``held_out`` for the built-in suite, ``all`` for a directory."""
    tasks: list[str] = Field(default_factory=list)
    """Only these task ids (empty: every task of the split)."""
    base_url: str = ""
    """Any OpenAI-compatible endpoint (…/v1) the ModelProxy forwards to."""
    api_key: str = ""
    """Bearer token the ModelProxy sends to ``base_url``."""
    inference_address: str = ""
    """host:port of an ale InferenceService (the ModelProxy applies the chat template, token-exact)."""
    local_model: str = ""
    """A model dir, .gguf file or installed model package: served in-process by an InferenceService."""
    model: str = ""
    """Model name sent upstream (required with ``base_url``)."""
    runs: int = Field(default=3, ge=1, le=100)
    """Independent runs over the suite; Pass@1 is averaged over them."""
    concurrency: int = Field(default=4, ge=1, le=256)
    """Episodes (sandboxes) in flight at once."""
    task_timeout_s: float = Field(default=600.0, gt=0)
    """Wall-clock budget of one episode's agent (capped by the task's own ``limits.agent_s``)."""
    max_turns: int = Field(default=30, ge=1)
    """Model calls the agent may make per episode."""
    max_tokens: int = Field(default=1024, ge=1)
    """Completion tokens per model call."""
    temperature: float = Field(default=0.7, ge=0)
    """Sampling temperature (0 = greedy; runs then differ only by the endpoint's nondeterminism)."""
    tool_format: Literal["auto", "native", "text"] = "auto"
    """How the agent calls tools: the API's ``tools`` field (native) or ``<tool_call>`` text; auto =
    native for ``base_url``, text for our InferenceService (small local models' templates lack tools)."""
    agent_settings: list[str] = Field(default_factory=list)
    """Extra ale-flow settings, ``key=value`` (passed as ``-c``)."""
    admin_address: str = ""
    """An ale-rock admin to get sandboxes from; "" starts a LocalCluster (admin + one bwrap worker)."""
    admin_api_key: str = ""
    """API key for ``admin_address``."""
    proxy_address: str = ""
    """gRPC address of the ModelProxy that ``admin_address``'s workers reach as ``model-proxy``
    (required with ``admin_address``; with a LocalCluster the proxy runs in-process)."""
    backend: Literal["", "local", "docker"] = ""
    """The sandboxes' backend ("" = the admin's default). ``docker`` (needs ``admin_address``): a
    task's ``environment/Dockerfile`` whose ``FROM`` image is local is built through EnvHub and its
    episodes start from the built image, as ``ale-rock tasks run --backend docker`` does."""
    out_dir: Path | None = None
    """Where results go; default ``$ALE_RUNS/eval-<time>`` (``./runs``)."""
    local_dtype: str = "float32"
    """dtype the local model is loaded in."""

    @model_validator(mode="after")
    def _one_upstream(self) -> EvalConfig:
        given = [n for n in ("base_url", "inference_address", "local_model") if getattr(self, n)]
        if len(given) != 1:
            raise ValueError("give exactly one of --base-url, --inference-address, --local-model")
        if self.base_url and not self.model:
            raise ValueError("--model is required with --base-url")
        if self.admin_address and not self.proxy_address:
            raise ValueError("--admin-address needs --proxy-address (the ModelProxy its workers reach)")
        if self.backend == "docker" and not self.admin_address:
            raise ValueError("--backend docker needs --admin-address (the local cluster has bubblewrap workers)")
        return self

    @property
    def upstream(self) -> Literal["openai", "inference"]:
        """The ModelProxy upstream kind."""
        return "openai" if self.base_url else "inference"

    @property
    def native_tools(self) -> bool:
        """Whether the agent uses the API's native tool calling."""
        return self.tool_format == "native" or (self.tool_format == "auto" and self.upstream == "openai")

    @property
    def effective_split(self) -> str:
        """The split actually run."""
        return self.split or ("held_out" if self.suite == BUILTIN else "all")
