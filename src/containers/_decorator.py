"""Declaring containers: ``container``, ``register``, ``register_node``, ``field``, ``spec``.

This stage runs once per class: it validates the declaration (``_spec``), generates
its code (``_codegen``), registers its node kind (``_registry``) and attaches the
protocol methods. It never traverses a tree.
"""

from __future__ import annotations

import dataclasses
import enum
import keyword
import linecache
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar, overload

from typing_extensions import dataclass_transform

from containers._codegen import compile_spec
from containers._errors import ContainerDefinitionError, type_name
from containers._kind_factories import container_kind, custom_kind
from containers._registry import REGISTRY
from containers._spec import (
    TAGS_METADATA_KEY,
    ContainerSpec,
    build_spec,
    check_name,
    class_flavor,
)

__all__ = ["container", "field", "register", "register_node", "spec"]

T = TypeVar("T")
C = TypeVar("C", bound=type)


def field(
    *,
    default: Any = dataclasses.MISSING,
    default_factory: Any = dataclasses.MISSING,
    tags: Sequence[str] = (),
    init: bool = True,
    repr: bool = True,
    hash: bool | None = None,
    compare: bool = True,
    metadata: Mapping[Any, Any] | None = None,
    kw_only: Any = dataclasses.MISSING,
) -> Any:
    """A dataclass field with ``tags`` for filters (``WithTag``).

    Everything but ``tags`` means what it means for ``dataclasses.field``. On attrs
    classes put the tags in ``attrs.field(metadata={"containers.tags": (...)})``.

    Examples:
        >>> import containers as ct
        >>> @ct.container
        ... class Layer:
        ...     w: float = ct.field(default=0.0, tags=("param",))
        >>> ct.spec(Layer).tags
        mappingproxy({'w': ('param',)})

    Raises:
        ContainerDefinitionError: ``tags`` is not a list or tuple of strings, a boolean
            option is not ``True``/``False``, ``metadata`` is not a mapping,
            ``default_factory`` is not callable, or both defaults are given.
    """
    if isinstance(tags, str):
        raise ContainerDefinitionError(
            f"field(tags=...) takes a tuple of tags, got {tags!r}: write tags=({tags!r},)."
        )
    if not isinstance(tags, (list, tuple)) or not all(isinstance(t, str) for t in tags):
        raise ContainerDefinitionError(
            f"field(tags=...) takes a tuple of strings, got {tags!r}: write, e.g., "
            f"tags=('param',)."
        )
    for option, value in (("init", init), ("repr", repr), ("compare", compare)):
        _require_bool(value, option, "field()")
    if kw_only is not dataclasses.MISSING:
        _require_bool(kw_only, "kw_only", "field()")
    if hash is not None:
        _require_bool(hash, "hash", "field()", or_none=True)
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ContainerDefinitionError(
            f"field(): metadata= must be a dict or None, got {metadata!r}."
        )
    if default_factory is not dataclasses.MISSING and not callable(default_factory):
        raise ContainerDefinitionError(
            f"field(): default_factory= must be a function called with no arguments, got "
            f"{default_factory!r}. Write default=... for a value, or, e.g., "
            f"default_factory=list."
        )
    if default is not dataclasses.MISSING and default_factory is not dataclasses.MISSING:
        raise ContainerDefinitionError(
            f"field(): default= and default_factory= were both given, got {default!r} and "
            f"{default_factory!r}. Give one: default= for a value, default_factory= for a "
            f"function that makes a fresh one per instance."
        )
    meta = {**(metadata or {}), TAGS_METADATA_KEY: tuple(tags)} if tags else metadata
    return dataclasses.field(
        default=default,
        default_factory=default_factory,
        init=init,
        repr=repr,
        hash=hash,
        compare=compare,
        metadata=meta,
        kw_only=kw_only,
    )


