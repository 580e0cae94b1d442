"""The generated modules of xjob's contract (xjob_executor._pb), with a clear error when they
were not generated."""

try:
    from ._pb import common_pb2, executor_pb2, executor_pb2_grpc, registry_pb2, registry_pb2_grpc
except ImportError as error:  # pragma: no cover - depends on the install
    raise ImportError(
        "xjob_executor._pb is not generated: install this package (pip install .) "
        "or run `python build_proto.py` in its folder"
    ) from error

# Protocol version sent in Register; the admin refuses any other.
PROTOCOL_VERSION = 1

__all__ = [
    "PROTOCOL_VERSION",
    "common_pb2",
    "executor_pb2",
    "executor_pb2_grpc",
    "registry_pb2",
    "registry_pb2_grpc",
]
