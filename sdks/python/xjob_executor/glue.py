"""Script (GLUE) jobs: the job carries its script, the executor runs it with an interpreter, as
the Rust SDK does (docs/executors.md, "Script (GLUE) jobs"):

    RunRequest{glue_type, glue_source, glue_updated_ms}
      -> {log_dir}/gluesource/{job_id}_{glue_updated_ms}.{ext}   (written once per version)
      -> command handler: [interpreter, leading args..., script, params split on whitespace]

Off unless the executor enables a language: scripts are code sent over the network.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, Mapping, Optional

from ._proto import common_pb2
from .command import command_handler
from .context import Handler, JobContext, JobError

SCRIPT_DIR = "gluesource"

GROOVY_UNSUPPORTED = (
    "GLUE_TYPE_GROOVY is not supported: it is Java source compiled inside XXL-JOB's JVM executor, "
    "and xjob executors are not JVMs; use a BEAN handler or a script glue type (shell, python, "
    "nodejs, php, powershell)"
)

#: glue type -> (default interpreter, file extension, arguments before the script path)
LANGUAGES = {
    common_pb2.GLUE_TYPE_SHELL: ("bash", "sh", ()),
    common_pb2.GLUE_TYPE_PYTHON: ("python3", "py", ()),
    common_pb2.GLUE_TYPE_NODEJS: ("node", "js", ()),
    common_pb2.GLUE_TYPE_PHP: ("php", "php", ()),
    common_pb2.GLUE_TYPE_POWERSHELL: ("pwsh", "ps1", ("-NoLogo", "-NoProfile", "-NonInteractive", "-File")),
}


def glue_type_value(glue_type) -> int:
    """A glue type given as its enum value, its name (`GLUE_TYPE_SHELL`) or short name (`shell`)."""
    if isinstance(glue_type, int):
        value = glue_type
    else:
        name = str(glue_type).upper()
        value = common_pb2.GlueType.Value(name if name.startswith("GLUE_TYPE_") else f"GLUE_TYPE_{name}")
    if value not in LANGUAGES:
        raise ValueError(f"{common_pb2.GlueType.Name(value)} is not a script glue type")
    return value


def _script_file(glue_type: int, script_dir: Path, ctx: JobContext) -> Path:
    """The script of the run's job and version, written if this version is not stored yet (and
    then the job's older versions deleted)."""
    request = ctx._request
    prefix = f"{request.job_id}_"
    name = f"{prefix}{request.glue_updated_ms}.{LANGUAGES[glue_type][1]}"
    path = script_dir / name
    if path.exists():
        return path
    try:
        script_dir.mkdir(parents=True, exist_ok=True)
        # Written aside then renamed: a half-written file is never taken for this version.
        partial = script_dir / f"{name}.{request.log_id}.partial"
        partial.write_text(request.glue_source, encoding="utf-8")
        os.replace(partial, path)
    except OSError as error:
        raise JobError(f"failed to write the glue script {path}: {error}") from None
    for other in script_dir.iterdir():
        if other.name.startswith(prefix) and other.name != name:
            try:
                other.unlink()
            except OSError:
                pass  # only costs disk space
    return path


def glue_handler(glue_type: int, interpreter: str, env: Mapping[str, str], log_dir: str) -> Handler:
    script_dir = Path(log_dir) / SCRIPT_DIR
    leading = list(LANGUAGES[glue_type][2])

    async def run_script(ctx: JobContext):
        script = _script_file(glue_type, script_dir, ctx)
        ctx.log(f"glue {common_pb2.GlueType.Name(glue_type)} version {ctx._request.glue_updated_ms} from {script}")
        return await command_handler([interpreter, *leading, str(script)], env=env)(ctx)

    return run_script


def glue_runners(interpreters: Dict[int, Optional[str]], env: Mapping[str, str], log_dir: str) -> Dict[int, Handler]:
    return {
        glue_type: glue_handler(glue_type, interpreter or LANGUAGES[glue_type][0], env, log_dir)
        for glue_type, interpreter in interpreters.items()
    }