def _require_bool(value: object, option: str, head: str, *, or_none: bool = False) -> None:
    """Refuse a stand-in (``"no"``, ``0``) for a boolean option: Python would take it
    for True or False silently."""
    if type(value) is not bool:
        allowed = "True, False or None" if or_none else "True or False"
        raise ContainerDefinitionError(f"{head}: {option}= must be {allowed}, got {value!r}.")


def _declare(
    cls: type,
    where: str,
    *,
    children: Iterable[str] | None,
    keep: Iterable[str] | None,
    name: str | None,
    version: int,
    renamed: Mapping[str, str] | None,
    removed: Iterable[str],
    migrations: Mapping[int, Callable[..., Any]] | None,
    attach: bool,
) -> None:
    the_spec = build_spec(
        cls,
        where=where,
        children=children,
        keep=keep,
        name=name,
        version=version,
        renamed=renamed,
        removed=removed,
        migrations=migrations,
    )
    gen = compile_spec(the_spec)
    kind = container_kind(
        the_spec,
        gen.flatten,
        gen.unflatten,
        gen.children,
        gen.flatten_snapshot,
        gen.unflatten_fresh,
    )
    REGISTRY.add(kind, the_spec.name, explicit_name=the_spec.explicit_name, where=where)
    # The generated source leaves linecache with the class (notebooks redefine classes).
    weakref.finalize(cls, linecache.cache.pop, gen.filename, None)
    if attach:
        for attr_name, fn in (
            ("__container_traverse__", gen.traverse),
            ("__container_reduce__", gen.reduce),
            ("__container_serialize__", gen.serialize),
            # Typed by the mypy plugin for containers.Tree (containers._tree.HasChildren).
            ("__containers_children__", _children_iterator(gen.children)),
        ):
            fn.__qualname__ = f"{cls.__qualname__}.{attr_name}"
            fn.__module__ = cls.__module__
            # A subclass inherits these methods; the owner mark lets the registry see
            # that they build instances of `cls`, not of the subclass.
            fn.__container_owner__ = cls  # type: ignore[attr-defined]
            setattr(cls, attr_name, fn)
        gen.deserialize.__func__.__qualname__ = f"{cls.__qualname__}.__container_deserialize__"
        cls.__container_deserialize__ = gen.deserialize  # type: ignore[attr-defined]


#: The methods @container attaches: a class that defines one itself is a hand-written
#: Container, whose method the generated one would silently replace.
_GENERATED = (
    "__container_traverse__",
    "__container_reduce__",
    "__container_serialize__",
    "__container_deserialize__",
)


def _refuse_enum(cls: type, where: str) -> None:
    if issubclass(cls, enum.Enum):
        raise ContainerDefinitionError(
            f"{where} on {type_name(cls)!r}: an Enum's members are its values, not "
            f"fields, so it cannot be a container. Use its members as leaves, or hold "
            f"one in a field of a container."
        )


def _as_dataclass(cls: type, frozen: bool) -> type:
    """``dataclasses.dataclass(frozen=frozen)(cls)``, its errors in our words."""
    bad = [n for n in getattr(cls, "__annotations__", {}) if keyword.iskeyword(n)]
    if bad:
        raise ContainerDefinitionError(
            f"@container on {type_name(cls)!r}: field {bad[0]!r} is a Python keyword, and "
            f"containers read and write fields by name in generated code. Rename the field."
        )
    try:
        return dataclasses.dataclass(frozen=frozen)(cls)
    except (TypeError, ValueError) as err:
        text = str(err)
        if "frozen" in text:
            hint = (
                f"A frozen class cannot inherit from a non-frozen dataclass, nor the "
                f"reverse: pass frozen={not frozen} to @container, or make the base "
                f"{'' if frozen else 'non-'}frozen too."
            )
        elif "mutable default" in text:
            field_name = text.split("for field ", 1)[-1].split(" ", 1)[0]
            hint = (
                f"Field {type_name(cls)}.{field_name} has a mutable default, which every "
                f"instance would share: write "
                f"{field_name}: ... = ct.field(default_factory=...) instead."
            )
        elif text.startswith("non-default argument '"):
            field_name = text.split("'")[1]
            hint = (
                f"Field {type_name(cls)}.{field_name} has no default but comes after a "
                f"field with one, and dataclass arguments keep the fields' order: give it "
                f"a default, move it above the fields with defaults, or make it "
                f"keyword-only with ct.field(kw_only=True)."
            )
        else:
            hint = "It could not be made a dataclass."
        raise ContainerDefinitionError(
            f"@container on {type_name(cls)!r}: {hint} ({text})"
        ) from None


