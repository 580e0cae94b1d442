"""Generates the Python gRPC code of xjob's contract into package `xjob_executor._pb`.

    python build_proto.py            # from this folder, after editing proto/ (needs grpcio-tools)

setup.py runs it on every build (`pip install .`, `pip wheel .`, `python -m build`), so a wheel
built from this folder or from its sdist carries the generated modules. It reads only
./proto/xjob/v1 (a copy of the repository's proto files, kept equal by scripts/sdk-protos.sh),
never anything outside this folder.

protoc writes `from xjob.v1 import common_pb2`, as the files sit under xjob/v1 in proto/. The
modules live in xjob_executor/_pb instead (this distribution installs no top-level `xjob`
package), so those imports are rewritten to relative ones.
"""

import re
import sys
from pathlib import Path

PROTO_FILES = ["common", "registry", "executor"]
_ABSOLUTE_IMPORT = re.compile(r"^from xjob\.v1 import ", re.MULTILINE)


def generate(project_dir: Path) -> Path:
    from grpc_tools import protoc  # only needed at build time
    import grpc_tools

    source = project_dir / "proto"
    if not (source / "xjob" / "v1" / "executor.proto").exists():
        raise SystemExit(f"xjob proto files not found under {source}")
    out_dir = project_dir / "xjob_executor" / "_pb"
    out_dir.mkdir(parents=True, exist_ok=True)
    staging = project_dir / "build" / "proto-out"
    staging.mkdir(parents=True, exist_ok=True)
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{source}",
        f"-I{well_known}",
        f"--python_out={staging}",
        f"--pyi_out={staging}",
        f"--grpc_python_out={staging}",
    ] + [str(source / "xjob" / "v1" / f"{name}.proto") for name in PROTO_FILES]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed on " + " ".join(args[6:]))
    for generated in sorted((staging / "xjob" / "v1").iterdir()):
        text = _ABSOLUTE_IMPORT.sub("from . import ", generated.read_text())
        (out_dir / generated.name).write_text(text)
    (out_dir / "__init__.py").write_text(
        '"""Generated at build time from proto/xjob/v1 by build_proto.py; do not edit."""\n'
    )
    return out_dir


if __name__ == "__main__":
    print(generate(Path(__file__).resolve().parent), file=sys.stderr)
