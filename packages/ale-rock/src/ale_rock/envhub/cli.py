"""``ale-rock envhub``: register / ls / show / build / rm environment specs on an EnvHubService.

The lead mounts it with ``app.add_typer(envhub.cli.app, name="envhub")``. The server is
``--address`` or ``$ALE_ENVHUB_ADDRESS`` (default ``127.0.0.1:50072``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="Environment specs (EnvHub): register, list, build (cached per spec hash).",
                  no_args_is_help=True)

AddressOpt = Annotated[str | None, typer.Option("--address", "-a", help="EnvHub host:port (env ALE_ENVHUB_ADDRESS).")]
VersionOpt = Annotated[str, typer.Option("--version", "-v", help="Version; default the latest.")]


def _client(address: str | None):  # type: ignore[no-untyped-def]
    from ale_rock.envhub.client import EnvHubClient

    return EnvHubClient(address)


def _fail(e: Exception) -> typer.Exit:
    typer.echo(f"error: {e}", err=True)
    return typer.Exit(1)


@app.command("register")
def register(file: Annotated[Path, typer.Argument(help="Spec YAML file.")], address: AddressOpt = None) -> None:
    """Register (or replace) the spec in FILE; prints name:version and its hash."""
    from ale_rock.envhub.client import EnvHubClientError
    from ale_rock.envhub.spec import EnvSpecError, load_spec

    try:
        spec = load_spec(file)
        spec_hash = _client(address).register(spec)
    except (EnvSpecError, EnvHubClientError) as e:
        raise _fail(e) from None
    typer.echo(f"registered {spec.ref} {spec_hash[:12]}")


@app.command("ls")
def ls(address: AddressOpt = None) -> None:
    """List specs: name, version, hash, base."""
    from ale_rock.envhub.client import EnvHubClientError

    try:
        rows = _client(address).list()
    except EnvHubClientError as e:
        raise _fail(e) from None
    for spec, spec_hash in rows:
        base = spec.base.kind
        typer.echo(f"{spec.name}\t{spec.version}\t{spec_hash[:12]}\t{base}\t{spec.description}")


@app.command("show")
def show(name: str, version: VersionOpt = "", address: AddressOpt = None) -> None:
    """Print a spec as YAML, with its hash and build states."""
    from ale_rock.envhub.client import EnvHubClientError
    from ale_rock.envhub.spec import dump_spec

    try:
        info = _client(address).get(name, version)
    except EnvHubClientError as e:
        raise _fail(e) from None
    typer.echo(dump_spec(info.spec).rstrip())
    typer.echo(f"# spec_hash: {info.spec_hash}")
    for backend, state in sorted(info.builds.items()):
        typer.echo(f"# build[{backend}]: {state}")


@app.command("build")
def build(
    name: str,
    version: VersionOpt = "",
    backend: Annotated[str, typer.Option("--backend", "-b", help="docker | local")] = "docker",
    force: Annotated[bool, typer.Option("--force", help="Rebuild even when cached.")] = False,
    address: AddressOpt = None,
) -> None:
    """Build NAME for a backend, streaming the log (a no-op when cached)."""
    from ale_rock.envhub.client import EnvHubClientError

    state, cached = "", False
    try:
        for line, st, was_cached in _client(address).build(name, version, backend, force):
            typer.echo(line)
            state, cached = st, was_cached
    except EnvHubClientError as e:
        raise _fail(e) from None
    typer.echo(f"state: {state}{' (cached)' if cached else ''}")
    if state != "READY":
        raise typer.Exit(1)


@app.command("rm")
def rm(name: str, version: VersionOpt = "", address: AddressOpt = None) -> None:
    """Delete a spec (every version unless --version) and its cached builds."""
    from ale_rock.envhub.client import EnvHubClientError

    try:
        _client(address).delete(name, version)
    except EnvHubClientError as e:
        raise _fail(e) from None
    typer.echo(f"deleted {name}{':' + version if version else ''}")
