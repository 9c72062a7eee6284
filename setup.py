"""Build the optional C accelerators, ``containers._engine._speedups`` (fmap's loops) and
``containers._crc32`` (the CRC32s of save and load) and ``containers._scan`` (the
header and tree of load's usual files) and ``containers._encoder`` (save's walk);
everything else about the package is in pyproject.toml.

The extensions are optional: where one cannot be built (no C compiler, an interpreter
other than CPython), the install goes on without it and the package runs the Python
code it accelerates (the generated loops; zlib.crc32), which passes the same tests
(docs/performance.md).
"""

import platform

from setuptools import Extension, setup

# One extension from several C files, one per accelerator, sharing _speedups.h.
ENGINE = "src/containers/_engine/"
SPEEDUPS = ["", "_idtable", "_loop", "_mapnode", "_flatten", "_paths", "_build", "_rebuild"]
speedups = Extension(
    "containers._engine._speedups",
    [f"{ENGINE}_speedups{part}.c" for part in SPEEDUPS],
    depends=[f"{ENGINE}_speedups.h", "src/containers/_sorted_keys.h"],
    optional=True,
)
crc32 = Extension("containers._crc32", ["src/containers/_crc32.c"], optional=True)
scan = Extension(
    "containers._scan",
    ["src/containers/_scan.c", "src/containers/_scan_records.c", "src/containers/_scan_fit.c"],
    depends=["src/containers/_scan.h"],
    optional=True,
)
encoder = Extension(
    "containers._encoder",
    ["src/containers/_encoder.c", "src/containers/_encoder_text.c"],
    depends=["src/containers/_encoder.h", "src/containers/_sorted_keys.h"],
    optional=True,
)
built = [speedups, crc32, scan, encoder]
setup(ext_modules=built if platform.python_implementation() == "CPython" else [])
