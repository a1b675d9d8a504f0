"""Generate the Python stubs of ale.v1 from the .proto files (used by `make proto` and the
staleness test).

The .proto tree lives at ``proto/ale_proto/v1/`` so that protoc's output imports come out as
``ale_proto.v1`` with no post-generation rewriting. grpcio-tools is pinned in
requirements-dev.txt so generation is reproducible.
"""

from __future__ import annotations

import sys
from pathlib import Path

PACKAGE_INIT = '''"""Generated Python stubs of the ale.v1 contract (do not edit: run `make proto`).

Import the modules you need, e.g. ``from ale_proto.v1 import sandbox_pb2, sandbox_pb2_grpc``.
"""
'''


def proto_files(proto_root: Path) -> list[Path]:
    """All .proto files of ale.v1, sorted for reproducible output."""
    return sorted((proto_root / "ale_proto" / "v1").glob("*.proto"))


def generate(proto_root: Path, out_root: Path) -> list[Path]:
    """Run protoc (from grpcio-tools) and write *_pb2.py, *_pb2.pyi and *_pb2_grpc.py under out_root."""
    try:
        import grpc_tools
        from grpc_tools import protoc
    except ImportError as e:  # pragma: no cover - dev dependency
        raise SystemExit("grpcio-tools is needed to generate stubs: pip install -r requirements-dev.txt") from e

    files = proto_files(proto_root)
    if not files:
        raise SystemExit(f"no .proto files under {proto_root}/ale_proto/v1")
    out_dir = out_root / "ale_proto" / "v1"
    out_dir.mkdir(parents=True, exist_ok=True)
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    # protoc maps each absolute file path back to its name under the first -I that contains it.
    rc = protoc.main(
        [
            "protoc",
            f"-I{proto_root}",
            f"-I{well_known}",
            f"--python_out={out_root}",
            f"--pyi_out={out_root}",
            f"--grpc_python_out={out_root}",
            *[str(f) for f in files],
        ]
    )
    if rc != 0:
        raise SystemExit(f"protoc failed with exit code {rc}")
    (out_dir / "__init__.py").write_text(PACKAGE_INIT)
    return sorted(p for p in out_dir.iterdir() if p.is_file() and p.name != "__init__.py")


def main(argv: list[str] | None = None) -> None:
    """``python -m ale_proto.codegen PROTO_ROOT OUT_ROOT``."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        raise SystemExit("usage: python -m ale_proto.codegen PROTO_ROOT OUT_ROOT")
    proto_root, out_root = (Path(a).resolve() for a in argv)
    for p in generate(proto_root, out_root):
        print(p)


if __name__ == "__main__":
    main()
