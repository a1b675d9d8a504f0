"""The Rocklet boots from bytecode: a sandbox sees ALE's code read-only and can never cache it, so the
local backend writes the ``.pyc`` files of what the Rocklet imports (``local_host.compile_rocklet_code``)."""

from __future__ import annotations

import importlib.util
import shlex
from pathlib import Path

import ale_proto
import ale_rock
from ale_rock.backends.local import LocalBackend
from ale_rock.backends.local_bwrap import ROCKLET_BOOT
from ale_rock.backends.local_host import compile_rocklet_code


def rocklet_sources() -> list[Path]:
    rock = Path(ale_rock.__file__).resolve().parent
    proto = Path(ale_proto.__file__).resolve().parent
    return [*sorted((rock / "rocklet").glob("*.py")), rock / "grpc_options.py", *sorted(proto.rglob("*.py"))]


def valid_bytecode(src: Path) -> bool:
    """What the import system checks: a timestamp ``.pyc`` with this interpreter's magic, the
    source's mtime and size (PEP 552 header)."""
    pyc = Path(importlib.util.cache_from_source(str(src)))
    if not pyc.exists():
        return False
    head, st = pyc.read_bytes()[:16], src.stat()
    fields = [int.from_bytes(head[i : i + 4], "little") for i in (4, 8, 12)]
    return head[:4] == importlib.util.MAGIC_NUMBER and fields == [0, int(st.st_mtime) & 0xFFFFFFFF,
                                                                   st.st_size & 0xFFFFFFFF]


def test_every_module_the_rocklet_imports_from_ale_gets_valid_bytecode() -> None:
    sources = rocklet_sources()
    assert any(s.name == "server.py" for s in sources) and any(s.name == "rocklet_pb2.py" for s in sources)
    for src in sources:
        Path(importlib.util.cache_from_source(str(src))).unlink(missing_ok=True)
    assert not any(valid_bytecode(s) for s in sources)
    compile_rocklet_code()
    assert [s for s in sources if not valid_bytecode(s)] == []
    compile_rocklet_code()  # up to date: nothing to do, nothing breaks
    assert all(valid_bytecode(s) for s in sources)


def test_a_sandbox_loads_the_rocklets_code_from_that_bytecode(backend: LocalBackend, make_box) -> None:
    # The backend compiled it when it started; inside, the same interpreter imports what the Rocklet
    # imports (its boot code without the call to main) and says where each module's code came from.
    box = make_box()
    boot = ROCKLET_BOOT.replace("sys.exit(main(sys.argv[1:]))\n", "")
    r = box.sh(f"{shlex.quote(backend.config.python)} -s -v -c {shlex.quote(boot)} 2>&1 | grep '^# code object from'")
    loaded = r.stdout.decode().splitlines()
    ours = [line for line in loaded if "/ale_rock/" in line or "/ale_proto/" in line]
    assert any("rocklet/__pycache__/server." in line for line in ours), loaded[-20:]
    assert any("ale_proto/v1/__pycache__/rocklet_pb2." in line for line in ours), loaded[-20:]
    assert [line for line in ours if line.endswith(".py") or line.endswith(".py'")] == []
