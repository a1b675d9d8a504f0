"""Generated Python stubs of the ale.v1 contract (do not edit: run `make proto`).

Import the modules you need, e.g. ``from ale_proto.v1 import sandbox_pb2, sandbox_pb2_grpc``.
"""
