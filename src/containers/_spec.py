"""ContainerSpec: the validated declaration of one class.

This stage reads a class's fields (dataclass, attrs or namedtuple) and checks a
``children=``/``keep=`` declaration against them, once, at decoration time. It builds
no code and registers nothing: later stages trust the spec it returns.
"""

from __future__ import annotations

import dataclasses
import keyword
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

import attr

from containers._errors import (
    ContainerDefinitionError,
    in_both_message,
    listed_twice_message,
    reset_without_default_message,
    short_repr,
    type_name,
    unknown_field_message,
)
from containers._paths import AttrKey

__all__ = [
    "TAGS_METADATA_KEY",
    "ContainerSpec",
    "Default",
    "build_spec",
    "check_name",
    "class_flavor",
]

#: Where ``containers.field(tags=...)`` stores tags in a field's metadata (dataclass
#: ``metadata=`` or attrs ``metadata=``).
TAGS_METADATA_KEY = "containers.tags"

Flavor = Literal["dataclass", "attrs", "namedtuple"]


@dataclasses.dataclass(frozen=True, slots=True)
class Default:
    """How a reset field gets its value: a shared value, a factory, or an attrs factory
    that takes the new instance (``takes_self=True``)."""

    how: Literal["value", "factory", "factory_self"]
    value: Any


@dataclasses.dataclass(frozen=True, slots=True)
class ContainerSpec:
    """The declaration of one container class, validated.

    ``children``, ``keep`` and ``reset`` partition ``fields`` (declaration order);
    children are in visit order. ``slots`` names the fields stored in slots (set
    through their descriptors when rebuilding); the others live in ``__dict__``.
    """

    cls: type
    name: str
    explicit_name: bool
    version: int
    flavor: Flavor
    fields: tuple[str, ...]
    children: tuple[str, ...]
    keep: tuple[str, ...]
    reset: tuple[str, ...]
    frozen: bool
    slots: frozenset[str]
    defaults: Mapping[str, Default]
    tags: Mapping[str, tuple[str, ...]]
    renamed: Mapping[str, str]
    removed: tuple[str, ...]
    migrations: Mapping[int, Callable[..., Any]]

    @property
    def child_keys(self) -> tuple[AttrKey, ...]:
        """The children's keys, in visit order, carrying their fields' tags."""
        return tuple(AttrKey(n, self.tags.get(n, ())) for n in self.children)

    def __repr__(self) -> str:
        return (
            f"ContainerSpec({type_name(self.cls)}, name={self.name!r}, "
            f"version={self.version}, children={self.children!r}, keep={self.keep!r}, "
            f"reset={self.reset!r})"
        )


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    name: str
    alias: str | None
    default: Default | None
    tags: tuple[str, ...]
    slot: bool


def class_flavor(cls: type) -> Flavor | None:
    """Say how ``cls`` declares its fields, or ``None`` if it does not."""
    if "__attrs_attrs__" in cls.__dict__:
        return "attrs"
    if "__dataclass_fields__" in cls.__dict__:
        return "dataclass"
    if issubclass(cls, tuple) and isinstance(cls.__dict__.get("_fields"), tuple):
        return "namedtuple"
    return None


def _tags(metadata: Mapping[Any, Any] | None, where: str, cls: type, name: str) -> tuple[str, ...]:
    tags = (metadata or {}).get(TAGS_METADATA_KEY, ())
    if isinstance(tags, str) or not all(isinstance(t, str) for t in tags):
        raise ContainerDefinitionError(
            f"{where} on {type_name(cls)!r}: the tags of field {type_name(cls)}.{name} "
            f"must be a tuple of strings, got {tags!r}."
        )
    return tuple(tags)


def _is_slot(cls: type, name: str) -> bool:
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return isinstance(klass.__dict__[name], types.MemberDescriptorType)
    return False


