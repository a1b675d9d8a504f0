"""The ``ale-rock`` command: ``admin``, ``worker``, ``proxy``, ``sandbox …``, ``bench``.

Heavy modules are imported inside the commands, so ``ale-rock --help`` stays fast.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from ale_rock.sdk.client import Client

from ale_rock.envhub.cli import app as _envhub_app  # noqa: E402  (light: imports inside commands)
from ale_rock.tasks.cli import app as _tasks_app  # noqa: E402

app = typer.Typer(help="ALE's sandbox manager.", no_args_is_help=True, add_completion=False)
sandbox_app = typer.Typer(help="Manage sandboxes through an admin (ALE_ROCK_ADDRESS, ALE_ROCK_API_KEY).",
                          no_args_is_help=True)
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(_tasks_app, name="tasks")
app.add_typer(_envhub_app, name="envhub")

AddressOpt = Annotated[str | None, typer.Option("--address", "-a", help="Admin host:port (env ALE_ROCK_ADDRESS).")]
KeyOpt = Annotated[str | None, typer.Option("--api-key", "-k", help="API key (env ALE_ROCK_API_KEY).")]


def _err(message: str, code: int = 1) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def _client(address: str | None, api_key: str | None) -> Client:
    from ale_rock.sdk.client import Client
    from ale_rock.sdk.errors import SandboxError

    try:
        return Client(address, api_key)
    except SandboxError:  # the only one __init__ raises: no key given
        raise _err("no API key: pass --api-key or set ALE_ROCK_API_KEY", 2) from None
    except ValueError as e:  # e.g. ALE_ROCK_TIMEOUT is not a number
        raise _err(f"bad client setting (ALE_ROCK_TIMEOUT / ALE_ROCK_TLS_CA): {e}", 2) from None


def _run(fn: Any) -> Any:
    """Call ``fn`` and turn SDK errors into a one-line message and exit status 1."""
    from ale_rock.sdk.errors import SandboxError

    try:
        return fn()
    except SandboxError as e:
        raise _err(f"{e.code.name.lower()}: {e}") from None


def _kv(items: list[str] | None, what: str) -> dict[str, str]:
    out = {}
    for item in items or []:
        k, sep, v = item.partition("=")
        if not sep:
            raise _err(f"{what} must be KEY=VALUE, got {item!r}", 2)
        out[k] = v
    return out


# -- servers ---------------------------------------------------------------------------------------
def _dump_stacks_on_sigusr1() -> None:
    """``kill -USR1 <pid>`` writes every thread's stack to stderr (the server's log): how to see
    where a server that looks stuck is waiting, without a debugger on the box."""
    import faulthandler
    import signal

    faulthandler.register(signal.SIGUSR1, all_threads=True)


@app.command()
def admin(
    config: Annotated[Path | None, typer.Option(help="YAML config file (see AdminConfig).")] = None,
    host: Annotated[str | None, typer.Option(help="Interface to listen on.")] = None,
    port: Annotated[int | None, typer.Option(help="Port (0 = pick a free one).")] = None,
    db: Annotated[Path | None, typer.Option(help="SQLite state store path.")] = None,
    api_key: Annotated[list[str] | None, typer.Option("--api-key", help="KEY=NAMESPACE (repeatable).")] = None,
    join_token: Annotated[str | None, typer.Option(help="Token workers must present.")] = None,
    ready_file: Annotated[Path | None, typer.Option(help="Write the bound port here once serving.")] = None,
    log_level: Annotated[str, typer.Option(help="Log level.")] = "INFO",
) -> None:
    """Run the Admin (SandboxService + WorkerRegistryService) until SIGTERM."""
    from ale_proto.config import exit_on_error

    from ale_rock.admin.config import AdminConfig
    from ale_rock.admin.logs import configure
    from ale_rock.admin.server import serve_admin

    overrides: dict[str, Any] = {"host": host, "port": port, "db_path": db, "join_token": join_token}
    with exit_on_error():
        cfg = AdminConfig.load(config, **overrides)
    configure(log_level)
    _dump_stacks_on_sigusr1()
    if api_key:
        cfg.api_keys.update(_kv(api_key, "--api-key"))

    def ready(bound: int) -> None:
        if ready_file:
            tmp = ready_file.with_suffix(".tmp")
            tmp.write_text(str(bound))
            tmp.replace(ready_file)

    serve_admin(cfg, ready)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def worker(
    ctx: typer.Context,
    config: Annotated[Path | None, typer.Option(help="YAML config file (see WorkerConfig).")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", "-c", help="Override a config field: key=value.")] = None,
) -> None:
    """Run a Worker (registers with an admin, runs sandboxes through a backend)."""
    from ale_proto.config import exit_on_error, load_config

    try:
        from ale_rock.worker.config import WorkerConfig
        from ale_rock.worker.server import run_worker
    except ImportError as e:  # pragma: no cover - depends on the worker package being present
        raise _err(f"the worker is not available in this install: {e}") from None

    if ctx.args:
        raise _err(f"unexpected arguments {ctx.args}; use --set key=value", 2)
    with exit_on_error():
        cfg = load_config(WorkerConfig, config, set_ or [])
    _dump_stacks_on_sigusr1()
    raise typer.Exit(run_worker(cfg))


proxy_app = typer.Typer(help="The ModelProxy: run it (no sub-command) or manage its episodes.")
proxy_episode_app = typer.Typer(
    help="Open / close ModelProxy episodes (per-episode OpenAI base URL + key) over its gRPC service.",
    no_args_is_help=True)
proxy_app.add_typer(proxy_episode_app, name="episode")
app.add_typer(proxy_app, name="proxy")
ProxyAddressOpt = Annotated[str, typer.Option("--address", "-a", envvar="ALE_PROXY_ADDRESS",
                                              help="ModelProxyService host:port (env ALE_PROXY_ADDRESS).")]


@proxy_app.callback(invoke_without_command=True)
def proxy(
    ctx: typer.Context,
    config: Annotated[Path | None, typer.Option(help="YAML config file (see ModelProxyConfig).")] = None,
    host: Annotated[str | None, typer.Option(help="Interface both servers bind.")] = None,
    grpc_port: Annotated[int | None, typer.Option(help="ModelProxyService port (0 = a free one).")] = None,
    http_port: Annotated[int | None, typer.Option(help="OpenAI endpoint port (0 = a free one).")] = None,
    inference_address: Annotated[str | None, typer.Option(
        help="Upstream: ale-roll's InferenceService at host:port (token-exact records).")] = None,
    base_url: Annotated[str | None, typer.Option(
        help="Upstream: an OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1.")] = None,
    model: Annotated[str | None, typer.Option(help="Model name for episodes that give none.")] = None,
    upstream_api_key: Annotated[str | None, typer.Option(
        envvar="ALE_PROXY_UPSTREAM_API_KEY", help="Key sent to the OpenAI-compatible upstream.")] = None,
    public_base_url: Annotated[str | None, typer.Option(
        help="Base URL handed to agents (as their sandboxes reach the proxy).")] = None,
    record_dir: Annotated[str | None, typer.Option(help="Also append every call to DIR/<episode>.jsonl.")] = None,
    admin_token: Annotated[str | None, typer.Option(
        envvar="ALE_PROXY_ADMIN_TOKEN", help="Bearer token of the HTTP admin routes (/admin/v1/episodes).")] = None,
) -> None:
    """Run the ModelProxy (gRPC ModelProxyService + OpenAI HTTP endpoint) until SIGTERM."""
    if ctx.invoked_subcommand is not None:
        return
    from ale_proto.config import exit_on_error, load_config

    from ale_rock.proxy.service import ModelProxyConfig, run_model_proxy

    if inference_address and base_url:
        raise _err("give --inference-address or --base-url, not both", 2)
    data: dict[str, Any] = {}
    if inference_address:
        data.update(default_upstream="inference", default_target=inference_address)
    elif base_url:
        data.update(default_upstream="openai", default_target=base_url)
    flags = {"host": host, "grpc_port": grpc_port, "http_port": http_port, "default_model": model,
             "openai_api_key": upstream_api_key, "public_base_url": public_base_url, "record_dir": record_dir,
             "admin_token": admin_token}
    data.update({k: v for k, v in flags.items() if v is not None})
    with exit_on_error():
        cfg = load_config(ModelProxyConfig, config, data)
    raise typer.Exit(run_model_proxy(cfg))


def _proxy_call(fn: Any) -> Any:
    from ale_rock.sdk.model_proxy import ModelProxyClientError

    try:
        return fn()
    except ModelProxyClientError as e:
        raise _err(str(e)) from None


@proxy_episode_app.command("open")
def proxy_episode_open(
    episode_id: Annotated[str, typer.Option("--id", help="Episode id (default: a fresh one).")] = "",
    sandbox_id: Annotated[str, typer.Option(help="Sandbox the key is bound to (calls forwarded by its Rocklet).")] = "",
    upstream: Annotated[str, typer.Option(help="inference, openai or replay (default: the proxy's).")] = "",
    target: Annotated[str, typer.Option(
        help="Upstream address / base URL / recording (default: the proxy's).")] = "",
    model: Annotated[str, typer.Option(help="Model the episode serves (default: the proxy's).")] = "",
    max_calls: Annotated[int, typer.Option(min=0, help="Call budget (0 = unlimited).")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of shell exports.")] = False,
    address: ProxyAddressOpt = "",
) -> None:
    """Open an episode; prints OPENAI_BASE_URL / OPENAI_API_KEY exports (eval-able) or JSON."""
    import shlex
    import uuid

    import grpc
    from ale_proto.errors import error_detail_of
    from ale_proto.v1 import model_proxy_pb2, model_proxy_pb2_grpc

    kinds = {"": model_proxy_pb2.UPSTREAM_KIND_UNSPECIFIED,
             "inference": model_proxy_pb2.UPSTREAM_KIND_INFERENCE_SERVICE,
             "openai": model_proxy_pb2.UPSTREAM_KIND_OPENAI, "replay": model_proxy_pb2.UPSTREAM_KIND_REPLAY}
    if upstream not in kinds:
        raise _err("--upstream must be inference, openai or replay", 2)
    if not address:
        raise _err("give the proxy's gRPC address: --address HOST:PORT or ALE_PROXY_ADDRESS", 2)
    episode_id = episode_id or f"ep-{uuid.uuid4().hex[:12]}"
    request = model_proxy_pb2.OpenEpisodeRequest(
        episode_id=episode_id, sandbox_id=sandbox_id, upstream=kinds[upstream], upstream_target=target,
        model=model, max_calls=max_calls)
    from ale_rock.grpc_options import channel_options

    with grpc.insecure_channel(address, options=channel_options()) as channel:
        try:
            ep = model_proxy_pb2_grpc.ModelProxyServiceStub(channel).OpenEpisode(request, timeout=30)
        except grpc.RpcError as e:
            raise _err(f"OpenEpisode failed: {error_detail_of(e).message}") from None
    if as_json:
        typer.echo(json.dumps({"episode_id": episode_id, "base_url": ep.base_url, "api_key": ep.api_key}))
        return
    exports = {"ALE_EPISODE_ID": episode_id, "OPENAI_BASE_URL": ep.base_url, "OPENAI_API_KEY": ep.api_key}
    if model:
        exports["OPENAI_MODEL"] = model
    for k, v in exports.items():
        typer.echo(f"export {k}={shlex.quote(v)}")


@proxy_episode_app.command("close")
def proxy_episode_close(
    episode_id: Annotated[str, typer.Argument(help="The episode to close (its key dies).")],
    records: Annotated[Path | None, typer.Option(help="Write its call records here (JSON lines).")] = None,
    address: ProxyAddressOpt = "",
) -> None:
    """Close an episode; prints how many calls it recorded (and saves the records with --records)."""
    from ale_rock.proxy.records import save_records
    from ale_rock.sdk.model_proxy import ModelProxyClient

    if not address:
        raise _err("give the proxy's gRPC address: --address HOST:PORT or ALE_PROXY_ADDRESS", 2)
    with ModelProxyClient(address) as client:
        calls = _proxy_call(lambda: client.close_episode(episode_id))
        if records is not None:
            save_records(records, _proxy_call(lambda: client.records(episode_id)))
    typer.echo(f"closed {episode_id}: {calls} calls" + (f", records in {records}" if records else ""))


# -- sandboxes -------------------------------------------------------------------------------------
@sandbox_app.command("create")
def sandbox_create(
    image: Annotated[str, typer.Option(help="Image / environment (default: the backend's base).")] = "",
    cpu: Annotated[float | None, typer.Option(help="CPU cores (e.g. 0.5).")] = None,
    memory: Annotated[str | None, typer.Option(help="Memory (e.g. 512Mi).")] = None,
    ttl: Annotated[int | None, typer.Option(help="Seconds until it is deleted.")] = None,
    idle_timeout: Annotated[int | None, typer.Option(help="Stop after this many idle seconds.")] = None,
    backend: Annotated[str, typer.Option(help="local or docker (default: the server's).")] = "",
    label: Annotated[list[str] | None, typer.Option(help="KEY=VALUE (repeatable).")] = None,
    allow: Annotated[list[str] | None, typer.Option(help="Allowed egress host[:port] (repeatable).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the sandbox as JSON.")] = False,
    address: AddressOpt = None, api_key: KeyOpt = None,
) -> None:
    """Create a sandbox and print its id once it runs."""
    from rich.console import Console

    from ale_rock.sdk.sandbox import Sandbox

    client = _client(address, api_key)
    with Console(stderr=True).status("creating sandbox…"):
        sb = _run(lambda: Sandbox.create(
            image, cpu=cpu, memory=memory, ttl=ttl, idle_timeout=idle_timeout, backend=backend,
            labels=_kv(label, "--label"), allow=allow or (), client=client))
    info = sb.info
    typer.echo(json.dumps(_info_dict(info)) if as_json else info.id)


def _info_dict(info: Any) -> dict[str, Any]:
    from dataclasses import asdict

    d = asdict(info)
    d["create_time"] = info.create_time.isoformat()
    d["expire_time"] = info.expire_time.isoformat()
    return d


@sandbox_app.command("ls")
def sandbox_ls(
    state: Annotated[list[str] | None, typer.Option(help="Only these states (repeatable).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON lines.")] = False,
    address: AddressOpt = None, api_key: KeyOpt = None,
) -> None:
    """List the sandboxes of your namespace."""
    from ale_rock.sdk.sandbox import Sandbox

    client = _client(address, api_key)
    infos = _run(lambda: Sandbox.list(client=client, states=state or ()))
    if as_json:
        for info in infos:
            typer.echo(json.dumps(_info_dict(info)))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("ID", "STATE", "WORKER", "IMAGE", "CPU", "MEMORY", "CREATED")
    for i in infos:
        table.add_row(i.id, i.state, i.worker_id, i.image or "-", f"{i.cpu_millis}m",
                      f"{i.memory_bytes // 2**20}Mi", i.create_time.strftime("%H:%M:%S"))
    Console().print(table)


@sandbox_app.command("exec", context_settings={"allow_interspersed_args": False})
def sandbox_exec(
    sandbox_id: Annotated[str, typer.Argument(help="Sandbox id.")],
    command: Annotated[list[str], typer.Argument(help="Command and arguments (one argument = a shell line).")],
    timeout: Annotated[float | None, typer.Option(help="Hard timeout in seconds.")] = None,
    cwd: Annotated[str, typer.Option(help="Working directory.")] = "",
    env: Annotated[list[str] | None, typer.Option(help="KEY=VALUE (repeatable).")] = None,
    address: AddressOpt = None, api_key: KeyOpt = None,
) -> None:
    """Run a command, stream its output, and exit with its status."""
    from ale_rock.sdk.sandbox import Sandbox

    sb = Sandbox(sandbox_id, _client(address, api_key))
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise _err("no command given", 2)
    cmd: str | list[str] = command[0] if len(command) == 1 else command

    def go() -> int:
        code = 0
        for ev in sb.exec_stream(cmd, timeout=timeout, cwd=cwd, env=_kv(env, "--env")):
            if ev.kind == "stdout":
                sys.stdout.buffer.write(ev.data)
                sys.stdout.flush()
            elif ev.kind == "stderr":
                sys.stderr.buffer.write(ev.data)
                sys.stderr.flush()
            elif ev.kind == "exit" and ev.result is not None:
                code = ev.result.exit_code
                if ev.result.end_reason not in ("exited", "signaled"):
                    typer.echo(f"[{ev.result.end_reason}] {ev.result.error}".rstrip(), err=True)
                    code = code or 124
        return code

    raise typer.Exit(_run(go))


@sandbox_app.command("shell")
def sandbox_shell(
    sandbox_id: Annotated[str, typer.Argument(help="Sandbox id.")],
    address: AddressOpt = None, api_key: KeyOpt = None,
) -> None:
    """An interactive line-by-line shell session (cwd and env persist; Ctrl-D quits)."""
    from ale_rock.sdk.sandbox import Sandbox

    sb = Sandbox(sandbox_id, _client(address, api_key))
    session = _run(lambda: sb.session())
    interactive = sys.stdin.isatty()
    try:
        while True:
            if interactive:
                typer.echo(f"{sandbox_id}$ ", nl=False)
            line = sys.stdin.readline()
            if not line:
                break
            if not line.strip():
                continue
            result = _run(lambda line=line: session.run(line.rstrip("\n")))
            sys.stdout.write(result.stdout)
            sys.stdout.flush()
    finally:
        _run(session.close)


@sandbox_app.command("cp")
def sandbox_cp(
    src: Annotated[str, typer.Argument(help="LOCAL or SANDBOX_ID:/path.")],
    dst: Annotated[str, typer.Argument(help="LOCAL or SANDBOX_ID:/path.")],
    address: AddressOpt = None, api_key: KeyOpt = None,
) -> None:
    """Copy a file or directory into or out of a sandbox (SHA-256 verified)."""
    from rich.console import Console

    from ale_rock.sdk.sandbox import Sandbox

    def split(spec: str) -> tuple[str, str]:
        head, sep, tail = spec.partition(":")
        return (head, tail) if sep and head.startswith("sb-") else ("", spec)

    (s_id, s_path), (d_id, d_path) = split(src), split(dst)
    if bool(s_id) == bool(d_id):
        raise _err("exactly one of SRC and DST must be SANDBOX_ID:/path", 2)
    client = _client(address, api_key)
    with Console(stderr=True).status(f"copying {src} → {dst}…"):
        if d_id:
            n = _run(lambda: Sandbox(d_id, client).upload(s_path, d_path))
            typer.echo(f"uploaded {n} bytes", err=True)
        else:
            out = _run(lambda: Sandbox(s_id, client).download(s_path, d_path))
            typer.echo(f"downloaded to {out}", err=True)


@sandbox_app.command("rm")
def sandbox_rm(
    sandbox_ids: Annotated[list[str], typer.Argument(help="Sandbox ids.")],
    address: AddressOpt = None, api_key: KeyOpt = None,
) -> None:
    """Delete sandboxes (reaping everything they left)."""
    from ale_rock.sdk.sandbox import Sandbox

    client = _client(address, api_key)
    for sid in sandbox_ids:
        _run(lambda sid=sid: Sandbox(sid, client).delete())
        typer.echo(sid)


@sandbox_app.command("stop")
def sandbox_stop(
    sandbox_id: Annotated[str, typer.Argument(help="Sandbox id.")],
    address: AddressOpt = None, api_key: KeyOpt = None,
) -> None:
    """Stop a sandbox (files kept until rm)."""
    from ale_rock.sdk.sandbox import Sandbox

    info = _run(lambda: Sandbox(sandbox_id, _client(address, api_key)).stop())
    typer.echo(f"{info.id} {info.state}")


@sandbox_app.command("stats")
def sandbox_stats(
    sandbox_id: Annotated[str, typer.Argument(help="Sandbox id.")],
    address: AddressOpt = None, api_key: KeyOpt = None,
) -> None:
    """Print a sandbox's resource usage as JSON."""
    from dataclasses import asdict

    from ale_rock.sdk.sandbox import Sandbox

    stats = _run(lambda: Sandbox(sandbox_id, _client(address, api_key)).stats())
    typer.echo(json.dumps(asdict(stats)))


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def bench(ctx: typer.Context) -> None:
    """Sandbox benchmark (create → first exec, exec round trip, docker run baseline) as JSON.

    Runs the repository's bench/rock.py with the arguments given, e.g. --json --backend docker.

    The benchmarks are in the repository's bench/ folder, not in the package: it needs a checkout.
    """
    import subprocess

    script = _repo_bench("rock.py")
    if script is None:
        raise _err(
            "the benchmarks are in the repository's bench/ folder, not in the installed package: from a "
            "checkout, run `python bench/rock.py --json [--backend docker]`",
            2,
        )
    raise typer.Exit(subprocess.call([sys.executable, str(script), *ctx.args]))


def _repo_bench(name: str) -> Path | None:
    """``bench/<name>`` of the checkout this package runs from (editable install), else of the
    current folder; None when neither has one."""
    here = Path(__file__).resolve()
    roots = [here.parents[4]] if len(here.parents) > 4 else []  # <repo>/packages/ale-rock/src/ale_rock
    for root in [*roots, Path.cwd()]:
        script = root / "bench" / name
        if script.is_file():
            return script
    return None


def main() -> None:
    """Entry point of the ``ale-rock`` script."""
    app()


if __name__ == "__main__":
    main()
