"""Declaring containers: `container`, `register`, `register_node`, `field` and `spec`
(SPEC.md section 2)."""

from __future__ import annotations

import collections
import dataclasses
import inspect
import linecache
import re
import traceback
from typing import Any

import attrs
import numpy as np
import pytest

import containers as ct
from containers._registry import REGISTRY, class_by_name


def exact(message: str) -> str:
    """A `match=` pattern for exactly this message."""
    return f"^{re.escape(message)}$"


def raw_class(name: str = "L", **annotations: Any) -> type:
    """An undecorated class with the given annotated fields (none of them defaulted)."""
    return type(name, (), {"__annotations__": annotations or {"w": int, "b": int, "name": str}})


# --- plain classes, dataclasses, attrs ---------------------------------------------------


@ct.container
class Point:
    x: Any
    y: Any = 0


def test_plain_class_becomes_frozen_dataclass():
    """@container turns a plain annotated class into a frozen dataclass."""
    p = Point(1)
    assert dataclasses.is_dataclass(Point)
    assert p == Point(1, 0)
    assert repr(p) == "Point(x=1, y=0)"
    with pytest.raises(dataclasses.FrozenInstanceError, match=exact("cannot assign to field 'x'")):
        p.x = 2  # type: ignore[misc]


def test_container_returns_the_same_class():
    """The decorator returns the class it was given, not a wrapper."""

    @dataclasses.dataclass
    class Owned:
        a: int

    assert ct.container(Owned) is Owned


def test_frozen_false_gives_a_mutable_dataclass():
    """frozen=False makes the generated dataclass mutable."""

    @ct.container(frozen=False)
    class Mutable:
        a: int

    m = Mutable(1)
    m.a = 2
    assert m.a == 2
    assert ct.fmap(lambda v: v * 10, m) == Mutable(20)


def test_existing_dataclass_keeps_its_own_settings():
    """An existing non-frozen dataclass stays mutable and keeps its own __init__."""

    @ct.container
    @dataclasses.dataclass
    class Settings:
        a: int
        b: list = dataclasses.field(default_factory=list)

    s = Settings(1)
    s.a = 5
    assert s == Settings(5, [])
    assert ct.leaves(s) == [5]


def test_decorated_class_gets_the_four_protocol_methods():
    """@container attaches __container_traverse__/reduce/serialize/deserialize."""
    for name in (
        "__container_traverse__",
        "__container_reduce__",
        "__container_serialize__",
        "__container_deserialize__",
    ):
        assert name in Point.__dict__


def test_children_default_to_every_field_in_declaration_order():
    """children=None makes every field a child, in declaration order."""

    @ct.container
    class ABC:
        c: int
        a: int
        b: int

    s = ct.spec(ABC)
    assert (s.children, s.keep, s.reset) == (("c", "a", "b"), (), ())
    assert ct.leaves(ABC(1, 2, 3)) == [1, 2, 3]


def test_children_are_visited_in_the_listed_order():
    """children=[...] sets the visit order, whatever the declaration order."""

    @ct.container(children=["b", "a"])
    class BA:
        a: int
        b: int

    assert ct.spec(BA).children == ("b", "a")
    assert ct.leaves(BA(1, 2)) == [2, 1]
    assert ct.unflatten(ct.structure(BA(1, 2)), ["B", "A"]) == BA("A", "B")


def test_non_children_are_kept_when_keep_is_not_given():
    """Without keep=, every non-child field is kept: copied into rebuilt objects."""

    @ct.container(children=["w"])
    class Layer:
        w: Any
        name: str
        calls: int = 0

    s = ct.spec(Layer)
    assert (s.children, s.keep, s.reset) == (("w",), ("name", "calls"), ())
    assert ct.fmap(lambda v: v + 1, Layer(1, "fc", 7)) == Layer(2, "fc", 7)


def test_fields_in_neither_list_are_reset_to_their_default():
    """With keep= given, the remaining fields get their default when rebuilt (Nx)."""

    @ct.container(children=["w", "b"], keep=["name"])
    class Linear:
        w: Any
        b: Any
        name: str = "linear"
        calls: int = 0

    s = ct.spec(Linear)
    assert (s.children, s.keep, s.reset) == (("w", "b"), ("name",), ("calls",))
    assert ct.fmap(lambda v: v * 10, Linear(1, 2, "fc", calls=3)) == Linear(10, 20, "fc", 0)


def test_reset_default_factory_runs_for_every_rebuild():
    """A reset field with a default_factory gets a fresh value per rebuilt object."""

    @ct.container(children=["w"], keep=[])
    class Cached:
        w: Any
        memo: list = dataclasses.field(default_factory=list)

    original = Cached(1, [1, 2])
    a = ct.fmap(lambda v: v, original)
    b = ct.fmap(lambda v: v, original)
    assert a.memo == [] and b.memo == []
    assert a.memo is not b.memo
    assert original.memo == [1, 2]


def test_kept_field_is_the_same_object_after_rebuild():
    """A kept field is copied by reference, not re-created."""

    @ct.container(children=["w"])
    class WithMeta:
        w: Any
        meta: dict = dataclasses.field(default_factory=dict)

    meta = {"k": 1}
    out = ct.fmap(lambda v: v + 1, WithMeta(1, meta))
    assert out.meta is meta


def test_attrs_class_with_alias():
    """An attrs class is declared with its attribute names or its init aliases."""

    @ct.container(children=["x"], keep=[])
    @attrs.define
    class Private:
        _x: Any
        y: int = 3

    s = ct.spec(Private)
    assert (s.children, s.keep, s.reset) == (("_x",), (), ("y",))
    out = ct.fmap(lambda v: v + 10, Private(x=1, y=9))
    assert (out._x, out.y) == (11, 3)