def _children_iterator(children: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any], Any]:
    def __containers_children__(self: Any) -> Any:
        return iter(children(self))

    return __containers_children__


@overload
def container(cls: C, /) -> C: ...


@overload
def container(
    cls: None = None,
    /,
    *,
    children: Sequence[str] | None = None,
    keep: Sequence[str] | None = None,
    frozen: bool = True,
    name: str | None = None,
    version: int = 1,
    renamed: Mapping[str, str] | None = None,
    removed: Sequence[str] = (),
    migrations: Mapping[int, Callable[[dict[str, Any], dict[str, Any]], Any]] | None = None,
) -> Callable[[C], C]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, field))
def container(
    cls: type | None = None,
    /,
    *,
    children: Sequence[str] | None = None,
    keep: Sequence[str] | None = None,
    frozen: bool = True,
    name: str | None = None,
    version: int = 1,
    renamed: Mapping[str, str] | None = None,
    removed: Sequence[str] = (),
    migrations: Mapping[int, Callable[[dict[str, Any], dict[str, Any]], Any]] | None = None,
) -> Any:
    """Declare a class as a container: a node whose children are some of its fields.

    A plain annotated class becomes a dataclass (frozen unless ``frozen=False``); an
    existing dataclass or attrs class keeps its own settings. The class is returned
    unchanged apart from the four generated ``__container_*__`` protocol methods.

    ``children`` lists the fields that are children, in visit order (default: every
    field not in ``keep``). Without ``keep`` every other field is *kept*: copied into
    rebuilt objects and part of the structure (Functors). With ``keep``, the fields in
    neither list are *reset* to their defaults on rebuild (Nx). Rebuilding never calls
    ``__init__``, ``__post_init__`` or validators, so mapped values may have any type.

    Examples:
        >>> import containers as ct
        >>> @ct.container(children=["w", "b"], keep=["name"])
        ... class Linear:
        ...     w: float
        ...     b: float
        ...     name: str = "linear"
        ...     calls: int = 0
        >>> ct.fmap(lambda v: v * 10, Linear(1.0, 2.0, "fc", calls=3))
        Linear(w=10.0, b=20.0, name='fc', calls=0)
        >>> ct.container(children=["w", "bais"])(type("Bad", (), {"__annotations__": {"w": int, "b": int}}))
        Traceback (most recent call last):
        ...
        containers.ContainerDefinitionError: @container on 'Bad': 'bais' in children= is not a field of 'Bad'. Fields are: 'w', 'b'. Did you mean 'b'?

    Args:
        cls: The class (when used without parentheses).
        children: Child field names in visit order; ``None`` for all non-kept fields.
        keep: Kept field names; ``None`` keeps every non-child field.
        frozen: For a plain class, whether the generated dataclass is frozen.
        name: The name that identifies the class in files (default ``module.qualname``).
        version: The schema version written to files.
        renamed: ``{old_name: new_name}`` for fields renamed since older versions.
        removed: Names of fields that older files may hold and that are dropped.
        migrations: ``{v: fn}``; ``fn(children, metadata)`` upgrades data from v to v + 1.

    Returns:
        The same class (or, with options, a decorator returning it).

    Raises:
        ContainerDefinitionError: The declaration does not fit the class's fields, or an
            option has the wrong type (``frozen`` not a bool, ``name`` not a non-empty
            string).
    """

    def wrap(klass: type) -> type:
        if not isinstance(klass, type):
            raise ContainerDefinitionError(
                f"@container decorates classes, got {klass!r}. Put @container on a class "
                f"statement, or use register_node for other types."
            )
        if REGISTRY.registered(klass) is not None:
            raise ContainerDefinitionError(
                f"@container on {type_name(klass)!r}: {type_name(klass)} is already "
                f"declared. Decorate each class once."
            )
        _refuse_enum(klass, "@container")
        own = [m for m in _GENERATED if m in vars(klass)]
        if own:  # @container would replace them without a word
            raise ContainerDefinitionError(
                f"@container on {type_name(klass)!r}: {type_name(klass)} defines "
                f"{', '.join(own)} itself, and @container generates the protocol methods. "
                f"Drop @container to keep a hand-written Container, or remove the methods."
            )
        _require_bool(frozen, "frozen", f"@container on {type_name(klass)!r}")
        if class_flavor(klass) is None:
            own_repr = "__repr__" in vars(klass)
            klass = _as_dataclass(klass, frozen)
            _attach_display(klass, own_repr)
        _declare(
            klass,
            "@container",
            children=children,
            keep=keep,
            name=name,
            version=version,
            renamed=renamed,
            removed=removed,
            migrations=migrations,
            attach=True,
        )
        return klass

    return wrap if cls is None else wrap(cls)


