"""The exception hierarchy and the wording of declaration errors.

This is the first stage: every other module (and the mypy plugin, which must report
declaration errors with the runtime's exact wording) imports from here. It imports
nothing from the package and nothing outside the standard library.
"""

from __future__ import annotations

import difflib
import zlib
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "ContainerDefinitionError",
    "ContainersError",
    "FormatError",
    "IntegrityError",
    "LimitError",
    "SchemaError",
    "SerializationError",
    "StructureError",
    "StructureKeyError",
    "StructureTypeError",
    "UnknownTypeError",
    "VersionError",
    "counted",
    "did_you_mean",
    "not_callable_error",
    "safe_repr",
    "short_repr",
    "type_name",
]


class ContainersError(Exception):
    """Base class of every error raised by ``containers``."""


class ContainerDefinitionError(ContainersError, TypeError):
    """A class declaration (``@container``, ``register``, ``register_node``) is invalid."""


class StructureError(ContainersError, ValueError):
    """Trees do not have the structure an operation needs.

    ``path`` is the key path (a tuple of keys) of the first place where they differ,
    or ``None`` when the error is not about one place.
    """

    def __init__(self, message: str, path: tuple[Any, ...] | None = None) -> None:
        super().__init__(message)
        self.path = path


class StructureKeyError(StructureError, KeyError):
    """Nodes that must have the same keys do not (``treelize``'s strict mode); also a
    ``KeyError``, the error treevalue users catch."""

    def __str__(self) -> str:  # KeyError's __str__ would show the message quoted
        return str(self.args[0]) if self.args else ""


class StructureTypeError(StructureError, TypeError):
    """A leaf stands where a node is needed (``treelize`` with ``inherit=False``); also
    a ``TypeError``, the error treevalue users catch."""


class SerializationError(ContainersError, ValueError):
    """Base class of the errors raised while saving or loading trees."""


class FormatError(SerializationError):
    """The bytes are not a valid file, or its tree does not match its tensors."""


class LimitError(SerializationError):
    """The file exceeds a configured limit (header size, node count, depth)."""


class IntegrityError(SerializationError):
    """A checksum does not match: the file was corrupted or altered."""


class UnknownTypeError(SerializationError):
    """The file names a type that is not registered."""


class VersionError(SerializationError):
    """The file's version of a class cannot be migrated to the class's version."""


class SchemaError(SerializationError):
    """The file's fields do not fit the class and no declared evolution explains it.

    ``problems`` lists every problem found, one line each (the message groups them and
    shows at most 20 kinds)."""

    problems: list[str] = []  # noqa: RUF012 - set per instance when raised


def type_name(cls: type) -> str:
    """A class's name for messages: its qualname without ``<locals>`` scopes."""
    return cls.__qualname__.rsplit("<locals>.", 1)[-1]


def counted(n: int, one: str, many: str | None = None) -> str:
    """``n`` with the noun in the right number: ``1 leaf``, ``2 leaves``, ``0 keys``."""
    return f"{n} {one if n == 1 else many or one + 's'}"


def safe_repr(value: object) -> str:
    """``repr(value)``, with ints too long for Python to print in decimal shown as
    ``int(16610 bits, crc32 c6d23d8d)``, alone or inside tuples, lists, dicts, sets and
    frozensets.

    Python refuses to print an int of more than ``sys.get_int_max_str_digits()``
    digits (ValueError), yet such ints are valid values, dict keys and file contents:
    every display of values (keystr, pformat, inspect, messages) goes through here.
    The CRC32 of the int's bytes tells such ints apart (``containers diff`` compares
    values by their display, and tensor names are key paths).

    Examples:
        >>> from containers._errors import safe_repr
        >>> safe_repr((10**5000, -(10**5000), "a"))
        "(int(16610 bits, crc32 c6d23d8d), -int(16610 bits, crc32 c6d23d8d), 'a')"
    """
    try:
        return repr(value)
    except ValueError:
        pass  # an int too long to print, somewhere inside
    except RecursionError:
        pass  # nested deeper than repr recurses
    return _bounded_repr(value, 0, set())


#: Levels ``safe_repr``'s own rendering shows before it writes ``...``.
_REPR_DEPTH = 50