def test_attrs_factory_takes_self_runs_on_the_rebuilt_object():
    """A reset attrs field with Factory(takes_self=True) is computed from the new object."""

    @ct.container(children=["x"], keep=[])
    @attrs.frozen
    class Derived:
        x: Any
        double: Any = attrs.field(default=attrs.Factory(lambda self: self.x * 2, takes_self=True))

    out = ct.fmap(lambda v: v + 1, Derived(1, double=100))
    assert (out.x, out.double) == (2, 4)


def test_attrs_plain_factory_reset():
    """A reset attrs field with a plain Factory gets a fresh value per rebuild."""

    @ct.container(children=["x"], keep=[])
    @attrs.define
    class Buf:
        x: Any
        buf: list = attrs.field(factory=list)

    a = ct.fmap(lambda v: v, Buf(1, [5]))
    b = ct.fmap(lambda v: v, Buf(1, [5]))
    assert a.buf == [] and a.buf is not b.buf


def test_attrs_init_false_field_is_kept_and_reset():
    """attrs fields with init=False are fields like any other: kept or reset."""

    @ct.container(children=["x"], keep=["seen"])
    @attrs.define
    class Counter:
        x: Any
        seen: int = attrs.field(init=False, default=0)
        hits: int = attrs.field(init=False, default=0)

    c = Counter(1)
    c.seen, c.hits = 5, 6
    out = ct.fmap(lambda v: v * 2, c)
    assert (out.x, out.seen, out.hits) == (2, 5, 0)


def test_attrs_frozen_slots_class_is_rebuilt_through_its_slots():
    """A frozen slotted attrs class is rebuilt (it has no __dict__) and stays frozen."""

    @ct.container(children=["x"])
    @attrs.frozen
    class Slotted:
        x: Any
        name: str = "s"

    out = ct.fmap(lambda v: v + 1, Slotted(1, "n"))
    assert out == Slotted(2, "n")
    assert not hasattr(out, "__dict__")
    with pytest.raises(attrs.exceptions.FrozenInstanceError, match=exact("can't set attribute")):
        out.x = 3  # type: ignore[misc]


def test_dataclass_with_slots_is_rebuilt():
    """A frozen dataclass with slots=True is rebuilt through its slot descriptors."""

    @ct.container(children=["x"], keep=[])
    @dataclasses.dataclass(frozen=True, slots=True)
    class SlotDC:
        x: Any
        n: int = 4

    out = ct.fmap(lambda v: v * 3, SlotDC(2, 9))
    assert (out.x, out.n) == (6, 4)
    assert not hasattr(out, "__dict__")


def test_a_field_named_like_a_data_descriptor_is_written_to_the_instance_dict():
    """A class whose field name is also a data descriptor on the class (set after the
    declaration read its fields) is rebuilt by writing the instance's dict, as before
    the descriptor existed, in both engines: object.__setattr__ would call the
    descriptor instead. Other classes are built by one call where the C accelerator
    is built (one stored as object.__setattr__ stores)."""
    from containers._codegen import setattr_stores
    from containers._engine._loops import SPEEDUPS

    @dataclasses.dataclass(frozen=True)
    class Described:
        a: Any

    # a property without a setter: object.__setattr__ would raise
    Described.a = property(lambda self: self.__dict__["a"])  # type: ignore[assignment]
    ct.container(Described)

    @ct.container
    @dataclasses.dataclass(frozen=True)
    class Plain:
        a: Any

    assert not setattr_stores(ct.spec(Described))
    assert setattr_stores(ct.spec(Plain))
    for cls in (Described, Plain):
        built = object.__new__(cls)
        built.__dict__["a"] = 1
        out = ct.fmap(lambda v: v + 1, built)
        assert type(out) is cls and out.__dict__ == {"a": 2}
        assert ct.unflatten(*reversed(ct.flatten(built))).__dict__ == {"a": 1}
    source = "".join(linecache.getlines(Plain.__container_traverse__.__code__.co_filename))
    assert ("_ct_new_instance(" in source) == (SPEEDUPS is not None)
    source = "".join(linecache.getlines(Described.__container_traverse__.__code__.co_filename))
    assert "_ct_new_instance(" not in source


def test_attrs_mutable_class_is_cached_by_identity():
    """A non-frozen attrs container is mutable, so fmap maps a shared one once."""

    @ct.container
    @attrs.define
    class Box:
        v: Any

    box = Box([1])
    out = ct.fmap(lambda v: v, [box, box])
    assert out[0] is out[1]


def test_empty_container_is_a_node_with_no_children():
    """A container without fields is a node: f is never called and it is rebuilt."""

    @ct.container
    class Empty:
        pass

    calls = []
    out = ct.fmap(calls.append, [Empty()])
    assert out == [Empty()]
    assert calls == []
    assert ct.isleaf(Empty()) is False
    assert ct.leaves(Empty()) == []


# --- rebuild never calls user code -----------------------------------------------------


def test_rebuild_skips_init_and_post_init():
    """Rebuilt objects are made without __init__ or __post_init__."""
    calls = []

    @ct.container
    class Checked:
        a: Any

        def __post_init__(self):
            calls.append("post_init")
            if not isinstance(self.a, int):
                raise TypeError("a must be an int")

    c = Checked(1)
    calls.clear()
    out = ct.fmap(str, c)
    assert out.a == "1"
    assert calls == []


def test_rebuild_skips_custom_init():
    """A hand-written __init__ with a different signature is not called on rebuild."""

    @ct.container(children=["a"], keep=[])
    @dataclasses.dataclass(init=False)
    class Custom:
        a: Any
        b: int = 0

        def __init__(self, value):
            self.a = value
            self.b = -1

    out = ct.fmap(lambda v: v + 1, Custom(1))
    assert (out.a, out.b) == (2, 0)


