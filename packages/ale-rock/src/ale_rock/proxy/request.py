"""Validation of an OpenAI chat request, before it is admitted (so a client mistake costs no call
of the episode's budget): every standard message shape is accepted, anything else is a 400 naming
the field. Fields the proxy does not use (``user``, ``metadata``, ``response_format`` ...) pass."""

from __future__ import annotations

from typing import Any

from ale_rock.proxy.errors import ProxyError, invalid

MAX_TOKENS_LIMIT = 1 << 20
"""Largest ``max_tokens`` accepted before the upstream sees it (the upstream may refuse less)."""
_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_INT64 = 1 << 63


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _number(req: dict[str, Any], name: str, lo: float, hi: float) -> None:
    v = req.get(name)
    if v is None:
        return
    if not _is_num(v) or v != v:  # NaN is a float too
        raise invalid(name, f"must be a number, got {v!r}", "invalid_type")
    if not lo <= v <= hi:
        raise invalid(name, f"must be between {lo:g} and {hi:g}, got {v!r}")


def _content(param: str, content: Any, *, nullable: bool) -> None:
    if content is None:
        if not nullable:
            raise invalid(param, "is required for this role", "missing_required_parameter")
        return
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise invalid(param, "must be a string, null or a list of content parts", "invalid_type")
    for j, part in enumerate(content):
        p = f"{param}[{j}]"
        if not isinstance(part, dict):
            raise invalid(p, "a content part must be an object", "invalid_type")
        kind = part.get("type")
        if kind in ("text", "input_text", "output_text"):
            if not isinstance(part.get("text"), str):
                raise invalid(f"{p}.text", "must be a string", "invalid_type")
        elif kind == "refusal":
            if not isinstance(part.get("refusal"), str):
                raise invalid(f"{p}.refusal", "must be a string", "invalid_type")
        else:
            raise invalid(f"{p}.type", f"content part type {kind!r} is not supported (text only)",
                          "unsupported_value")


def _tool_calls(param: str, calls: Any) -> None:
    if not isinstance(calls, list):
        raise invalid(param, "must be a list", "invalid_type")
    for j, call in enumerate(calls):
        p = f"{param}[{j}]"
        if not isinstance(call, dict):
            raise invalid(p, "a tool call must be an object", "invalid_type")
        fn = call.get("function")
        if call.get("type", "function") != "function" or not isinstance(fn, dict):
            raise invalid(p, "must be {'type': 'function', 'function': {...}}", "invalid_type")
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            raise invalid(f"{p}.function.name", "must be a non-empty string", "invalid_type")
        if not isinstance(fn.get("arguments", ""), (str, dict)):
            raise invalid(f"{p}.function.arguments", "must be a JSON string", "invalid_type")
        if "id" in call and not isinstance(call["id"], str):
            raise invalid(f"{p}.id", "must be a string", "invalid_type")


def _message(i: int, m: Any) -> None:
    p = f"messages[{i}]"
    if not isinstance(m, dict):
        raise invalid(p, "a message must be an object", "invalid_type")
    role = m.get("role")
    if role not in _ROLES:
        raise invalid(f"{p}.role", f"must be one of {', '.join(_ROLES)}; got {role!r}")
    if role == "assistant":
        _content(f"{p}.content", m.get("content"), nullable=True)
        if m.get("tool_calls") is not None:
            _tool_calls(f"{p}.tool_calls", m["tool_calls"])
        return
    if "content" not in m and role != "function":
        raise invalid(f"{p}.content", "is required for this role", "missing_required_parameter")
    _content(f"{p}.content", m.get("content"), nullable=role == "function")
    if role == "tool" and not isinstance(m.get("tool_call_id", ""), str):
        raise invalid(f"{p}.tool_call_id", "must be a string", "invalid_type")


def _tools(tools: Any) -> None:
    if not isinstance(tools, list):
        raise invalid("tools", "must be a list", "invalid_type")
    for j, tool in enumerate(tools):
        p = f"tools[{j}]"
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or tool.get("type", "function") != "function":
            raise invalid(p, "must be {'type': 'function', 'function': {...}}", "invalid_type")
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            raise invalid(f"{p}.function.name", "must be a non-empty string", "invalid_type")
        if not isinstance(fn.get("parameters", {}), dict):
            raise invalid(f"{p}.function.parameters", "must be a JSON schema object", "invalid_type")


def validate_request(req: dict[str, Any]) -> None:
    """Raise a 400 :class:`ProxyError` naming the first bad field of an OpenAI chat request."""
    if "messages" not in req:
        raise invalid("messages", "is required", "missing_required_parameter")
    messages = req["messages"]
    if not isinstance(messages, list) or not messages:
        raise invalid("messages", "must be a non-empty list", "invalid_type")
    for i, m in enumerate(messages):
        _message(i, m)
    if req.get("model") is not None and not isinstance(req["model"], str):
        raise invalid("model", "must be a string", "invalid_type")
    for name in ("max_tokens", "max_completion_tokens"):
        v = req.get(name)
        if v is None:
            continue
        if not _is_int(v):
            raise invalid(name, f"must be an integer, got {v!r}", "invalid_type")
        if not 1 <= v <= MAX_TOKENS_LIMIT:
            raise invalid(name, f"must be between 1 and {MAX_TOKENS_LIMIT}, got {v}")
    _number(req, "temperature", 0.0, 2.0)
    _number(req, "top_p", 0.0, 1.0)
    _number(req, "presence_penalty", -2.0, 2.0)
    _number(req, "frequency_penalty", -2.0, 2.0)
    n = req.get("n")
    if n is not None and (not _is_int(n) or n != 1):
        raise ProxyError(400, f"n: only n=1 is supported, got {n!r}", "n", "unsupported_value")
    seed = req.get("seed")
    if seed is not None and (not _is_int(seed) or not -_INT64 <= seed < _INT64):
        raise invalid("seed", f"must be a 64-bit integer, got {seed!r}", "invalid_type")
    stop = req.get("stop")
    if stop is not None and not isinstance(stop, str) and (
        not isinstance(stop, list) or not all(isinstance(s, str) for s in stop) or len(stop) > 4
    ):
        raise invalid("stop", "must be a string or a list of at most 4 strings", "invalid_type")
    for name in ("stream", "logprobs", "parallel_tool_calls"):
        if req.get(name) is not None and not isinstance(req[name], bool):
            raise invalid(name, f"must be a boolean, got {req[name]!r}", "invalid_type")
    so = req.get("stream_options")
    if so is not None and not isinstance(so, dict):
        raise invalid("stream_options", "must be an object", "invalid_type")
    if req.get("tools") is not None:
        _tools(req["tools"])
    choice = req.get("tool_choice")
    if choice is not None and choice not in ("none", "auto", "required"):
        fn = choice.get("function") if isinstance(choice, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise invalid("tool_choice", "must be none, auto, required or {'type': 'function', ...}",
                          "invalid_type")
