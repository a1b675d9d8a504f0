"""One config loader for every ALE command: a YAML file + dotted overrides (+ env) → a pydantic model.

    cfg = load_config(WorkerConfig, "worker.yaml", ["pool_size=4", "labels.zone=a"])

Layers, lowest first: ``base`` (defaults a caller computes), the YAML file, ``env`` (a mapping a
CLI builds from its environment variables, see :func:`env_layer`), then the overrides (``a.b=c``,
values parsed as YAML scalars: ``4``, ``true``, ``[a, b]``). Mappings merge key by key
(:func:`deep_merge`); anything else is replaced.

Every problem raises :class:`ConfigError` with a one-line message that names where the bad value
came from (the file, ``file:line:col`` for bad YAML, the override, the environment variable) and the
key: ``worker.yaml: unknown key 'pool_sise' (did you mean 'pool_size'?)``, ``override
pool_size=abc: pool_size: expected a valid integer (got 'abc')``. A CLI prints ``error: <message>``
and exits 2 (see :func:`exit_on_error`).

pydantic and PyYAML are imported lazily: ``ale-proto`` itself needs neither (``ale-proto[config]``).
"""

from __future__ import annotations

import copy
import difflib
import os
import sys
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound="BaseModel")

_MAX_ERRORS = 3
"""Validation errors spelled out in the one line; more are counted."""


class ConfigError(ValueError):
    """A config file, override or environment variable is invalid; the message is one line that
    names the source and the key."""


# -- secrets ------------------------------------------------------------------------------------