def test_rebuild_skips_attrs_validators_and_converters():
    """Rebuilding an attrs container runs neither validators nor converters."""

    @ct.container
    @attrs.define
    class Validated:
        a: Any = attrs.field(validator=attrs.validators.instance_of(int))
        b: Any = attrs.field(converter=int, default=0)

    out = ct.fmap(str, Validated(1, 2))
    assert (out.a, out.b) == ("1", "2")


def test_mapped_values_may_break_annotations():
    """Children of a rebuilt container may hold any type (shapes, strings, arrays)."""
    out = ct.fmap(np.shape, Point(np.zeros((2, 3)), 1.0))
    assert out == Point((2, 3), ())


# --- register and register_node ----------------------------------------------------------


def test_register_namedtuple_with_kept_field():
    """register() declares a namedtuple: non-children are kept, the class is unchanged."""
    Tagged = collections.namedtuple("Tagged", ["x", "y", "label"])
    assert ct.register(Tagged, children=["x", "y"]) is Tagged
    assert ct.fmap(lambda v: v + 1, Tagged(1, 2, "p")) == Tagged(2, 3, "p")
    assert ct.leaves(Tagged(1, 2, "p")) == [1, 2]
    assert ct.spec(Tagged).keep == ("label",)
    assert not isinstance(Tagged(1, 2, "p"), ct.Container)


def test_register_namedtuple_resets_to_its_field_defaults():
    """A reset namedtuple field gets the namedtuple's default."""
    Row = collections.namedtuple("Row", ["x", "y", "label"], defaults=["default"])
    ct.register(Row, children=["x"], keep=["y"])
    assert ct.fmap(lambda v: v * 2, Row(1, 2, "custom")) == Row(2, 2, "default")


def test_register_dataclass_attaches_nothing():
    """register() makes a class you do not own a node without adding methods to it."""

    @dataclasses.dataclass(frozen=True)
    class Foreign:
        a: Any
        b: Any

    ct.register(Foreign)
    assert "__container_traverse__" not in Foreign.__dict__
    assert ct.fmap(lambda v: -v, Foreign(1, 2)) == Foreign(-1, -2)
    assert ct.spec(Foreign).children == ("a", "b")


def test_register_attrs_class():
    """register() accepts an attrs class and respects its aliases."""

    @attrs.frozen
    class ForeignAttrs:
        _a: Any
        b: str = "b"

    ct.register(ForeignAttrs, children=["a"])
    assert ct.fmap(lambda v: v + 1, ForeignAttrs(1, "k")) == ForeignAttrs(2, "k")


class Interval:
    """A type registered with register_node (flatten/unflatten pair)."""

    def __init__(self, lo, hi, closed=True):
        self.lo, self.hi, self.closed = lo, hi, closed

    def __eq__(self, other):
        return type(other) is Interval and (self.lo, self.hi, self.closed) == (
            other.lo,
            other.hi,
            other.closed,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self):
        return f"Interval({self.lo!r}, {self.hi!r}, closed={self.closed!r})"


ct.register_node(
    Interval,
    lambda iv: ((iv.lo, iv.hi), iv.closed),
    lambda closed, ch: Interval(*ch, closed=closed),
    keys=lambda iv: ("lo", "hi"),
)


def test_register_node_flatten_unflatten():
    """A register_node type is mapped through its flatten/unflatten pair."""
    assert ct.fmap(lambda v: v * 2, Interval(1, 5, closed=False)) == Interval(2, 10, False)
    assert ct.leaves([Interval(1, 2), Interval(3, 4)]) == [1, 2, 3, 4]


def test_register_node_keys_name_the_children():
    """keys= gives the child keys: identifiers become AttrKey."""
    paths = [ct.keystr(p) for p, _ in ct.leaves_with_path(Interval(1, 5))]
    assert paths == [".lo", ".hi"]


def test_register_node_aux_is_part_of_the_structure():
    """The aux data that flatten returns is static: it is compared in structures."""
    assert ct.structure(Interval(1, 2, True)) == ct.structure(Interval(3, 4, True))
    assert ct.structure(Interval(1, 2, True)) != ct.structure(Interval(1, 2, False))


def test_register_node_without_keys_uses_positions():
    """Without keys=, the children of a register_node type are keyed by position."""

    class Pair2:
        def __init__(self, a, b):
            self.a, self.b = a, b

    ct.register_node(Pair2, lambda p: ((p.a, p.b), None), lambda aux, ch: Pair2(*ch))
    assert [p for p, _ in ct.leaves_with_path(Pair2(1, 2))] == [
        (ct.IndexKey(0),),
        (ct.IndexKey(1),),
    ]


def test_type_seen_as_a_leaf_becomes_a_node_once_registered():
    """Registering a type already seen as a leaf makes later traversals look inside."""

    class Late:
        def __init__(self, v):
            self.v = v

    obj = Late(7)
    assert ct.leaves([obj]) == [obj]
    ct.register_node(Late, lambda x: ((x.v,), None), lambda aux, ch: Late(*ch))
    assert ct.leaves([obj]) == [7]


# --- subclasses -----------------------------------------------------------------------------


@ct.container
class Base:
    a: Any


class UndeclaredSub(Base):
    pass


def test_undeclared_subclass_of_a_container_raises_when_traversed():
    """A subclass that is not declared itself is rejected, never treated as a leaf."""
    message = (
        "'UndeclaredSub' is a subclass of the container 'Base' but is not declared itself, "
        "so its fields are unknown and it cannot be rebuilt. Decorate 'UndeclaredSub' with "
        "@container, or treat it as a leaf with is_leaf=/exclude=."
    )
    for name, operation in [
        ("leaves", ct.leaves),
        ("flatten", ct.structure),
        ("fmap", lambda t: ct.fmap(lambda v: v, t)),
        ("fcollect", ct.fcollect),
    ]:
        with pytest.raises(
            ct.ContainerDefinitionError, match=exact(f"{name}: at '[1]': {message}")
        ):
            operation([1, UndeclaredSub(2)])
    with pytest.raises(ct.ContainerDefinitionError, match=exact(message)):
        ct.isleaf(UndeclaredSub(2))


