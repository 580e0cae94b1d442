"""The generated modules of package xjob.v1, with a clear error when they were not generated."""

try:
    from xjob.v1 import common_pb2, executor_pb2, executor_pb2_grpc, registry_pb2, registry_pb2_grpc
except ImportError as error:  # pragma: no cover - depends on the install
    raise ImportError(
        "xjob.v1 is not generated: install this project (pip install -e sdks/python) "
        "or run `python -m xjob_executor.generate`"
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
