"""The ModelProxy (agent-native mode): an OpenAI-compatible chat endpoint with per-episode
credentials, forwarding to an InferenceService, an OpenAI-compatible API or a recording, and
recording every call with exact token ids and logprobs."""

from ale_rock.proxy.records import CallRecord, load_records, save_records
from ale_rock.proxy.service import ModelProxyConfig, ModelProxyServer, serve_model_proxy

__all__ = [
    "CallRecord",
    "ModelProxyConfig",
    "ModelProxyServer",
    "load_records",
    "save_records",
    "serve_model_proxy",
]
