"""Render the service reference of ale.v1 (docs/contract.md's second half) from the .proto comments.

Reads a buf image (FileDescriptorSet with source info), so the doc says exactly what the
contract says: `python -m ale_proto.docgen IMAGE > docs/contract-reference.md`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from google.protobuf import descriptor_pb2

# Paths into FileDescriptorProto for source-info lookups (descriptor.proto field numbers).
_SERVICE, _METHOD = 6, 2


def _comments(fd: descriptor_pb2.FileDescriptorProto) -> dict[tuple[int, ...], str]:
    return {
        tuple(loc.path): " ".join(line.strip() for line in loc.leading_comments.strip().splitlines())
        for loc in fd.source_code_info.location
        if loc.leading_comments
    }


def render(image: Path) -> str:
    """Markdown with one section per service: who serves it, and a table of its RPCs."""
    fds = descriptor_pb2.FileDescriptorSet.FromString(image.read_bytes())
    out = ["# ale.v1 service reference", "", "Generated from the .proto comments by `python -m ale_proto.docgen`; "
           "do not edit by hand.", ""]
    for fd in sorted(fds.file, key=lambda f: f.name):
        if not fd.name.startswith("ale_proto/"):
            continue
        comments = _comments(fd)
        for si, svc in enumerate(fd.service):
            out += [f"## `{svc.name}` ({fd.name.split('/')[-1]})", "", comments.get((_SERVICE, si), ""), ""]
            out += ["| RPC | request → response | what it does |", "|---|---|---|"]
            for mi, m in enumerate(svc.method):
                req = ("stream " if m.client_streaming else "") + m.input_type.rsplit(".", 1)[-1]
                resp = ("stream " if m.server_streaming else "") + m.output_type.rsplit(".", 1)[-1]
                out.append(f"| `{m.name}` | `{req}` → `{resp}` | {comments.get((_SERVICE, si, _METHOD, mi), '')} |")
            out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    """``python -m ale_proto.docgen IMAGE``: print the reference."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        raise SystemExit("usage: python -m ale_proto.docgen BUF_IMAGE.binpb")
    sys.stdout.write(render(Path(argv[0])))


if __name__ == "__main__":
    main()