def test_undeclared_subclass_of_a_registered_class_raises():
    """A subclass of a register()-ed class (no methods attached) is rejected too."""

    @dataclasses.dataclass
    class Parent:
        a: Any

    ct.register(Parent)

    class Child(Parent):
        pass

    with pytest.raises(
        ct.ContainerDefinitionError,
        match=re.escape("'Child' is a subclass of the container 'Parent' but is not declared"),
    ):
        ct.leaves(Child(1))


def test_undeclared_subclass_with_fields_of_its_own_may_also_be_registered():
    """The hint offers register() only to a subclass that is a dataclass itself (register
    refuses plain classes), and the offered fix works."""

    @dataclasses.dataclass(frozen=True)
    class FieldedSub(Base):
        extra: Any = 0

    with pytest.raises(
        ct.ContainerDefinitionError,
        match=re.escape(
            "Decorate 'FieldedSub' with @container (or call register(FieldedSub)), or treat "
            "it as a leaf with is_leaf=/exclude=."
        ),
    ):
        ct.leaves(FieldedSub(1, 2))
    ct.register(FieldedSub)
    assert ct.leaves(FieldedSub(1, 2)) == [1, 2]


def test_undeclared_subclass_of_a_register_node_type_points_to_register_node():
    """A subclass of a register_node type is told to use register_node, which works,
    not @container/register, which refuse such classes."""

    class Span:
        def __init__(self, lo: Any, hi: Any) -> None:
            self.lo, self.hi = lo, hi

    ct.register_node(Span, lambda s: ((s.lo, s.hi), None), lambda aux, ch: Span(*ch))

    class Interval(Span):
        pass

    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "leaves: at the root: 'Interval' is a subclass of the registered type 'Span' but "
            "is not registered itself, so it cannot be taken apart and rebuilt. Register it "
            "with register_node(Interval, flatten, unflatten) as 'Span' was, or treat it as a "
            "leaf with is_leaf=/exclude=."
        ),
    ):
        ct.leaves(Interval(1, 2))
    ct.register_node(Interval, lambda s: ((s.lo, s.hi), None), lambda aux, ch: Interval(*ch))
    assert ct.leaves(Interval(1, 2)) == [1, 2]


def test_undeclared_subclass_error_names_the_path():
    """The undeclared-subclass error names the path of the offending object."""
    with pytest.raises(ct.ContainerDefinitionError, match=re.escape("['layers'][1]")):
        ct.leaves({"layers": [Base(1), UndeclaredSub(2)]})


def test_declared_subclass_is_its_own_container():
    """A subclass declared with @container is a node with its own fields."""

    @ct.container
    class Sub(Base):
        b: Any = 0

    out = ct.fmap(lambda v: v + 1, Sub(1, 2))
    assert type(out) is Sub
    assert out == Sub(2, 3)


# --- generated code ------------------------------------------------------------------------


def test_generated_code_is_registered_in_linecache():
    """The generated functions' source is in linecache under a descriptive file name."""
    filename = Point.__container_traverse__.__code__.co_filename
    assert filename.startswith("<containers generated ")
    assert "Point" in filename
    source = "".join(linecache.getlines(filename))
    assert "def __container_traverse__(self, acc, fun, /):" in source
    assert "_c0, acc = fun(self.x, acc)" in source


def test_inspect_getsource_shows_generated_code():
    """inspect.getsource works on the generated protocol methods."""
    source = inspect.getsource(Point.__container_reduce__)
    assert source == (
        "def __container_reduce__(self, acc, fun, /):\n"
        "    try:\n"
        "        acc = fun(self.x, acc)\n"
        "        acc = fun(self.y, acc)\n"
        "        return acc\n"
        "    except AttributeError as _e:\n"
        "        raise _ct_unset(self, _e) from None\n"
    )


def test_tracebacks_show_generated_lines():
    """A traceback through generated code shows the generated line."""

    def boom(child, acc):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match=exact("boom")) as info:
        Point(1, 2).__container_traverse__(0, boom)
    frames = traceback.extract_tb(info.value.__traceback__)
    generated = [fr for fr in frames if fr.filename.startswith("<containers generated")]
    assert [fr.line for fr in generated] == ["_c0, acc = fun(self.x, acc)"]


def test_generated_methods_have_readable_names():
    """The attached methods are named after the class."""
    assert Point.__container_traverse__.__qualname__ == "Point.__container_traverse__"
    assert Point.__container_traverse__.__module__ == Point.__module__


def test_field_names_do_not_collide_with_generated_names():
    """Fields named like the generated code's variables and globals still work."""

    @ct.container(children=["acc", "fun", "x", "_c0", "rebuild"], keep=["kept", "children"])
    class Awkward:
        acc: Any
        fun: Any
        x: Any
        _c0: Any
        rebuild: Any
        kept: Any = "k"
        children: Any = "c"
        metadata: Any = "m"
        _i: Any = "i"
        _d: Any = "d"

    obj = Awkward(1, 2, 3, 4, 5, "K", "C", "M", "I", "D")
    out = ct.fmap(lambda v: v * 10, obj)
    assert out == Awkward(10, 20, 30, 40, 50, "K", "C", "m", "i", "d")
    _, pairs, meta = obj.__container_serialize__()
    assert Awkward.__container_deserialize__(pairs, meta) == Awkward(1, 2, 3, 4, 5, "K", "C")
    assert ct.traverse(obj, 0, lambda c, n: (c, n + 1)) == (Awkward(1, 2, 3, 4, 5, "K", "C"), 5)


# --- field and spec -----------------------------------------------------------------------


