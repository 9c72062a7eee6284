"""Schema evolution: a file's fields fitted to today's class, every problem collected.

Migrations (``migrations=``), renames (``renamed=``), removals (``removed=``) and field
defaults upgrade an old record's fields; what does not fit is a ``Problem`` (what,
where, how to fix), grouped in one ``SchemaError`` message. Split from ``_decode``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, NamedTuple

from containers._errors import (
    SchemaError,
    SerializationError,
    VersionError,
    safe_repr,
    short_repr,
    type_name,
)
from containers._registry import NodeKind, class_by_name, kind_for_type
from containers._spec import ContainerSpec

__all__ = [
    "Default",
    "Problem",
    "check_version",
    "evolve",
    "exact",
    "exact_kind",
    "schema_message",
]


def exact(
    kind: NodeKind, version: Any
) -> tuple[tuple[NodeKind, int], list[str], list[str]] | None:
    """For the records of a declared container at today's ``version`` whose fields no
    ``renamed=`` or ``removed=`` name:
    ``((kind, number of children), children, kept)``, the field names of a record that
    ``evolve`` would give back as they are (today's version, today's names in today's
    order), so that ``_decode.build`` rebuilds it at once; else None.
    ``exact_fields = False`` sends every record through ``evolve``, its plain twin
    (tests/test_records.py holds the two to each other)."""
    spec = kind.spec
    if spec is None or version != spec.version or not exact_fields:
        return None
    names = {*spec.children, *spec.keep}
    if names & spec.renamed.keys() or names & set(spec.removed):
        return None
    return (kind, len(spec.children)), list(spec.children), list(spec.keep)


#: Whether a container whose record has today's fields is rebuilt without ``evolve``
#: (``exact``); False in the tests that compare the two.
exact_fields = True


def exact_kind(name: Any, version: Any, children: Any, kept: Any) -> NodeKind | None:
    """The kind of the class registered as ``name`` when a container record of it with
    ``version``, ``children`` and ``kept`` (field names) is one ``exact`` vouches for,
    else None (an unknown name, a register_node type, another version or other fields:
    ``_decode.build`` then reads the record and says what is wrong). The type is only
    looked up in the registry. ``containers._scan.records`` calls it once per class
    name of a file, to give a tree of such containers and builtins as a
    ``Structure``'s records (``Records.columns``)."""
    cls = class_by_name(name)
    if cls is None:
        return None
    try:
        kind = kind_for_type(cls)
    except Exception:
        return None
    fields = exact(kind, version)
    if fields is None or children != fields[1] or kept != fields[2]:
        return None
    return kind


def _shown(value: Any) -> str:
    """A value from a file in a message: its repr, cut to 200 characters."""
    return short_repr(value, 200)


def check_version(spec: ContainerSpec, version: int, where: Callable[[], str]) -> None:
    cls = type_name(spec.cls)
    if version > spec.version:
        raise VersionError(
            f"{cls} at {where()} was written with version {version}, newer than this "
            f"class's version {spec.version}. Load it with the newer code."
        )
    missing = [v for v in range(version, spec.version) if v not in spec.migrations]
    if missing:
        raise VersionError(
            f"{cls} at {where()} was written with version {version}; this class is version "
            f"{spec.version} but has no migration from version {missing[0]} to "
            f"{missing[0] + 1}. Add migrations={{{missing[0]}: fn}}."
        )