def _bounded_repr(value: object, depth: int, open_ids: set[int]) -> str:
    """``safe_repr``'s rendering: ints too long for ``repr`` by their size and CRC32,
    tuples, lists, dicts, sets and frozensets item by item down to ``_REPR_DEPTH``
    levels (``...`` below), a container met again inside itself as ``repr`` shows it
    (``[...]``, ``{...}``), anything else by ``repr`` (or, nested too deep for it, by
    its type)."""
    if type(value) is int:
        try:
            return repr(value)
        except ValueError:
            size = abs(value)
            digest = zlib.crc32(size.to_bytes((size.bit_length() + 7) // 8, "little"))
            return f"{'-' if value < 0 else ''}int({size.bit_length()} bits, crc32 {digest:08x})"
    t = type(value)
    if t not in (tuple, list, dict, set, frozenset):
        try:
            return repr(value)  # a ValueError not about an int propagates
        except RecursionError:  # a deque, a user's class: nested deeper than repr goes
            return f"<{type_name(t)} nested too deep to show>"
    if not value:
        return repr(value)
    if depth >= _REPR_DEPTH:
        return "..."
    if id(value) in open_ids:
        return "[...]" if t is list else "{...}" if t is dict else "..."
    open_ids.add(id(value))
    try:

        def inner(v: object) -> str:
            return _bounded_repr(v, depth + 1, open_ids)

        if t is dict:
            pairs = value.items()  # type: ignore[attr-defined]
            return f"{{{', '.join(f'{inner(k)}: {inner(v)}' for k, v in pairs)}}}"
        items = ", ".join(map(inner, value))  # type: ignore[call-overload]
        if t is tuple:
            return f"({items},)" if len(value) == 1 else f"({items})"  # type: ignore[arg-type]
        if t is list:
            return f"[{items}]"
        if t is set:
            return f"{{{items}}}"
        return f"frozenset({{{items}}})"
    finally:
        open_ids.discard(id(value))


def short_repr(value: object, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters for messages."""
    text = safe_repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def not_callable_error(value: object, op: str, arg: str, usage: str) -> TypeError:
    """The error for ``op``'s argument ``arg`` that is not callable; ``usage`` (where
    ``{op}`` stands for ``op``) says in what order the arguments go, which a swap gets
    wrong.

    Operations check ``callable`` once per call, at their entry point, and build this
    only when it fails: deep in a traversal the error would not name them, and an empty
    tree would take a non-function silently.
    """
    return TypeError(
        f"{op}: {arg} must be a function, got {type(value).__qualname__} "
        f"{short_repr(value)}. {usage.format(op=op)}."
    )


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """Return `` Did you mean 'x'?`` for the closest candidate, or ``""``."""
    pool = list(candidates)
    close = difflib.get_close_matches(name, pool, n=1, cutoff=0.6)
    if not close:
        # Short field names ('b' for 'bais') score low on similarity alone; a shared
        # first letter with a fair score is still the likely intent.
        same_start = [c for c in pool if c[:1] == name[:1]]
        close = difflib.get_close_matches(name, same_start, n=1, cutoff=0.3)
    return f" Did you mean {close[0]!r}?" if close else ""


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(repr(n) for n in names) if names else "(none)"


def unknown_field_message(
    where: str, cls_name: str, name: str, option: str, fields: Sequence[str]
) -> str:
    """Say that ``name`` in ``option=`` is not a field of the class."""
    return (
        f"{where} on {cls_name!r}: {name!r} in {option}= is not a field of {cls_name!r}. "
        f"Fields are: {_quoted(fields)}.{did_you_mean(name, fields)}"
    )


def listed_twice_message(where: str, cls_name: str, name: str, option: str) -> str:
    """Say that ``name`` appears twice in one list."""
    return f"{where} on {cls_name!r}: {name!r} is listed twice in {option}=. List each field once."


def in_both_message(where: str, cls_name: str, name: str) -> str:
    """Say that ``name`` is both a child and kept."""
    return (
        f"{where} on {cls_name!r}: {name!r} is in both children= and keep=. "
        f"A field is either a child or kept: remove it from one of the lists."
    )


def reset_without_default_message(where: str, cls_name: str, name: str) -> str:
    """Say that a reset field has no default to be reset to."""
    return (
        f"{where} on {cls_name!r}: field {cls_name}.{name} is in neither children= nor "
        f"keep=, so rebuilt objects reset it to its default, but it has no default. "
        f"Give it a default, or add it to keep=."
    )