def test_field_stores_tags():
    """ct.field(tags=...) is a dataclass field whose tags the spec records."""

    @ct.container
    class Tagged:
        w: Any = ct.field(default=0.0, tags=("param", "trainable"))
        b: Any = ct.field(default_factory=list)

    assert dict(ct.spec(Tagged).tags) == {"w": ("param", "trainable")}
    assert Tagged().b == []


def test_field_tags_must_not_be_a_string():
    """A bare string for tags= is rejected with the fix in the message."""
    with pytest.raises(
        TypeError,
        match=exact("field(tags=...) takes a tuple of tags, got 'param': write tags=('param',)."),
    ):
        ct.field(tags="param")


@pytest.mark.parametrize("tags", [3, ["param", 3], {"param"}])
def test_field_tags_must_be_a_list_or_tuple_of_strings(tags):
    """tags= that is not a list or tuple of strings is refused when the field is made."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            f"field(tags=...) takes a tuple of strings, got {tags!r}: write, e.g., "
            f"tags=('param',)."
        ),
    ):
        ct.field(tags=tags)


@pytest.mark.parametrize(
    ("option", "value", "allowed"),
    [
        ("init", "no", "True or False"),
        ("repr", 0, "True or False"),
        ("compare", None, "True or False"),
        ("kw_only", "yes", "True or False"),
        ("hash", 1, "True, False or None"),
    ],
)
def test_field_boolean_options_must_be_bools(option, value, allowed):
    """field()'s boolean options refuse a stand-in that Python would take for a bool."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(f"field(): {option}= must be {allowed}, got {value!r}."),
    ):
        ct.field(**{option: value})


def test_field_metadata_must_be_a_mapping():
    """metadata= that is not a mapping is refused by field(), not deep in dataclasses."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact("field(): metadata= must be a dict or None, got 3."),
    ):
        ct.field(metadata=3, tags=("param",))  # type: ignore[arg-type]


def test_field_default_factory_must_be_callable():
    """A default_factory= that is not callable is refused when the field is made, not
    when an instance is first built."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "field(): default_factory= must be a function called with no arguments, got "
            "3. Write default=... for a value, or, e.g., default_factory=list."
        ),
    ):
        ct.field(default_factory=3)


def test_a_field_without_default_after_one_with_a_default_says_how_to_fix_it():
    """A field without a default after one with a default names the field and the fixes
    (it said only "It could not be made a dataclass.")."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=re.escape(
            "@container on 'Late': Field Late.cache has no default but comes after a field "
            "with one, and dataclass arguments keep the fields' order: give it a default, "
            "move it above the fields with defaults, or make it keyword-only with "
            "ct.field(kw_only=True). (non-default argument 'cache' follows default argument"
        ),
    ):

        @ct.container(children=["w"])
        class Late:
            w: float
            name: str = "late"
            cache: dict


def test_container_on_a_class_with_its_own_protocol_methods():
    """@container on a class that writes a protocol method itself refuses, naming it: the
    generated method replaced the hand-written one silently."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "@container on 'Own': Own defines __container_traverse__ itself, and @container "
            "generates the protocol methods. Drop @container to keep a hand-written "
            "Container, or remove the methods."
        ),
    ):

        @ct.container
        class Own:
            x: int

            def __container_traverse__(self, acc, fun, /):
                return self, acc


def test_field_takes_a_default_or_a_factory_not_both():
    """default= and default_factory= together are a ContainerDefinitionError naming
    field(), as ct.field's other mistakes are (it was dataclasses' bare ValueError)."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "field(): default= and default_factory= were both given, got 0 and <class "
            "'int'>. Give one: default= for a value, default_factory= for a function that "
            "makes a fresh one per instance."
        ),
    ):
        ct.field(default=0, default_factory=int)


def test_attrs_tags_must_be_strings():
    """Tags given through attrs metadata must be a tuple of strings."""

    @attrs.define
    class BadTags:
        w: Any = attrs.field(metadata={"containers.tags": "param"})

    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "@container on 'BadTags': the tags of field BadTags.w must be a tuple of "
            "strings, got 'param'."
        ),
    ):
        ct.container(BadTags)


def test_spec_attributes():
    """spec(cls) gives children, keep, reset, name and version; spec(instance) works too."""

    @ct.container(children=["w"], keep=["name"], version=3)
    class Cell:
        w: Any
        name: str = "cell"
        cache: Any = None

    s = ct.spec(Cell)
    assert (s.children, s.keep, s.reset, s.version) == (("w",), ("name",), ("cache",), 3)
    assert s.name == f"{Cell.__module__}.{Cell.__qualname__}"
    assert ct.spec(Cell(1)) is s


def test_spec_of_an_undeclared_class_raises():
    """spec() on a class that is not declared says how to declare it."""
    with pytest.raises(
        TypeError,
        match=exact(
            "spec: 'Interval' is not a declared container. Declare it with @container or "
            "register(); register_node types have no declaration."
        ),
    ):
        ct.spec(Interval)


# --- declaration errors ---------------------------------------------------------------------


def test_unknown_child_name_suggests_the_closest_field():
    """An unknown name in children= is named, with the fields and a did-you-mean hint."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "@container on 'L': 'bais' in children= is not a field of 'L'. "
            "Fields are: 'w', 'b', 'name'. Did you mean 'b'?"
        ),
    ):
        ct.container(children=["w", "bais"])(raw_class())


def test_unknown_keep_name_suggests_the_closest_field():
    """An unknown name in keep= gets the same hint."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "@container on 'L': 'nmae' in keep= is not a field of 'L'. "
            "Fields are: 'w', 'b', 'name'. Did you mean 'name'?"
        ),
    ):
        ct.container(children=["w", "b"], keep=["nmae"])(raw_class())


def test_unknown_name_without_a_close_field_has_no_hint():
    """When no field is close, the message lists the fields and suggests nothing."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "@container on 'L': 'zzz' in children= is not a field of 'L'. "
            "Fields are: 'w', 'b', 'name'."
        ),
    ):
        ct.container(children=["zzz"])(raw_class())