def write_private(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` readable by this user only (0600 from creation, whatever the umask;
    its folder 0700): secrets go to services in such files (``--config``), never on a command line
    every local user can read in ``/proc/<pid>/cmdline``."""
    path = Path(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    path.chmod(0o600)
    return path


# -- merging -----------------------------------------------------------------------------------

def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` merged into a copy of ``base``: mappings recursively, everything else replaced.

    Neither argument is modified and the result shares no mutable value with them.
    """
    out = copy.deepcopy(dict(base))
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def set_dotted(data: dict[str, Any], key: str, value: Any, *, source: str = "") -> None:
    """``data["a"]["b"]["c"] = value`` for ``key="a.b.c"``, creating sections on the way."""
    node = data
    *parents, leaf = key.split(".")
    for i, part in enumerate(parents):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            where = f"{source}: " if source else ""
            raise ConfigError(f"{where}{'.'.join(parents[:i + 1])} is not a section (it holds {child!r})")
        node = child
    node[leaf] = value


def _yaml_scalar(text: str, source: str) -> Any:
    import yaml

    if not text.strip():
        return ""  # `key=` sets the empty string, not null
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: the value is not valid YAML ({_one_line(str(getattr(e, 'problem', e)))})") from None


def parse_overrides(overrides: Iterable[str]) -> dict[str, Any]:
    """``["a.b=1", "c=[x, y]"]`` → ``{"a": {"b": 1}, "c": ["x", "y"]}`` (values parsed as YAML)."""
    out: dict[str, Any] = {}
    for item in overrides:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not p for p in key.split(".")):
            raise ConfigError(f"override {item!r}: not key=value (e.g. a.b=1)")
        set_dotted(out, key, _yaml_scalar(text, f"override {item}"), source=f"override {item}")
    return out


Layer = tuple[str, Mapping[str, Any]]
"""A named source of config values: ``("worker.yaml", {...})``; errors name the layer."""


def env_layers(prefix: str, environ: Mapping[str, str] | None = None) -> list[Layer]:
    """``PREFIX_LIMITS__MAX_STEPS=5`` → the layer ``("environment variable PREFIX_LIMITS__MAX_STEPS",
    {"limits": {"max_steps": 5}})``, one per variable (values parsed as YAML), in name order."""
    environ = os.environ if environ is None else environ
    out: list[Layer] = []
    for name, value in sorted(environ.items()):
        if name.startswith(prefix) and len(name) > len(prefix):
            key = name[len(prefix):].lower().replace("__", ".")
            layer: dict[str, Any] = {}
            set_dotted(layer, key, _yaml_scalar(value, name) if value else value, source=name)
            out.append((f"environment variable {name}", layer))
    return out


def require_env(name: str, what: str, environ: Mapping[str, str] | None = None) -> str:
    """The value of environment variable ``name``; ConfigError naming it when unset or empty."""
    value = (os.environ if environ is None else environ).get(name, "")
    if not value:
        raise ConfigError(f"{what}: set {name} (environment variable is unset)")
    return value


# -- reading -----------------------------------------------------------------------------------

def _one_line(text: str) -> str:
    return " ".join(text.split())


def parse_mapping(text: str, source: str, *, json_text: bool = False) -> dict[str, Any]:
    """The top-level mapping of YAML (or JSON) ``text``; ``{}`` when empty. Errors name ``source``
    and, for a syntax error, the line and column (``source:line:col: invalid YAML: ...``)."""
    import json

    import yaml

    try:
        data = json.loads(text) if json_text else yaml.safe_load(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{source}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(f"{where}: invalid YAML: {_one_line(str(problem))}") from None
    return _top_level(data, source)


def _top_level(data: Any, source: str) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of keys, not a {type(data).__name__}")
    return data


def read_mapping(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A YAML (or ``.json``) file's top-level mapping; ``{}`` for an empty file."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise ConfigError(f"{p}: config file not found") from None
    except OSError as e:
        raise ConfigError(f"{p}: cannot read the config file ({e.strerror or e})") from None
    return parse_mapping(text, str(p), json_text=p.suffix == ".json")


# -- validation errors, one line ----------------------------------------------------------------

def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    """The pydantic models an annotation can hold (through Optional, unions, lists and dicts)."""
    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType or origin in (list, tuple, set, frozenset):
        for arg in typing.get_args(annotation):
            yield from _models_in(arg)
    elif origin is dict or origin is Mapping:
        args = typing.get_args(annotation)
        if len(args) == 2:
            yield from _models_in(args[1])


def _step(annotation: Any) -> tuple[list[type[BaseModel]], bool]:
    """The models one path step into a field of this annotation reaches, and whether they sit in a
    container (a dict key or list index comes next in the path)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        found = [_step(a) for a in typing.get_args(annotation)]
        return [m for ms, _ in found for m in ms], any(c for _, c in found)
    if origin in (dict, Mapping, list, tuple, set, frozenset):
        return list(_models_in(annotation)), True
    return list(_models_in(annotation)), False


def _sibling_keys(model: type[BaseModel], parents: tuple[str, ...]) -> list[str]:
    """Field names of the section at ``parents`` (dict keys and list indexes in the path skipped)."""
    current: list[type[BaseModel]] = [model]
    skip = False
    for part in parents:
        if skip:
            skip = False
            continue
        nxt: list[type[BaseModel]] = []
        for m in current:
            field = m.model_fields.get(part)
            if field is not None:
                models, in_container = _step(field.annotation)
                nxt.extend(models)
                skip = skip or in_container
        current = nxt
        if not current:
            return []
    return sorted({name for m in current for name in m.model_fields})


def _did_you_mean(model: type[BaseModel], loc: tuple[str, ...]) -> str:
    *parents, leaf = loc
    hint = difflib.get_close_matches(leaf, _sibling_keys(model, tuple(parents)), n=1, cutoff=0.6)
    return f" (did you mean {'.'.join([*parents, hint[0]])!r}?)" if hint else ""


def _expected(err: Mapping[str, Any]) -> str:
    msg = str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if msg.startswith("Input should be "):
        msg = "expected " + msg.removeprefix("Input should be ").split(", unable to")[0]
    if "input" in err and not isinstance(err["input"], (dict, list)):
        shown = repr(err["input"])
        msg += f" (got {shown if len(shown) <= 60 else shown[:57] + '...'})"
    return _one_line(msg)


def _lookup(data: Mapping[str, Any], loc: tuple[str, ...]) -> bool:
    node: Any = data
    for part in loc:
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


def format_validation_error(
    model: type[BaseModel], err: ValidationError, sources: list[tuple[str, Mapping[str, Any]]], default: str,
) -> str:
    """One line for a pydantic ValidationError: per error, the source that set the key, the key and
    what was expected; unknown keys get a close match. ``sources`` are ``(name, layer)`` from the
    highest layer down; a key found in none (a missing one, a whole-model check) is put on ``default``."""
    parts = []
    errors = err.errors()
    for e in errors[:_MAX_ERRORS]:
        loc = tuple(str(p) for p in e["loc"])
        key = ".".join(loc)
        source = next((name for name, layer in sources if loc and _lookup(layer, loc)), default)
        if e["type"] == "extra_forbidden":
            parts.append(f"{source}: unknown key {key!r}{_did_you_mean(model, loc)}")
        elif e["type"] == "missing":
            parts.append(f"{source}: missing key {key!r}")
        elif not loc:
            parts.append(f"{source}: {_expected(e)}")
        else:
            parts.append(f"{source}: {key}: {_expected(e)}")
    if len(errors) > _MAX_ERRORS:
        parts.append(f"and {len(errors) - _MAX_ERRORS} more")
    return "; ".join(parts)


def validate(model: type[M], data: Mapping[str, Any], sources: list[tuple[str, Mapping[str, Any]]],
             default: str = "config") -> M:
    """``model.model_validate(data)``, raising ConfigError (see :func:`format_validation_error`)."""
    from pydantic import ValidationError

    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_validation_error(model, e, sources, default)) from None


