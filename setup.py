"""Build fmap's optional C accelerator, ``containers._speedups`` (everything else about
the package is in pyproject.toml).

The extension is optional: where it cannot be built (no C compiler, an interpreter
other than CPython), the install goes on without it and fmap runs the generated Python
loop it accelerates, which passes the same tests (docs/performance.md).
"""

import platform

from setuptools import Extension, setup

speedups = Extension("containers._speedups", ["src/containers/_speedups.c"], optional=True)
setup(ext_modules=[speedups] if platform.python_implementation() == "CPython" else [])