def test_unknown_name_in_register_says_register():
    """register() errors start with 'register on'."""

    @dataclasses.dataclass
    class Owned:
        weight: Any

    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "register on 'Owned': 'weigth' in children= is not a field of 'Owned'. "
            "Fields are: 'weight'. Did you mean 'weight'?"
        ),
    ):
        ct.register(Owned, children=["weigth"])


def test_name_listed_twice_in_children():
    """A name listed twice in children= is an error."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact("@container on 'L': 'w' is listed twice in children=. List each field once."),
    ):
        ct.container(children=["w", "w"])(raw_class())


def test_name_listed_twice_in_keep():
    """A name listed twice in keep= is an error."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact("@container on 'L': 'name' is listed twice in keep=. List each field once."),
    ):
        ct.container(children=["w", "b"], keep=["name", "name"])(raw_class())


def test_alias_and_name_of_one_attrs_field_count_as_listed_twice():
    """An attrs field given by its name and its alias is listed twice."""

    @attrs.define
    class Aliased:
        _x: Any

    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "@container on 'Aliased': '_x' is listed twice in children=. List each field once."
        ),
    ):
        ct.container(children=["x", "_x"])(Aliased)


def test_name_in_both_lists():
    """A field cannot be both a child and kept."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "@container on 'L': 'w' is in both children= and keep=. A field is either a "
            "child or kept: remove it from one of the lists."
        ),
    ):
        ct.container(children=["w", "b"], keep=["w", "name"])(raw_class())


def test_reset_field_without_default():
    """A field that would be reset must have a default."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "@container on 'L': field L.name is in neither children= nor keep=, so rebuilt "
            "objects reset it to its default, but it has no default. Give it a default, or "
            "add it to keep=."
        ),
    ):
        ct.container(children=["w"], keep=["b"])(raw_class())


def test_children_given_as_a_string():
    """children='w' (a string) is rejected with the one-element list to write instead."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "@container on 'L': children= must be a list of field names, got 'w'. "
            "Write children=['w'] for a single field."
        ),
    ):
        ct.container(children="w")(raw_class())  # type: ignore[arg-type]


def test_keep_with_non_strings():
    """keep= must hold strings."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact("@container on 'L': keep= must be a list of field names (strings), got [1]."),
    ):
        ct.container(keep=[1])(raw_class())  # type: ignore[list-item]


def test_container_on_a_non_class():
    """@container on something that is not a class says what to use instead."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "@container decorates classes, got 3. Put @container on a class statement, "
            "or use register_node for other types."
        ),
    ):
        ct.container(3)  # type: ignore[call-overload]


def test_container_twice_on_one_class():
    """Decorating a class twice is an error."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact("@container on 'Point': Point is already declared. Decorate each class once."),
    ):
        ct.container(Point)


def test_register_a_class_without_fields():
    """register() on a class that is not a dataclass, attrs class or namedtuple fails."""

    class Opaque:
        pass

    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "register on 'Opaque': it is not a dataclass, attrs class or namedtuple, so its "
            "fields are unknown. Use @container on the class definition, or "
            "register_node(cls, flatten, unflatten) for other types."
        ),
    ):
        ct.register(Opaque)


def test_register_a_non_class():
    """register() takes a class."""
    with pytest.raises(ct.ContainerDefinitionError, match=exact("register takes a class, got 3.")):
        ct.register(3)  # type: ignore[type-var]


def test_register_twice():
    """Registering one class twice is an error."""
    Twice = collections.namedtuple("Twice", ["a"])
    ct.register(Twice)
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact("register on 'Twice': Twice is already registered. Register each class once."),
    ):
        ct.register(Twice)


def test_register_node_on_a_declared_container():
    """register_node on a class that is already a container is an error."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "register_node on 'Point': Point is already registered. Register each class once."
        ),
    ):
        ct.register_node(Point, lambda p: ((), None), lambda aux, ch: Point(0))


def test_register_node_twice():
    """register_node on one type twice is an error."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "register_node on 'Interval': Interval is already registered. Register each "
            "class once."
        ),
    ):
        ct.register_node(Interval, lambda iv: ((), None), lambda aux, ch: Interval(0, 0))


@pytest.mark.parametrize(
    ("cls", "what"),
    [(list, "a node"), (dict, "a node"), (int, "always a leaf"), (np.ndarray, "always a leaf")],
)
def test_register_node_on_a_builtin(cls, what):
    """Builtin nodes and builtin leaves cannot be registered."""
    name = cls.__qualname__
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            f"register_node on {name!r}: {name} is built in ({what}) and cannot be registered."
        ),
    ):
        ct.register_node(cls, lambda x: ((), None), lambda aux, ch: None)


def test_register_node_on_a_non_class():
    """register_node takes a class."""
    with pytest.raises(
        ct.ContainerDefinitionError, match=exact("register_node takes a class, got 'x'.")
    ):
        ct.register_node("x", lambda x: ((), None), lambda aux, ch: None)  # type: ignore[type-var]


@pytest.mark.parametrize(
    ("what", "bad"), [("flatten", 1), ("unflatten", 1), ("keys", 1), ("flatten", None)]
)
def test_register_node_needs_callables(what, bad):
    """flatten and unflatten must be functions (None too is refused), keys= too if given;
    a refused registration leaves the class free to register."""

    class Target:
        pass

    fns = {"flatten": lambda x: ((), None), "unflatten": lambda aux, ch: Target(), "keys": None}
    fns[what] = bad
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            f"register_node on 'Target': {what} must be a function, got {bad}. Pass "
            f"flatten(x) -> (children, aux) and unflatten(aux, children) -> x."
        ),
    ):
        ct.register_node(Target, fns["flatten"], fns["unflatten"], keys=fns["keys"])
    ct.register_node(Target, lambda x: ((), None), lambda aux, ch: Target())
    assert ct.leaves([Target()]) == []


