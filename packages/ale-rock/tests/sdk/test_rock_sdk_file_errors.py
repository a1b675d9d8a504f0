"""A missing file in a live sandbox is FileNotFound, not SandboxNotFound (issue 11, finding 12).

Client → Admin → Worker → Rocklet, all real: the error detail's field (``path``) survives the hops
and the SDK types it as a file error that is also a ``FileNotFoundError``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from ale_rock import AsyncSandbox, Sandbox
from ale_rock.local_cluster import LocalCluster
from ale_rock.sdk.errors import FileNotFound, SandboxError, SandboxNotFound


def _is_file_error(e: BaseException) -> None:
    assert isinstance(e, FileNotFound) and isinstance(e, FileNotFoundError) and isinstance(e, SandboxError)
    assert not isinstance(e, SandboxNotFound), "a missing file must not read as a missing sandbox"
    assert e.field == "path" and "/workspace/nope" in e.message


def test_missing_file_is_file_not_found(cluster: LocalCluster, tmp_path: Path) -> None:
    with Sandbox.create(client=cluster.client(), cpu=0.5, memory="256Mi") as sb:
        for call in (
            lambda: sb.read("/workspace/nope"),
            lambda: sb.ls("/workspace/nope"),
            lambda: sb.download("/workspace/nope", tmp_path / "x"),
        ):
            with pytest.raises(FileNotFound) as e:
                call()
            _is_file_error(e.value)
        # The sandbox itself is still there: the error was about the file only.
        assert sb.exec("echo ok").stdout == "ok\n"

    async def run() -> None:
        async with await AsyncSandbox.create(client=cluster.async_client(), cpu=0.5, memory="256Mi") as sb:
            with pytest.raises(FileNotFoundError) as e:
                await sb.read("/workspace/nope")
            _is_file_error(e.value)

    asyncio.run(run())


def test_os_error_kind_travels_as_errno(cluster: LocalCluster) -> None:
    """Reading a directory / listing a file: INVALID_ARGUMENT on ``path`` with the errno named."""
    from ale_rock.sdk.errors import InvalidArgument

    with Sandbox.create(client=cluster.client(), cpu=0.5, memory="256Mi") as sb:
        sb.write("/workspace/d/f.txt", "x")
        for call, name in ((lambda: sb.read("/workspace/d"), "EISDIR"), (lambda: sb.ls("/workspace/d/f.txt"), "ENOTDIR")):
            with pytest.raises(InvalidArgument) as e:
                call()
            assert e.value.field == "path" and e.value.metadata.get("errno") == name


def test_one_class_under_every_public_name() -> None:
    """The SDK, env, Admin and docker-backend names are the same classes (catching one catches all)."""
    import ale_rock
    from ale_proto import errors as one
    from ale_rock.admin import errors as admin
    from ale_rock.envs import errors as envs
    from ale_rock.sdk import errors as sdk

    assert sdk.SandboxLost is envs.SandboxLost is ale_rock.SandboxLost is one.SandboxLost
    assert sdk.SandboxNotFound is ale_rock.SandboxNotFound is one.SandboxNotFound
    assert sdk.SandboxError is envs.EnvError is admin.AdminError is one.AleError
    try:
        from ale_rock.backends import docker
    except ImportError:  # the docker extra is optional
        pass
    else:
        assert docker.SandboxNotFound is one.SandboxNotFound and issubclass(docker.DockerBackendError, one.AleError)
