"""An executor map's options: ``progress=`` (a callback or a bar on stderr) and the
checks of ``executor=``, ``chunksize=`` and ``progress=``.

A stage below ``_parallel``. It walks no tree and runs no call of ``f``; tqdm or rich
are imported only when ``progress=True`` asks for a bar.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable
from typing import Any

from containers._engine._relocate import add_note
from containers._errors import short_repr

__all__ = ["Bar", "check_options"]


class Bar:
    """``progress=``: a callback ``(done, total)``, or True for a bar on stderr."""

    def __init__(self, op: str, progress: Any, total: int) -> None:
        self.close: Callable[[], None] = _nothing
        if progress is None or progress is False:
            self.update: Callable[[int], None] = _ignore
            return
        if progress is True:
            self.update, self.close = _stderr_bar(op, total)
            return
        if not callable(progress):
            raise TypeError(
                f"{op}: progress= must be True (a bar on stderr), a function called as "
                f"progress(done, total), or None, got {short_repr(progress)}."
            )

        def update(done: int) -> None:
            try:
                progress(done, total)
            except Exception as err:  # not f's: say whose, or it reads as f's error
                add_note(
                    err,
                    f"{op}: raised by the progress= function, called as progress({done}, {total})",
                )
                raise

        self.update = update


def _nothing() -> None:
    return


def _ignore(done: int) -> None:
    return


def _stderr_bar(op: str, total: int) -> tuple[Callable[[int], None], Callable[[], None]]:
    """A bar drawn by tqdm, or else rich; an ImportError says to install one."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        pass
    else:
        bar = tqdm(total=total, desc=op, file=sys.stderr)

        def update(done: int) -> None:
            bar.update(done - bar.n)

        return update, bar.close
    try:
        from rich.progress import Progress
    except ImportError:
        raise ImportError(
            f"{op}: progress=True draws a bar with tqdm or rich, and neither is installed. "
            f"Install one (pip install tqdm), or pass progress=a function (done, total)."
        ) from None
    rich_bar = Progress(transient=True)
    task = rich_bar.add_task(op, total=total)
    rich_bar.start()
    return (lambda done: rich_bar.update(task, completed=done)), rich_bar.stop


def _is_integer(value: Any) -> bool:
    """An int or an integer type that says so (``__index__``: numpy's integers)."""
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def check_options(op: str, executor: Any, chunksize: Any, progress: Any) -> bool:
    """True when an executor map is asked for; the options alone are an error."""
    if executor is None:
        if chunksize is not None or progress is not None:
            raise TypeError(
                f"{op}: chunksize= and progress= apply to maps over an executor: pass "
                f"executor= too (a concurrent.futures.Executor or a dask Client)."
            )
        return False
    if chunksize is not None and (
        isinstance(chunksize, bool) or not _is_integer(chunksize) or chunksize < 1
    ):
        raise ValueError(
            f"{op}: chunksize= must be a positive int (leaves per task), or None for an "
            f"automatic size, got {short_repr(chunksize)}."
        )
    return True