@pytest.mark.parametrize("version", [0, -1, 1.5, "2"])
def test_version_must_be_a_positive_int(version):
    """version= must be an int >= 1."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(f"@container on 'L': version= must be an int >= 1, got {version!r}."),
    ):
        ct.container(version=version)(raw_class())


@pytest.mark.parametrize("frozen", ["no", 0, 1, None])
def test_frozen_must_be_a_bool(frozen):
    """frozen= refuses a stand-in that Python would silently take for True or False."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(f"@container on 'L': frozen= must be True or False, got {frozen!r}."),
    ):
        ct.container(frozen=frozen)(raw_class())


@pytest.mark.parametrize("name", [3, "", b"lib.L"])
@pytest.mark.parametrize("where", ["@container", "register", "register_node"])
def test_name_must_be_a_non_empty_string(where, name):
    """A name= that files cannot carry (not a string) or that names nothing (empty) is
    refused when declaring, not when a file is saved or loaded."""
    cls = raw_class()
    if where == "register":
        cls = dataclasses.dataclass(cls)
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            f"{where} on 'L': name= must be a non-empty string, got {name!r}. The name "
            f"identifies the class in saved files: pass a string such as "
            f"'{__name__}.L', or leave name= out to use module.qualname."
        ),
    ):
        if where == "@container":
            ct.container(name=name)(cls)
        elif where == "register":
            ct.register(cls, name=name)
        else:
            ct.register_node(cls, lambda x: ((), None), lambda aux, ch: cls(), name=name)
    assert REGISTRY.registered(cls) is None


@pytest.mark.parametrize("renamed", [{3: "b"}, {"old": 3}])
def test_renamed_names_must_be_strings(renamed):
    """renamed= maps field names (strings) to field names: other keys could never match
    a name in a file."""
    old, new = next(iter(renamed.items()))
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            f"@container on 'L': renamed= maps old field names to new ones (strings), got "
            f"{old!r}: {new!r}."
        ),
    ):
        ct.container(renamed=renamed)(raw_class())


def test_renamed_to_an_unknown_field():
    """renamed= must map old names to existing fields."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "@container on 'L': 'nam' in renamed= is not a field of 'L'. "
            "Fields are: 'w', 'b', 'name'. Did you mean 'name'?"
        ),
    ):
        ct.container(renamed={"label": "nam"})(raw_class())


def test_renamed_from_a_current_field():
    """renamed= keys must be names that are no longer fields."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "@container on 'L': renamed= maps 'b' to 'name', but 'b' is still a field. "
            "renamed= lists names that files may use for fields that no longer exist."
        ),
    ):
        ct.container(renamed={"b": "name"})(raw_class())


def test_removed_as_a_string():
    """removed= must be a list, not a string."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "@container on 'L': removed= must be a list of field names, got 'old'. "
            "Write removed=['old'] for a single field."
        ),
    ):
        ct.container(removed="old")(raw_class())


def test_removed_names_a_current_field():
    """removed= must not name a current field."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "@container on 'L': 'b' is in removed= but is still a field. removed= lists "
            "fields that old files may hold and that are dropped on load."
        ),
    ):
        ct.container(removed=["b"])(raw_class())


def test_migrations_keys_must_be_older_versions():
    """migrations= maps versions below version= to callables."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=re.escape(
            "@container on 'L': migrations= maps a version v (1 <= v < version=2) to a "
            "function upgrading data from v to v + 1; got 2: "
        ),
    ):
        ct.container(version=2, migrations={2: lambda c, m: None})(raw_class())


# --- the name registry -------------------------------------------------------------------


def test_default_name_is_module_and_qualname():
    """The default name is module.qualname."""
    assert ct.spec(Point).name == f"{Point.__module__}.Point"
    assert class_by_name(ct.spec(Point).name) is Point


def test_default_name_of_a_local_class_is_module_and_qualname():
    """A class defined in a function is named module.qualname, '<locals>' included."""

    @ct.container
    class Local:
        a: Any

    assert ct.spec(Local).name == f"{Local.__module__}.{Local.__qualname__}"


def test_explicit_name_taken_by_another_class_raises():
    """A different class under an explicit name that is taken is an error."""

    @ct.container(name="test_declare.explicit-taken")
    class First:
        a: Any

    class Second:
        a: Any

    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "@container on 'Second': the name 'test_declare.explicit-taken' is already used "
            f"by {First.__module__}.{First.__qualname__}. Names identify classes in saved files, so each "
            "must be unique: choose another name=."
        ),
    ):
        ct.container(name="test_declare.explicit-taken")(Second)
    assert class_by_name("test_declare.explicit-taken") is First


def test_explicit_name_cannot_take_another_class_default_name():
    """An explicit name equal to another class's default name is taken too."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=re.escape(f"the name {ct.spec(Point).name!r} is already used by"),
    ):
        ct.container(name=ct.spec(Point).name)(raw_class("Impostor", a=int))


def test_default_name_newest_class_wins():
    """Redefining a class under its default name replaces the old one, without error."""

    def define():
        @ct.container
        class Redefined:
            a: Any

        return Redefined

    old, new = define(), define()
    assert old is not new
    assert ct.spec(old).name == ct.spec(new).name
    assert class_by_name(ct.spec(new).name) is new
    assert ct.fmap(lambda v: v + 1, old(1)) == old(2)


