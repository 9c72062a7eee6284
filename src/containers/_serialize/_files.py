"""Opening files for reading: regular files only, checked before and after opening.

Split from ``_format``: a FIFO's open blocks and a device's may act, so a path is
checked before it is opened and its descriptor after.
"""

from __future__ import annotations

import errno
import io
import os
import stat

from containers._errors import FormatError

__all__ = ["open_for_reading", "open_regular"]


def _file_kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def open_for_reading(path: str) -> io.BufferedReader:
    """Open a regular file for reading; refuse anything else before reading a byte
    (``open_regular``, as a buffered file).

    Raises:
        FormatError: ``path`` is a FIFO, a device or a socket.
        IsADirectoryError: ``path`` is a directory, as ``open`` says.
        OSError: as ``open(path, "rb")`` raises it.
    """
    fd = open_regular(path)
    try:
        return open(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def open_regular(path: str, *, follow: bool = True) -> int:
    """Open a regular file for reading and return its descriptor.

    The path is checked before it is opened (a FIFO's open blocks until a writer
    comes; a device's may act), then opened without blocking and checked again on its
    descriptor, in case another file was swapped in meanwhile. ``follow=False`` refuses
    a symbolic link as the last component (a shard whose link was checked and resolved
    already).

    Raises:
        FormatError: ``path`` is a FIFO, a device or a socket, or became a link.
        IsADirectoryError: ``path`` is a directory, as ``open`` says.
        OSError: as ``open(path, "rb")`` raises it.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if follow:
        _check_regular(os.stat(path).st_mode, path)  # before open: opening a device acts
    else:
        flags |= getattr(os, "O_NOFOLLOW", 0)
        _check_regular(os.lstat(path).st_mode, path)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        if err.errno != errno.ELOOP:
            raise
        raise FormatError("the file became a symbolic link while it was opened.") from None
    try:
        _check_regular(os.fstat(fd).st_mode, path)  # what was opened, if it was swapped
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_regular(mode: int, path: str) -> None:
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    if not stat.S_ISREG(mode):
        raise FormatError(f"not a regular file ({_file_kind(mode)}): only regular files are read.")