def _fields(cls: type, flavor: Flavor, where: str) -> list[_Field]:
    out = []
    if flavor == "dataclass":
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                default: Default | None = Default("value", f.default)
            elif f.default_factory is not dataclasses.MISSING:
                default = Default("factory", f.default_factory)
            else:
                default = None
            out.append(
                _Field(
                    f.name,
                    None,
                    default,
                    _tags(f.metadata, where, cls, f.name),
                    _is_slot(cls, f.name),
                )
            )
    elif flavor == "attrs":
        for a in attr.fields(cls):
            if isinstance(a.default, attr.Factory):  # type: ignore[arg-type]
                factory = a.default.factory
                how: Literal["factory", "factory_self"] = (
                    "factory_self" if a.default.takes_self else "factory"
                )
                default = Default(how, factory)
            elif a.default is not attr.NOTHING:
                default = Default("value", a.default)
            else:
                default = None
            alias = getattr(a, "alias", None)
            out.append(
                _Field(
                    a.name,
                    alias,
                    default,
                    _tags(a.metadata, where, cls, a.name),
                    _is_slot(cls, a.name),
                )
            )
    else:
        defaults = getattr(cls, "_field_defaults", {})
        for name in cls._fields:  # type: ignore[attr-defined]
            default = Default("value", defaults[name]) if name in defaults else None
            out.append(_Field(name, None, default, (), False))
    return out


def _is_frozen(cls: type, flavor: Flavor) -> bool:
    if flavor == "dataclass":
        return bool(cls.__dataclass_params__.frozen)  # type: ignore[attr-defined]
    if flavor == "attrs":
        return cls.__setattr__ is attr._make._frozen_setattrs  # type: ignore[attr-defined]
    return True


def check_name(name: str | None, where: str, cls: type) -> None:
    """Refuse a ``name=`` that cannot identify the class in files: not a string, or empty."""
    if name is not None and (type(name) is not str or not name):
        raise ContainerDefinitionError(
            f"{where} on {type_name(cls)!r}: name= must be a non-empty string, got "
            f"{short_repr(name)}. The name identifies the class in saved files: pass a string "
            f"such as {f'{cls.__module__}.{type_name(cls)}'!r}, or leave name= out to use "
            f"module.qualname."
        )


def _names(value: Iterable[str] | None, option: str, where: str, cls: type) -> list[str] | None:
    """The names given to ``option=``, read once: a list or tuple of strings."""
    if value is None:
        return None
    head = f"{where} on {type_name(cls)!r}: {option}= must be a list of field names"
    if isinstance(value, str):
        raise ContainerDefinitionError(
            f"{head}, got {value!r}. Write {option}=[{value!r}] for a single field."
        )
    if not isinstance(value, (list, tuple)):
        # An iterator would be used up by validation; a set has no order.
        raise ContainerDefinitionError(
            f"{head}, got {type(value).__name__} {short_repr(value)}. Pass a list or tuple "
            f"(for an iterator or a set: {option}=list(...) or sorted(...))."
        )
    if not all(isinstance(v, str) for v in value):
        raise ContainerDefinitionError(f"{head} (strings), got {value!r}.")
    return list(value)


def _resolve(
    names: list[str], option: str, where: str, cls: type, by_name: Mapping[str, str]
) -> tuple[str, ...]:
    seen: set[str] = set()
    out = []
    for name in names:
        if name not in by_name:
            fields = list(dict.fromkeys(by_name.values()))
            raise ContainerDefinitionError(
                unknown_field_message(where, type_name(cls), name, option, fields)
            )
        field_name = by_name[name]
        if field_name in seen:
            raise ContainerDefinitionError(
                listed_twice_message(where, type_name(cls), field_name, option)
            )
        seen.add(field_name)
        out.append(field_name)
    return tuple(out)


