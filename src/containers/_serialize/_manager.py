"""CheckpointManager: numbered checkpoints in one directory, the last N kept.

This stage only names files and calls ``save``/``load``: each step is one atomic
``save`` (a file, or a sharded directory), so a step is listed only once it is
complete, and old steps are removed only after a newer one is.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import threading
from concurrent.futures import Future
from typing import Any

from containers._errors import short_repr
from containers._serialize._api import load
from containers._serialize._save import save

__all__ = ["CheckpointManager"]

_STEP = re.compile(r"step-(\d{1,19})(\.safetensors)?")


class CheckpointManager:
    """Save numbered checkpoints into a directory and keep the last ``keep`` of them.

    Each ``save(step, tree)`` writes ``step-<step>.safetensors`` (or, with
    ``max_shard_size=``, the sharded directory ``step-<step>``) atomically, through
    ``ct.save``: a step appears in ``steps()`` only once complete, so a crash at any
    point leaves the last complete step restorable. Then the oldest steps past
    ``keep`` are removed. With ``background=True``, ``save`` snapshots the arrays,
    returns a ``Future`` and writes (then prunes) on the writer thread.

    Examples:
        >>> import tempfile
        >>> import numpy as np
        >>> import containers as ct
        >>> manager = ct.CheckpointManager(tempfile.mkdtemp(), keep=2)
        >>> for step in (10, 20, 30):
        ...     manager.save(step, {"w": np.full(2, step), "step": step})
        >>> manager.steps(), manager.latest()
        ([20, 30], 30)
        >>> manager.restore()
        {'w': array([30, 30]), 'step': 30}
        >>> manager.restore(20, lazy=True)["step"]
        20

    Args:
        directory: Where the checkpoints live (created if missing).
        keep: How many of the newest steps to keep (None: all).
        max_shard_size: Save each step as a sharded directory with shards this big.
        background: Save in the background (``save`` returns a ``Future``).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        keep: int | None = None,
        max_shard_size: int | None = None,
        background: bool = False,
    ) -> None:
        if keep is not None and (type(keep) is not int or keep < 1):
            raise TypeError(
                f"CheckpointManager: keep must be a positive int or None, got "
                f"{short_repr(keep)}. keep=1 keeps only the newest checkpoint."
            )
        if max_shard_size is not None and (type(max_shard_size) is not int or max_shard_size < 1):
            raise TypeError(
                f"CheckpointManager: max_shard_size must be a positive int (bytes) or None, "
                f"got {short_repr(max_shard_size)}. E.g. max_shard_size=5 * 2**30 for 5 GiB "
                f"shards."
            )
        self.directory = os.fspath(directory)
        if os.path.lexists(self.directory) and not os.path.isdir(self.directory):
            raise FileExistsError(
                errno.EEXIST,
                "exists and is not a directory; CheckpointManager keeps its checkpoints in "
                "a directory. Give the path of a directory (it is created if missing)",
                self.directory,
            )
        self.keep = keep
        self.max_shard_size = max_shard_size
        self.background = background
        self._lock = threading.Lock()
        os.makedirs(self.directory, exist_ok=True)

    def _path(self, step: int) -> str:
        suffix = "" if self.max_shard_size is not None else ".safetensors"
        return os.path.join(self.directory, f"step-{step}{suffix}")

    def _found(self) -> dict[int, str]:
        found: dict[int, str] = {}
        for name in os.listdir(self.directory):
            m = _STEP.fullmatch(name)
            if m is not None:
                found[int(m.group(1))] = os.path.join(self.directory, name)
        return found

    def steps(self) -> list[int]:
        """The steps saved and complete, in increasing order."""
        return sorted(self._found())

    def latest(self) -> int | None:
        """The newest complete step, or None when there is none."""
        steps = self.steps()
        return steps[-1] if steps else None

    def save(self, step: int, tree: Any, /) -> Future[None] | None:
        """Save ``tree`` as ``step`` (atomically), then remove the steps past ``keep``.

        Returns:
            None, or a ``Future`` with ``background=True``.

        Raises:
            TypeError: ``step`` is not a non-negative int.
            SerializationError: the tree cannot be stored.
        """
        if type(step) is not int or step < 0:
            raise TypeError(
                f"CheckpointManager.save: step must be a non-negative int, got {short_repr(step)}."
            )
        path = self._path(step)
        if not self.background:
            save(path, tree, max_shard_size=self.max_shard_size)
            self._prune()
            return None
        future = save(path, tree, max_shard_size=self.max_shard_size, background=True)
        assert future is not None
        done: Future[None] = Future()

        def finish(f: Future[None]) -> None:
            err = f.exception()
            if err is None:
                try:
                    self._prune()
                except BaseException as prune_err:
                    done.set_exception(prune_err)
                    return
                done.set_result(None)
            else:
                done.set_exception(err)

        future.add_done_callback(finish)
        return done

    def _prune(self) -> None:
        """Remove the oldest steps past ``keep`` (only complete ones are listed)."""
        if self.keep is None:
            return
        with self._lock:
            found = self._found()
            for step in sorted(found)[: max(0, len(found) - self.keep)]:
                path = found[step]
                if os.path.isdir(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)

    def restore(self, step: int | None = None, /, **load_options: Any) -> Any:
        """Load ``step`` (default: the latest) with ``ct.load``'s options.

        Raises:
            TypeError: ``step`` is not a non-negative int or None.
            FileNotFoundError: there is no such step (or none at all).
        """
        if step is not None and (type(step) is not int or step < 0):
            raise TypeError(
                f"CheckpointManager.restore: step must be a non-negative int or None (the "
                f"latest), got {short_repr(step)}."
            )
        found = self._found()
        if step is None:
            if not found:
                raise FileNotFoundError(
                    f"CheckpointManager.restore: {self.directory} holds no checkpoint yet."
                )
            step = max(found)
        if step not in found:
            raise FileNotFoundError(
                f"CheckpointManager.restore: no step {step} in {self.directory}; the steps "
                f"saved are {sorted(found)}."
            )
        return load(found[step], **load_options)
