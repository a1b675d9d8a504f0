"""ALE's protobuf/gRPC contract, ``ale.v1``.

The generated stubs live in :mod:`ale_proto.v1` (e.g. ``from ale_proto.v1 import sandbox_pb2``).
:mod:`ale_proto.errors` holds the typed-error wire convention; :mod:`ale_proto.serving` adds
health checking and reflection to a server (``ale-proto[server]`` extra).
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
