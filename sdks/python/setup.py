"""Build hook: generates xjob/v1/*_pb2*.py from the repository's proto/ before packaging.

Everything else about the project is in pyproject.toml. `pip install -e .` and `pip install .`
both run this step; `python -m xjob_executor.generate` runs it by hand.
"""

import importlib.util
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _load_generator():
    # Loaded by path: the package itself cannot be imported before its code is generated.
    spec = importlib.util.spec_from_file_location("xjob_generate", HERE / "xjob_executor" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildWithProto(build_py):
    def run(self):
        _load_generator().generate(HERE)
        super().run()


# Generated before setup() too: setuptools checks that every listed package exists (xjob.v1)
# while it writes the metadata, before any build step runs.
_load_generator().generate(HERE)
setup(cmdclass={"build_py": BuildWithProto})
