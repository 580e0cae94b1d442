"""Generates the Python gRPC code of xjob's contract (package `xjob.v1`) with grpcio-tools.

    python -m xjob_executor.generate [OUT_DIR]

Reads the .proto files from $XJOB_PROTO_DIR, or from ../../proto next to this project (the
repository layout), and writes xjob/v1/{common,registry,executor,admin}_pb2[_grpc].py under
OUT_DIR (default: this project's directory), where they import each other as `xjob.v1.*`.
"""

import os
import sys
from pathlib import Path

PROTO_FILES = ["common", "registry", "executor", "admin"]


def proto_dir(project_dir: Path) -> Path:
    configured = os.environ.get("XJOB_PROTO_DIR")
    if configured:
        return Path(configured)
    return project_dir.parent.parent / "proto"


def generate(project_dir: Path, out_dir: Path = None) -> None:
    from grpc_tools import protoc  # only needed at build time
    import grpc_tools

    out_dir = Path(out_dir or project_dir)
    source = proto_dir(project_dir)
    if not (source / "xjob" / "v1" / "executor.proto").exists():
        raise SystemExit(f"xjob proto files not found under {source}; set XJOB_PROTO_DIR")
    package_dir = out_dir / "xjob" / "v1"
    package_dir.mkdir(parents=True, exist_ok=True)
    for init in (out_dir / "xjob" / "__init__.py", package_dir / "__init__.py"):
        if not init.exists():
            init.write_text('"""Generated from proto/xjob/v1 by xjob_executor.generate."""\n')
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{source}",
        f"-I{well_known}",
        f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
    ] + [str(source / "xjob" / "v1" / f"{name}.proto") for name in PROTO_FILES]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed on " + " ".join(args[5:]))


if __name__ == "__main__":
    here = Path(__file__).resolve().parent.parent
    generate(here, Path(sys.argv[1]) if len(sys.argv) > 1 else None)