def _attach_display(klass: type, own_repr: bool) -> None:
    """Give a class @container made a dataclass its views: a repr that summarizes large
    arrays by dtype and shape, and the IPython and rich pretty printers; what the
    class defines itself is kept."""
    from containers import _display

    if not own_repr:
        klass.__repr__ = _display.container_repr  # type: ignore[assignment]
    if "_repr_pretty_" not in vars(klass):
        klass._repr_pretty_ = _display.repr_pretty  # type: ignore[attr-defined]
    if "__rich_repr__" not in vars(klass):
        klass.__rich_repr__ = _display.rich_repr  # type: ignore[attr-defined]


def register(
    cls: C,
    /,
    *,
    children: Sequence[str] | None = None,
    keep: Sequence[str] | None = None,
    name: str | None = None,
    version: int = 1,
    renamed: Mapping[str, str] | None = None,
    removed: Sequence[str] = (),
    migrations: Mapping[int, Callable[[dict[str, Any], dict[str, Any]], Any]] | None = None,
) -> C:
    """Declare a class you do not own (dataclass, attrs class, namedtuple) as a container.

    The declaration means what it means for ``@container``; the class itself is not
    modified (no methods are attached), so it is a node for every operation here but
    ``isinstance(x, Container)`` stays false.

    Examples:
        >>> import collections, containers as ct
        >>> Point = collections.namedtuple("Point", ["x", "y", "label"])
        >>> _ = ct.register(Point, children=["x", "y"])
        >>> ct.fmap(lambda v: v + 1, Point(1, 2, "p"))
        Point(x=2, y=3, label='p')
        >>> ct.leaves(Point(1, 2, "p"))
        [1, 2]

    Args:
        cls: The class to declare.
        children: Child field names in visit order; ``None`` for all non-kept fields.
        keep: Kept field names; ``None`` keeps every non-child field.
        name: The name that identifies the class in files (default ``module.qualname``).
        version: The schema version written to files.
        renamed: ``{old_name: new_name}`` for fields renamed since older versions.
        removed: Names of fields that older files may hold and that are dropped.
        migrations: ``{v: fn}``; ``fn(children, metadata)`` upgrades data from v to v + 1.

    Returns:
        ``cls``.

    Raises:
        ContainerDefinitionError: ``cls`` has no declared fields, is already
            registered, or the declaration does not fit its fields.
    """
    if not isinstance(cls, type):
        raise ContainerDefinitionError(f"register takes a class, got {cls!r}.")
    _refuse_enum(cls, "register")
    _declare(
        cls,
        "register",
        children=children,
        keep=keep,
        name=name,
        version=version,
        renamed=renamed,
        removed=removed,
        migrations=migrations,
        attach=False,
    )
    return cls