def build_spec(
    cls: type,
    *,
    where: str,
    children: Iterable[str] | None,
    keep: Iterable[str] | None,
    name: str | None,
    version: int,
    renamed: Mapping[str, str] | None,
    removed: Iterable[str] | None,
    migrations: Mapping[int, Callable[..., Any]] | None,
) -> ContainerSpec:
    """Validate a declaration against ``cls``'s fields and return its spec.

    ``where`` (``"@container"`` or ``"register"``) starts every error message.
    ``children=None`` means every field that is not kept. ``keep=None`` keeps every
    non-child field; a given ``keep`` resets the remaining fields to their defaults.

    Raises:
        ContainerDefinitionError: a name that is not a field (with a did-you-mean hint),
            a name listed twice or in both lists, a reset field without a default, or
            malformed options.
    """
    flavor = class_flavor(cls)
    if flavor is None:
        raise ContainerDefinitionError(
            f"{where} on {type_name(cls)!r}: it is not a dataclass, attrs class or "
            f"namedtuple, so its fields are unknown. Use @container on the class "
            f"definition, or register_node(cls, flatten, unflatten) for other types."
        )
    fields = _fields(cls, flavor, where)
    field_names = tuple(f.name for f in fields)
    for f in fields:
        if not f.name.isidentifier() or keyword.iskeyword(f.name):
            raise ContainerDefinitionError(
                f"{where} on {type_name(cls)!r}: field {f.name!r} is not a valid Python "
                f"identifier, and containers read and write fields by name in generated "
                f"code. Rename the field."
            )
    by_name = {f.name: f.name for f in fields}
    by_name.update({f.alias: f.name for f in fields if f.alias and f.alias not in by_name})

    child_list = _names(children, "children", where, cls)
    keep_list = _names(keep, "keep", where, cls)
    kept = _resolve(keep_list, "keep", where, cls, by_name) if keep_list is not None else None
    if child_list is None:
        kids = tuple(n for n in field_names if kept is None or n not in kept)
    else:
        kids = _resolve(child_list, "children", where, cls, by_name)
    if kept is None:
        kept = tuple(n for n in field_names if n not in kids)
        reset: tuple[str, ...] = ()
    else:
        for n in kept:
            if n in kids:
                raise ContainerDefinitionError(in_both_message(where, type_name(cls), n))
        reset = tuple(n for n in field_names if n not in kids and n not in kept)
    info = {f.name: f for f in fields}
    defaults = {}
    for n in reset:
        default = info[n].default
        if default is None:
            raise ContainerDefinitionError(reset_without_default_message(where, type_name(cls), n))
        defaults[n] = default

    check_name(name, where, cls)
    removed_names = _names(() if removed is None else removed, "removed", where, cls) or []
    _check_evolution(cls, where, version, renamed, removed_names, migrations, field_names)
    return ContainerSpec(
        cls=cls,
        name=name if name is not None else f"{cls.__module__}.{cls.__qualname__}",
        explicit_name=name is not None,
        version=version,
        flavor=flavor,
        fields=field_names,
        children=kids,
        keep=kept,
        reset=reset,
        frozen=_is_frozen(cls, flavor),
        slots=frozenset(f.name for f in fields if f.slot),
        defaults=types.MappingProxyType(defaults),
        tags=types.MappingProxyType({f.name: f.tags for f in fields if f.tags}),
        renamed=types.MappingProxyType(dict(renamed or {})),
        removed=tuple(removed_names),
        migrations=types.MappingProxyType(dict(migrations or {})),
    )


def _check_evolution(
    cls: type,
    where: str,
    version: int,
    renamed: Mapping[str, str] | None,
    removed: Iterable[str],
    migrations: Mapping[int, Callable[..., Any]] | None,
    fields: tuple[str, ...],
) -> None:
    head = f"{where} on {type_name(cls)!r}:"
    if type(version) is not int or version < 1:
        raise ContainerDefinitionError(f"{head} version= must be an int >= 1, got {version!r}.")
    for option, value in (("renamed", renamed), ("migrations", migrations)):
        if value is not None and not isinstance(value, Mapping):
            raise ContainerDefinitionError(
                f"{head} {option}= must be a dict "
                f"({'{old_name: new_name}' if option == 'renamed' else '{version: function}'}), "
                f"got {type(value).__name__} {short_repr(value)}."
            )
    for old, new in (renamed or {}).items():
        if type(old) is not str or type(new) is not str:
            raise ContainerDefinitionError(
                f"{head} renamed= maps old field names to new ones (strings), got "
                f"{old!r}: {new!r}."
            )
        if new not in fields:
            raise ContainerDefinitionError(
                unknown_field_message(where, type_name(cls), new, "renamed", list(fields))
            )
        if old in fields:
            raise ContainerDefinitionError(
                f"{head} renamed= maps {old!r} to {new!r}, but {old!r} is still a field. "
                f"renamed= lists names that files may use for fields that no longer exist."
            )
    for gone in removed:
        if gone in fields:
            raise ContainerDefinitionError(
                f"{head} {gone!r} is in removed= but is still a field. removed= lists "
                f"fields that old files may hold and that are dropped on load."
            )
    for v, fn in (migrations or {}).items():
        if type(v) is not int or not 1 <= v < version or not callable(fn):
            raise ContainerDefinitionError(
                f"{head} migrations= maps a version v (1 <= v < version={version}) to a "
                f"function upgrading data from v to v + 1; got {v!r}: {fn!r}."
            )
