"""Negative controls: every function here must make each checker report an error.

Never executed. tests/typing/test_checkers.py asserts that these fail, which shows that
a wrong ``assert_type`` or a stale ``# type: ignore`` in the other case files would fail
too.
"""

from __future__ import annotations

from typing_extensions import assert_type


def control_wrong_assert_type() -> None:
    assert_type(1, str)  # deliberately wrong


def control_unused_ignore(x: int) -> None:
    y: int = x  # type: ignore[assignment]  # deliberately stale
    assert_type(y, int)