def register_node(
    cls: C,
    flatten: Callable[[Any], tuple[Iterable[Any], Any]],
    unflatten: Callable[[Any, Sequence[Any]], Any],
    *,
    keys: Callable[[Any], Iterable[Any]] | None = None,
    name: str | None = None,
) -> C:
    """Make any other type a node, from a flatten/unflatten pair (as JAX does).

    ``flatten(x)`` returns ``(children, aux)``; ``unflatten(aux, children)`` rebuilds.
    ``aux`` is static: part of the structure, compared with ``==``. ``keys(x)``, if
    given, returns the children's keys for paths (field names become ``AttrKey``,
    other values ``DictKey``); without it children are keyed by position.

    Examples:
        >>> import containers as ct
        >>> class Interval:
        ...     def __init__(self, lo, hi):
        ...         self.lo, self.hi = lo, hi
        ...     def __repr__(self):
        ...         return f"Interval({self.lo}, {self.hi})"
        >>> _ = ct.register_node(
        ...     Interval,
        ...     lambda iv: ((iv.lo, iv.hi), None),
        ...     lambda aux, ch: Interval(*ch),
        ...     keys=lambda iv: ("lo", "hi"),
        ... )
        >>> ct.fmap(lambda v: v * 2, Interval(1, 5))
        Interval(2, 10)
        >>> [ct.keystr(p) for p, _ in ct.leaves_with_path(Interval(1, 5))]
        ['.lo', '.hi']

    Args:
        cls: The type.
        flatten: ``x -> (children, aux)``.
        unflatten: ``(aux, children) -> x``.
        keys: ``x -> keys`` of the children, in the order ``flatten`` gives them.
        name: The name that identifies the type (default ``module.qualname``).

    Returns:
        ``cls``.

    Raises:
        ContainerDefinitionError: ``cls`` is not a class, is built in, or is already
            registered; ``flatten``/``unflatten`` are not callable; ``name`` is not a
            non-empty string.
    """
    if not isinstance(cls, type):
        raise ContainerDefinitionError(f"register_node takes a class, got {cls!r}.")
    _refuse_enum(cls, "register_node")
    for what, fn in (("flatten", flatten), ("unflatten", unflatten), ("keys", keys)):
        if (fn is not None or what != "keys") and not callable(fn):
            raise ContainerDefinitionError(
                f"register_node on {type_name(cls)!r}: {what} must be a function, got "
                f"{fn!r}. Pass flatten(x) -> (children, aux) and "
                f"unflatten(aux, children) -> x."
            )
    check_name(name, "register_node", cls)
    kind = custom_kind(cls, flatten, unflatten, keys)
    qualified = f"{cls.__module__}.{type_name(cls)}"
    REGISTRY.add(kind, name or qualified, explicit_name=name is not None, where="register_node")
    return cls


def spec(cls: type | object, /) -> ContainerSpec:
    """Return the declaration of a container class (or of an instance's class).

    Examples:
        >>> import containers as ct
        >>> @ct.container(children=["w"], keep=["name"])
        ... class Cell:
        ...     w: float
        ...     name: str = "cell"
        ...     cache: object = None
        >>> s = ct.spec(Cell)
        >>> s.children, s.keep, s.reset, s.version
        (('w',), ('name',), ('cache',), 1)

    Raises:
        ContainerDefinitionError: The class was not declared with ``@container`` or
            ``register``.
    """
    klass = cls if isinstance(cls, type) else type(cls)
    kind = REGISTRY.registered(klass)
    if kind is None or kind.spec is None:
        raise ContainerDefinitionError(
            f"spec: {type_name(klass)!r} is not a declared container. Declare it with "
            f"@container or register(); register_node types have no declaration."
        )
    return kind.spec