def evolve(
    spec: ContainerSpec,
    version: int,
    children: dict[str, Any],
    meta: dict[str, Any],
    where: Callable[[], str],
    problems: list[Problem],
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    cls = type_name(spec.cls)
    # the names the file holds, where a migration may have added others
    in_file = {*children, *meta} if version < spec.version else None
    for v in range(version, spec.version):
        fn = spec.migrations[v]
        try:
            result = fn(dict(children), dict(meta))
        except SerializationError:
            raise
        except Exception as err:
            raise SchemaError(
                f"the migration of {cls} from version {v} to {v + 1} raised "
                f"{type(err).__name__}: {err} (at {where()}). Fix the migration function."
            ) from err
        if (
            type(result) is not tuple
            or len(result) != 2
            or not all(isinstance(d, dict) for d in result)
        ):
            raise SchemaError(
                f"the migration of {cls} from version {v} to {v + 1} returned {safe_repr(result):.80} "
                f"(at {where()}); it must return a (children, metadata) pair of dicts."
            )
        children, meta = result
    values: dict[str, Any] = {}
    start = len(problems)
    versions = f"(file version {version}, class version {spec.version})"
    unknown: list[tuple[str, Any, bool]] = []  # name, value, is a child
    for source in (children, meta):
        for name, value in source.items():
            target = spec.renamed.get(name, name)
            if name in spec.removed or (target in spec.reset and target == name):
                continue
            if target not in spec.fields and in_file is not None and name not in in_file:
                problems.append(
                    Problem(
                        f"the migrations of {cls} from version {version} to {spec.version} "
                        f"returned an unknown field {_shown(name)}",
                        where(),
                        "a migration must return the fields of the class (or old names "
                        "listed in renamed=)",
                    )
                )
                continue
            if target not in spec.fields:
                unknown.append((name, value, source is children))
                continue
            if target in values:
                problems.append(
                    Problem(
                        f"field {cls}.{target} is in the file twice (as {_shown(name)} and under "
                        f"another name)",
                        where(),
                        "",
                    )
                )
                continue
            values[target] = value
    missing: list[str] = []
    defaulted: dict[str, Any] = {}
    for name in (*spec.children, *spec.keep):
        if name in values:
            continue
        default = _field_default(spec, name)
        if default is None:
            missing.append(name)
        else:
            values[name] = defaulted[name] = default
    for name, value, child in unknown:
        old = _renamed_hint(spec, name, value, child, missing, defaulted, len(unknown))
        problems.append(
            Problem(
                f"unknown field {_shown(name)} in {cls} {versions}",
                where(),
                "add it to removed= to drop it, or to renamed= if it is a field's old name"
                if old is None
                else f"it looks like the old name of {cls}.{old}: add renamed={{{_shown(name)}: "
                f"{old!r}}}, or add it to removed= to drop it",
            )
        )
    for name in missing:
        fix = (
            "its default is an attrs Factory(takes_self=True), which needs the object "
            "before it is built; add a migration that fills it"
            if _takes_self(spec, name)
            else "give it a default, or add a migration that fills it"
        )
        problems.append(Problem(f"missing field {cls}.{name} {versions}", where(), fix))
    if len(problems) > start:
        return None
    return {n: values[n] for n in spec.children}, {n: values[n] for n in spec.keep}


class Problem(NamedTuple):
    """One way a file does not fit a class: what, where (a path) and how to fix it.
    Problems that differ only in where are grouped in the message."""

    what: str
    where: str
    fix: str

    def __str__(self) -> str:
        return f"{self.what} at {self.where}" + (f": {self.fix}" if self.fix else "")


def _renamed_hint(
    spec: ContainerSpec,
    name: str,
    value: Any,
    child: bool,
    missing: list[str],
    defaulted: dict[str, Any],
    n_unknown: int,
) -> str | None:
    """The field an unknown one is likely the old name of, or None: the one missing
    field of its role (child or kept) when it is the one unknown field, else the one
    field filled from a default of the same dtype and shape (an array), the trap of a
    renamed child that its default hides."""
    role = spec.children if child else spec.keep
    same_role = [m for m in missing if m in role]
    if n_unknown == 1 and len(same_role) == 1:
        return same_role[0]
    alike = [f for f, d in defaulted.items() if f in role and _alike(value, d.value)]
    return alike[0] if len(alike) == 1 else None


def _alike(a: Any, b: Any) -> bool:
    """Two arrays of one dtype and shape."""
    try:
        return bool(a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape))
    except Exception:  # not arrays
        return False


#: The most kinds of problems a SchemaError's message lists (the rest are counted).
_MAX_KINDS = 20


def schema_message(problems: list[Problem]) -> str:
    """The message for ``problems``: those that differ only in their path grouped, with
    their count and the first path, the first ``_MAX_KINDS`` kinds shown."""
    groups: dict[tuple[str, str], list[Problem]] = {}
    for p in problems:
        groups.setdefault((p.what, p.fix), []).append(p)
    lines = []
    for (what, fix), group in itertools.islice(groups.items(), _MAX_KINDS):
        first = group[0].where
        head = (
            f"{what}, {len(group):,} times, e.g. at {first}"
            if len(group) > 1
            else (f"{what} at {first}")
        )
        lines.append(f"  - {head}" + (f": {fix}" if fix else ""))
    n = len(problems)
    text = (
        f"the file does not fit the declared classes ({n:,} problem{'s' if n > 1 else ''}):\n"
        + "\n".join(lines)
    )
    if len(groups) > _MAX_KINDS:
        text += (
            f"\nand {len(groups) - _MAX_KINDS} more kinds of problems ({n:,} problems in "
            f"all; the SchemaError's problems attribute lists them)."
        )
    return text


def _field_default(spec: ContainerSpec, name: str) -> Any:
    """A field's default value (a fresh one for factories), or None if it has none."""
    import dataclasses

    import attr

    cls = spec.cls
    if spec.flavor == "dataclass":
        f = {f.name: f for f in dataclasses.fields(cls)}[name]
        if f.default is not dataclasses.MISSING:
            return Default(f.default)
        if f.default_factory is not dataclasses.MISSING:
            return Default(f.default_factory())
        return None
    if spec.flavor == "attrs":
        a: Any = attr.fields_dict(cls)[name]
        if isinstance(a.default, attr.Factory):  # type: ignore[arg-type]
            return None if a.default.takes_self else Default(a.default.factory())
        return None if a.default is attr.NOTHING else Default(a.default)
    defaults = getattr(cls, "_field_defaults", {})
    return Default(defaults[name]) if name in defaults else None


def _takes_self(spec: ContainerSpec, name: str) -> bool:
    """Whether an attrs field's default is a factory taking the instance."""
    if spec.flavor != "attrs":
        return False
    import attr

    default: Any = attr.fields_dict(spec.cls)[name].default
    return isinstance(default, attr.Factory) and bool(default.takes_self)  # type: ignore[arg-type]


class Default:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value