def test_redefinition_under_an_explicit_name_is_allowed():
    """The same module.qualname may re-take its explicit name (notebooks, reloads)."""

    def define():
        @ct.container(name="test_declare.explicit-redefined")
        class Again:
            a: Any

        return Again

    old, new = define(), define()
    assert old is not new
    assert class_by_name("test_declare.explicit-redefined") is new


def _model_in_f():
    @ct.container(name="test_declare.two-functions")
    class Model:
        a: Any

    return Model


def _model_in_g():
    @ct.container(name="test_declare.two-functions")
    class Model:
        a: Any

    return Model


def test_explicit_name_of_a_different_qualname_raises():
    """Distinct classes f.<locals>.Model and g.<locals>.Model cannot share an explicit name."""
    _model_in_f()
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=re.escape("the name 'test_declare.two-functions' is already used by"),
    ):
        _model_in_g()


# --- declarations refused in our own words (no foreign exceptions) ------------------


@pytest.mark.parametrize("option", ["children", "keep"])
@pytest.mark.parametrize(
    "make",
    [lambda: (n for n in ["w"]), lambda: iter(["w"]), lambda: {"w"}],
    ids=["generator", "iterator", "set"],
)
def test_names_given_as_an_iterator_or_a_set_are_refused(option, make):
    """children=/keep= are read once: a one-shot iterator or an unordered set is refused
    with a message saying what to pass, instead of being silently used up."""
    value = make()
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=rf"^@container on 'L': {option}= must be a list of field names, got "
        rf"\w+ .*\. Pass a list or tuple \(for an iterator or a set: {option}=list\(\.\.\.\) "
        rf"or sorted\(\.\.\.\)\)\.$",
    ):
        ct.container(**{option: value})(raw_class(w=int, b=int))


def test_removed_none_means_nothing_removed():
    """removed=None is accepted as no removed fields."""
    cls = ct.container(removed=None)(raw_class(w=int))  # type: ignore[arg-type]
    assert ct.spec(cls).removed == ()


@pytest.mark.parametrize("option", ["renamed", "migrations"])
def test_renamed_and_migrations_must_be_dicts(option):
    """renamed=/migrations= given as a list are refused naming the option."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=rf"^@container on 'L': {option}= must be a dict \(.*\), got list \[\(1, 2\)\]\.$",
    ):
        ct.container(**{option: [(1, 2)]})(raw_class(w=int))


def test_a_field_named_after_a_keyword_is_refused():
    """Generated code never sees a field name that is not an identifier."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "@container on 'K': field 'class' is a Python keyword, and containers read and "
            "write fields by name in generated code. Rename the field."
        ),
    ):
        ct.container(type("K", (), {"__annotations__": {"class": int}}))
    odd = dataclasses.dataclass(init=False, repr=False, eq=False)(
        type("K", (), {"__annotations__": {"class": int}})
    )
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "register on 'K': field 'class' is not a valid Python identifier, and containers "
            "read and write fields by name in generated code. Rename the field."
        ),
    ):
        ct.register(odd)


def test_an_enum_is_refused():
    """An Enum's members would vanish from leaves: @container and register refuse it."""
    import enum

    class Color(enum.Enum):
        RED = 1

    for declare, where in ((ct.container, "@container"), (ct.register, "register")):
        with pytest.raises(
            ct.ContainerDefinitionError,
            match=exact(
                f"{where} on 'Color': an Enum's members "
                f"are its values, not fields, so it cannot be a container. Use its members "
                f"as leaves, or hold one in a field of a container."
            ),
        ):
            declare(Color)


def test_frozen_class_over_a_mutable_dataclass_is_explained():
    """dataclasses' frozen-inheritance error comes back naming the class and the fix."""

    @dataclasses.dataclass
    class Base:
        x: int

    with pytest.raises(
        ct.ContainerDefinitionError,
        match=r"^@container on '.*Child': A frozen class cannot inherit from a non-frozen "
        r"dataclass, nor the reverse: pass frozen=False to @container, or make the base "
        r"frozen too\. \(cannot inherit frozen dataclass from a non-frozen one\)$",
    ):
        ct.container(type("Child", (Base,), {"__annotations__": {"y": int}, "y": 0}))


def test_a_mutable_default_is_explained():
    """dataclasses' mutable-default error comes back naming Class.field and the fix."""
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=r"^@container on 'M': Field M\.y has a mutable default, which every instance "
        r"would share: write y: \.\.\. = ct\.field\(default_factory=\.\.\.\) instead\.",
    ):
        ct.container(type("M", (), {"__annotations__": {"y": list}, "y": []}))


def test_an_unset_init_false_field_is_named_with_its_path(engine: str) -> None:
    """A child declared init=False and never assigned is a StructureError naming
    Class.field and the path, not a bare AttributeError."""

    @ct.container
    class Lazy:
        a: int
        b: int = dataclasses.field(init=False)

    message = (
        "Lazy.b is not set on this Lazy (a field declared with init=False and never "
        "assigned), and containers read every child and kept field. Assign it in "
        "__post_init__, or give it a default."
    )
    with pytest.raises(ct.StructureError, match=exact(f"leaves: at \"[1]['k']\": {message}")):
        ct.leaves([0, {"k": Lazy(1)}])
    with pytest.raises(ct.StructureError, match=exact(message)):
        ct.reduce(Lazy(1), 0, lambda c, acc: acc)
    for op in (ct.fmap, ct.fmapstructure):
        with pytest.raises(ct.StructureError, match=exact(message)):
            op(lambda v: v, Lazy(1))
        with pytest.raises(ct.StructureError, match=exact(message)):
            op(lambda v: v, [Lazy(1), Lazy(1)])
    with pytest.raises(ct.StructureError, match=exact(message)):
        ct.fmap(lambda v, w: v, Lazy(1), Lazy(1))
    done = Lazy(1)
    object.__setattr__(done, "b", 2)
    assert ct.leaves(done) == [1, 2]