def load_layers(model: type[M], layers: Iterable[Layer], default: str = "config") -> M:
    """Merge ``layers`` (lowest first, see :func:`deep_merge`) and validate them into ``model``; an
    error is put on the highest layer that sets its key (``default`` when none does)."""
    layers = list(layers)
    merged: dict[str, Any] = {}
    for _, layer in layers:
        merged = deep_merge(merged, layer)
    return validate(model, merged, list(reversed(layers)), default=default)


def load_config(
    model: type[M],
    path: str | os.PathLike[str] | None = None,
    overrides: Iterable[str] | Mapping[str, Any] = (),
    *,
    base: Mapping[str, Any] | None = None,
    data: Mapping[str, Any] | None = None,
    source: str | None = None,
    env: Iterable[Layer] = (),
) -> M:
    """Validate ``base`` < the file at ``path`` (or ``data``) < ``env`` < ``overrides`` into ``model``.

    ``overrides`` are ``key=value`` strings or an already nested mapping (a CLI's flags, named
    "command line" in errors). ``data`` is a mapping read elsewhere (a request's YAML), named
    ``source`` in errors. ``env`` are layers built from environment variables (:func:`env_layers`,
    or by hand), each named after its variable. Raises ConfigError (one line) for every problem;
    nothing given is modified.
    """
    layers: list[Layer] = []  # lowest first
    if base:
        layers.append(("defaults", base))
    label = source or (str(path) if path is not None else "config")
    if path is not None:
        layers.append((label, read_mapping(path)))
    if data is not None:
        layers.append((label, _top_level(data, label)))
    layers.extend(env)
    if isinstance(overrides, Mapping):
        if overrides:
            layers.append(("command line", overrides))
    else:
        layers.extend((f"override {item}", parse_overrides([item])) for item in overrides)
    return load_layers(model, layers, default=label)


# -- command lines -------------------------------------------------------------------------------

@contextmanager
def exit_on_error(*errors: type[BaseException], code: int = 2,
                  echo: Callable[[str], None] | None = None) -> Iterator[None]:
    """Turn ConfigError (and ``errors``) into ``error: <message>`` on stderr and exit ``code``.

    Only the first line of a message is printed; no traceback.
    """
    catch: tuple[type[BaseException], ...] = (ConfigError, *errors)
    try:
        yield
    except catch as e:
        line = (str(e).strip().splitlines() or [type(e).__name__])[0]
        if echo is not None:
            echo(f"error: {line}")
        else:
            print(f"error: {line}", file=sys.stderr, flush=True)
        raise SystemExit(code) from None
