"""Measurement: timeit-style loops, interleaved rounds, and the result checks before them.

Nothing here knows a library or a workload: it times and compares zero-argument calls.
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
import os
import random
import select
import signal
import time
from collections.abc import Callable
from typing import Any

import numpy as np

Op = Callable[[], object]

# Fields compared for the W3 classes, whichever library declared them (matched by name).
CLASS_FIELDS = {"Linear": ("w", "b"), "MLP": ("layers", "name")}


@dataclasses.dataclass
class Timing:
    number: int  # calls per sample
    samples_ns: list[float]  # ns per call, one per round


def ns_per_call(op: Op, number: int) -> float:
    """Mean ns per call over `number` back-to-back calls, gc disabled (as in timeit)."""
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter_ns()
        for _ in itertools.repeat(None, number):
            op()
        stop = time.perf_counter_ns()
    finally:
        if gc_was_enabled:
            gc.enable()
    return (stop - start) / number


def calibrate(op: Op, min_time_ns: float) -> int:
    """The smallest count in 1, 2, 5, 10, 20, 50, ... whose loop lasts min_time (autorange)."""
    base = 1
    while True:
        for number in (base, 2 * base, 5 * base):
            if ns_per_call(op, number) * number >= min_time_ns:
                return number
        base *= 10


def interleave(
    ops: dict[str, Op], repeats: int, min_time_ns: float, rng: random.Random
) -> dict[str, Timing]:
    """Time every op `repeats` times, in a new random order each round."""
    timings = {name: Timing(calibrate(op, min_time_ns), []) for name, op in ops.items()}
    for _ in range(repeats):
        order = list(ops)
        rng.shuffle(order)
        for name in order:
            timings[name].samples_ns.append(ns_per_call(ops[name], timings[name].number))
    return timings


# --- equality check ----------------------------------------------------------------------

Path = tuple[Any, str] | None  # (parent path, rendered key): linked, so depth costs O(1)


def _render(path: Path) -> str:
    keys: list[str] = []
    while path is not None:
        path, key = path
        keys.append(key)
    if len(keys) > 12:
        return f"root{''.join(keys[:0:-1][:6])}...{keys[0]} (depth {len(keys)})"
    return "root" + "".join(keys[::-1])


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"array{list(value.shape)} {value.dtype}"
    text = repr(value) if isinstance(value, (int, float, str, type(None))) else ""
    return f"{type(value).__name__} {text}".strip()


def first_difference(got: Any, want: Any) -> str | None:
    """Where `got` differs from `want` (types, keys, lengths, values), or None.

    Iterative, so a list nested 100,000 deep compares without RecursionError. Lists and
    tuples differ; dict key order matters; the W3 classes compare by field, whichever
    library declared them.
    """
    stack: list[tuple[Path, Any, Any]] = [(None, got, want)]
    while stack:
        path, a, b = stack.pop()
        if a is b:
            continue
        if type(a).__name__ != type(b).__name__:
            return f"{_render(path)}: got {_describe(a)}, want {_describe(b)}"
        if isinstance(b, np.ndarray):
            if a.shape != b.shape or a.dtype != b.dtype or not np.array_equal(a, b):
                return f"{_render(path)}: arrays differ ({_describe(a)} vs {_describe(b)})"
        elif isinstance(b, (list, tuple)):
            if len(a) != len(b):
                return f"{_render(path)}: length {len(a)}, want {len(b)}"
            stack.extend(((path, f"[{i}]"), a[i], b[i]) for i in reversed(range(len(b))))
        elif isinstance(b, dict):
            if list(a) != list(b):
                return f"{_render(path)}: keys {list(a)[:5]}..., want {list(b)[:5]}..."
            stack.extend(((path, f"[{k!r}]"), a[k], b[k]) for k in reversed(b))
        elif type(b).__name__ in CLASS_FIELDS:
            fields = CLASS_FIELDS[type(b).__name__]
            stack.extend(((path, f".{f}"), getattr(a, f), getattr(b, f)) for f in fields[::-1])
        elif a != b:
            return f"{_render(path)}: got {_describe(a)}, want {_describe(b)}"
    return None


def describe_exception(exc: BaseException) -> str:
    """`Type: message` of the exception, or of the one it wraps (jax wraps RecursionError)."""
    inner = exc.__cause__ or exc.__context__
    if inner is None:
        return f"{type(exc).__name__}: {str(exc)[:120]}"
    return f"{type(inner).__name__} (raised as {type(exc).__name__}): {str(inner)[:120]}"


def check(task: Callable[[], str | None]) -> str:
    """'ok', 'differs: where', or 'fails: exception' for one library's result."""
    try:
        difference = task()
    except Exception as exc:
        return f"fails: {describe_exception(exc)}"
    return "ok" if difference is None else f"differs: {difference}"


def limit_memory(extra_bytes: int) -> None:
    """Cap this process's address space at its current size plus `extra_bytes`."""
    try:
        import resource

        with open("/proc/self/statm") as statm:
            current = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (current + extra_bytes, current + extra_bytes))
    except (ImportError, OSError, ValueError):
        pass  # not Linux: run uncapped


def check_isolated(
    task: Callable[[], str | None], timeout_s: float = 300.0, memory_bytes: int = 4 << 30
) -> str:
    """`check(task)` in a forked child, so a crash (segfault, hang) is reported, not suffered.

    The child inherits the expected result and the inputs; it sends back only the status.
    Its memory is capped (a runaway shows as MemoryError, not as the OOM killer picking
    some other process on the machine).
    """
    if not hasattr(os, "fork"):
        return check(task)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns
        try:
            os.close(read_fd)
            limit_memory(memory_bytes)
            os.write(write_fd, check(task).encode()[:4000])  # below PIPE_BUF: one write
        finally:
            os._exit(0)
    os.close(write_fd)
    try:
        ready, _, _ = select.select([read_fd], [], [], timeout_s)
        message = os.read(read_fd, 4096).decode(errors="replace") if ready else ""
    finally:
        os.close(read_fd)
    if not ready:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if not ready:
        return f"fails: timeout after {timeout_s:.0f} s"
    if os.WIFSIGNALED(status):
        return f"fails: crashed ({signal.Signals(os.WTERMSIG(status)).name})"
    return message or "fails: the child process exited without a result"
