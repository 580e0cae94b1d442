"""Build hook: generates xjob_executor/_pb/*_pb2*.py from ./proto before packaging.

Everything else about the project is in pyproject.toml. `pip install .`, `pip wheel .` and an
sdist's build all run this step; `python build_proto.py` runs it by hand.
"""

import importlib.util
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _load_generator():
    # Loaded by path: it is a build script beside setup.py, not part of the package.
    spec = importlib.util.spec_from_file_location("xjob_build_proto", HERE / "build_proto.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildWithProto(build_py):
    def run(self):
        _load_generator().generate(HERE)
        super().run()


# Generated before setup() too: setuptools checks that every listed package exists
# (xjob_executor._pb) while it writes the metadata, before any build step runs.
_load_generator().generate(HERE)
setup(cmdclass={"build_py": BuildWithProto})
