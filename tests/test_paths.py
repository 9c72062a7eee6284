"""Keys and key paths: AttrKey, IndexKey, DictKey, keystr, the path variants of flatten,
and getpath / setpath / haspath (SPEC.md section 5)."""

from __future__ import annotations

import collections
import math
import pickle
import re
import sys
from collections import OrderedDict, defaultdict, deque
from typing import Any

import pytest

import containers as ct
from containers import AttrKey, DictKey, IndexKey
from containers._paths import parse_keystr


def exact(message: str) -> str:
    """A `match=` pattern for exactly this message."""
    return f"^{re.escape(message)}$"


@ct.container(children=["w", "b"], keep=["name"])
class Layer:
    w: Any
    b: Any = 0
    name: str = "layer"


Named = collections.namedtuple("Named", ["x", "y"])

TREE = {
    "layers": [Layer(1, 2, "first"), Layer(Named(3, 4), {0: 5, "k": 6}, "second")],
    "n": None,
}


# --- key types ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "text", "rep", "raw"),
    [
        (AttrKey("w"), ".w", "AttrKey('w')", "w"),
        (IndexKey(2), "[2]", "IndexKey(2)", 2),
        (DictKey("a"), "['a']", "DictKey('a')", "a"),
        (DictKey(0), "[0]", "DictKey(0)", 0),
        (DictKey((1, "x")), "[(1, 'x')]", "DictKey((1, 'x'))", (1, "x")),
    ],
)
def test_key_str_repr_and_raw(key, text, rep, raw):
    """Each key renders as Python (str), has an evaluable repr, and exposes its raw value."""
    assert str(key) == text
    assert repr(key) == rep
    assert key.raw == raw


def test_keys_compare_by_type_and_value():
    """Keys are equal only to keys of the same kind with the same (same-typed) value."""
    assert AttrKey("a") == AttrKey("a") and hash(AttrKey("a")) == hash(AttrKey("a"))
    assert AttrKey("a") != DictKey("a")
    assert IndexKey(1) != DictKey(1)
    assert DictKey(1) != DictKey(True)
    assert DictKey(1) != DictKey(1.0)
    assert IndexKey(1) == IndexKey(1)
    assert len({AttrKey("a"), AttrKey("a"), DictKey("a"), IndexKey(0), IndexKey(0)}) == 3


def test_keys_and_paths_sort_without_error():
    """Keys order by kind, then by raw value (type name and repr across types), so
    dicts keyed by paths (split's parts) sort, as JAX sorts dict keys."""
    keys = [DictKey("b"), DictKey(2), IndexKey(2), DictKey("a"), IndexKey(0), AttrKey("z")]
    keys += [AttrKey("a"), DictKey((1, 2)), DictKey(frozenset({1}))]
    assert sorted(keys) == [
        AttrKey("a"),
        AttrKey("z"),
        IndexKey(0),
        IndexKey(2),
        DictKey(frozenset({1})),
        DictKey(2),
        DictKey("a"),
        DictKey("b"),
        DictKey((1, 2)),
    ]
    assert AttrKey("a") <= AttrKey("a") < AttrKey("b") and IndexKey(3) >= IndexKey(2)
    paths = [(DictKey("a"), IndexKey(1)), (DictKey("a"), IndexKey(0)), (DictKey(0),)]
    assert sorted(paths) == [paths[2], paths[1], paths[0]]
    with pytest.raises(TypeError, match="'<' not supported between instances of 'AttrKey'"):
        AttrKey("a") < 1  # noqa: B015


@pytest.mark.parametrize(
    ("key", "attr"), [(AttrKey("a"), "name"), (IndexKey(0), "idx"), (DictKey("a"), "key")]
)
def test_keys_are_immutable(key, attr):
    """Keys cannot be modified."""
    with pytest.raises(AttributeError, match=exact(f"{type(key).__name__} is immutable")):
        setattr(key, attr, "other")


@pytest.mark.parametrize("key", [AttrKey("a"), IndexKey(300), DictKey(("t", 1))])
def test_keys_pickle(key):
    """Keys survive pickling."""
    assert pickle.loads(pickle.dumps(key)) == key


# --- keystr ---------------------------------------------------------------------------------


def test_keystr_renders_python():
    """keystr renders a path as the Python expression that reaches it."""
    assert ct.keystr((AttrKey("layers"), IndexKey(2), AttrKey("w"))) == ".layers[2].w"
    assert ct.keystr((DictKey("a"), IndexKey(0))) == "['a'][0]"
    assert ct.keystr((DictKey(1), DictKey((1, 2)), DictKey(None))) == "[1][(1, 2)][None]"


def test_keystr_of_the_root_is_empty():
    """The empty path renders as ''."""
    assert ct.keystr(()) == ""


def test_keys_holding_ints_too_long_to_print_render_their_size():
    """A dict key past Python's int-to-str limit renders as int(N bits, crc32 X)."""
    huge = 10**5000
    assert ct.keystr((DictKey(huge), DictKey((1, -huge)))) == (
        "[int(16610 bits, crc32 c6d23d8d)][(1, -int(16610 bits, crc32 c6d23d8d))]"
    )
    assert repr(DictKey(huge)) == "DictKey(int(16610 bits, crc32 c6d23d8d))"
    assert str(DictKey(huge + 1)) != str(DictKey(huge))  # the CRC32 tells them apart


def test_keystr_rejects_non_keys():
    """keystr says what paths are made of when given something else."""
    with pytest.raises(
        ct.StructureError,
        match=exact(
            "keystr: 'a' is not a key. Paths are tuples of AttrKey, IndexKey and DictKey, as "
            "flatten_with_path gives them."
        ),
    ):
        ct.keystr(("a",))  # type: ignore[arg-type]


# --- flatten_with_path / leaves_with_path ----------------------------------------------------


def test_leaves_with_path_uses_the_right_key_kinds():
    """Container and namedtuple fields are AttrKey, positions IndexKey, mapping keys DictKey."""
    assert ct.leaves_with_path(TREE) == [
        ((DictKey("layers"), IndexKey(0), AttrKey("w")), 1),
        ((DictKey("layers"), IndexKey(0), AttrKey("b")), 2),
        ((DictKey("layers"), IndexKey(1), AttrKey("w"), AttrKey("x")), 3),
        ((DictKey("layers"), IndexKey(1), AttrKey("w"), AttrKey("y")), 4),
        ((DictKey("layers"), IndexKey(1), AttrKey("b"), DictKey(0)), 5),
        ((DictKey("layers"), IndexKey(1), AttrKey("b"), DictKey("k")), 6),
    ]


def test_flatten_with_path_pairs_paths_and_leaves():
    """flatten_with_path gives (path, leaf) pairs and the structure."""
    pairs, s = ct.flatten_with_path({"a": [1, 2], "b": 3})
    assert [(ct.keystr(p), v) for p, v in pairs] == [
        ("['a'][0]", 1),
        ("['a'][1]", 2),
        ("['b']", 3),
    ]
    assert s == ct.structure({"a": [1, 2], "b": 3})
    assert [p for p, _ in pairs] == s.paths()


def test_paths_of_other_builtin_nodes():
    """OrderedDict and defaultdict keys are DictKeys, deque positions IndexKeys."""
    tree = (OrderedDict(b=1, a=2), defaultdict(int, k=3), deque([4]))
    assert [ct.keystr(p) for p, _ in ct.leaves_with_path(tree)] == [
        "[0]['b']",
        "[0]['a']",
        "[1]['k']",
        "[2][0]",
    ]


def test_leaves_with_path_of_a_leaf():
    """A leaf root has the empty path."""
    assert ct.leaves_with_path(5) == [((), 5)]


def test_path_variants_take_is_leaf_and_none_is_leaf():
    """is_leaf and none_is_leaf apply to the path variants too."""
    assert ct.leaves_with_path([(1, 2), None], is_leaf=lambda v: isinstance(v, tuple)) == [
        ((IndexKey(0),), (1, 2))
    ]
    assert ct.leaves_with_path([None], none_is_leaf=True) == [((IndexKey(0),), None)]


# --- getpath / haspath ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("['layers'][1].w.y", 4),
        ("['layers'][1].b['k']", 6),
        ("['layers'][1].b[0]", 5),
        ("['n']", None),
        ((DictKey("layers"), IndexKey(0), AttrKey("b")), 2),
        ((DictKey("layers"), IndexKey(1), AttrKey("b"), DictKey(0)), 5),
    ],
)
def test_getpath_by_keys_or_keystr(path, value):
    """getpath follows a tuple of keys or its keystr form; [0] also finds an int dict key."""
    assert ct.getpath(TREE, path) == value


def test_getpath_of_the_root():
    """The empty path (or '') is the tree itself."""
    assert ct.getpath(TREE, ()) is TREE
    assert ct.getpath(TREE, "") is TREE


def test_getpath_returns_inner_nodes():
    """getpath may stop at a node."""
    assert ct.getpath(TREE, "['layers'][0]") is TREE["layers"][0]


def test_keystr_of_every_leaf_path_leads_back_to_it():
    """getpath(tree, keystr(path)) is the leaf at path, for every leaf."""
    tree = {"a": [1, {(1, 2): 2, 3: 3}], "b.c": Named(4, (5,)), 7: Layer(6)}
    for path, leaf in ct.leaves_with_path(tree):
        assert ct.getpath(tree, ct.keystr(path)) is leaf
        assert ct.getpath(tree, path) is leaf


@pytest.mark.parametrize(
    "key", ["it's", 'say "hi"', "a]b", "x\\y", "[0]", 1.5, -1, True, (1, "t")]
)
def test_keystr_of_awkward_dict_keys_parses_back(key):
    """Quotes, brackets and backslashes inside keys survive keystr and getpath."""
    tree = {key: "found"}
    assert ct.getpath(tree, ct.keystr((DictKey(key),))) == "found"


@pytest.mark.parametrize("key", [math.inf, -math.inf, (1, math.inf), (math.inf, "a")])
def test_keystr_of_infinite_float_keys_parses_back(key):
    """repr shows inf as a bare name, which is no Python literal: getpath and setpath
    read it as the float."""
    tree = {key: "found"}
    text = ct.keystr((DictKey(key),))
    assert ct.getpath(tree, text) == "found"
    assert ct.setpath(tree, text, "set") == {key: "set"}


def test_keystr_of_a_nan_key_parses_to_a_nan():
    """nan parses too; as in Python, a new nan is no key of a dict (nan != nan), so the
    lookup fails with the key named, not with a parse error."""
    (key,) = parse_keystr("[nan]")
    assert type(key) is DictKey and math.isnan(key.key)
    with pytest.raises(
        ct.StructureError,
        match=r"^getpath: cannot follow '\[nan\]': a dict at the root has no child \[nan\]\.",
    ):
        ct.getpath({math.nan: 1}, "[nan]")


def test_keystr_of_a_key_ending_in_a_backslash_parses_back():
    """A dict key that ends with a backslash survives keystr and getpath."""
    tree = {"dir\\": "found"}
    assert ct.getpath(tree, ct.keystr((DictKey("dir\\"),))) == "found"


def test_getpath_missing_key():
    """A missing key is named with the node's path and its children."""
    with pytest.raises(
        ct.StructureError,
        match=exact(
            "getpath: cannot follow \"['layers'][5]\": a list at \"['layers']\" has no child "
            "[5]. Its children are: [0], [1]."
        ),
    ) as info:
        ct.getpath(TREE, "['layers'][5]")
    assert info.value.path == (DictKey("layers"),)


def test_getpath_missing_field():
    """A missing field of a container is named with the fields it has."""
    with pytest.raises(
        ct.StructureError,
        match=exact(
            "getpath: cannot follow \"['layers'][0].q\": a 'Layer' at \"['layers'][0]\" has "
            "no child .q. Its children are: .w, .b."
        ),
    ):
        ct.getpath(TREE, "['layers'][0].q")


def test_getpath_kept_fields_are_not_children():
    """Kept fields are not reachable by path: only children are."""
    with pytest.raises(ct.StructureError, match=re.escape("has no child .name.")):
        ct.getpath(TREE, "['layers'][0].name")


def test_getpath_through_a_leaf():
    """A path that goes through a leaf says where the leaf is."""
    with pytest.raises(
        ct.StructureError,
        match=exact(
            "getpath: cannot follow \"['layers'][0].w.x\": \"['layers'][0].w\" is a leaf of "
            "type int, which has no children."
        ),
    ) as info:
        ct.getpath(TREE, "['layers'][0].w.x")
    assert info.value.path == (DictKey("layers"), IndexKey(0), AttrKey("w"))


def test_getpath_attr_key_on_a_dict():
    """.name on a dict is an AttrKey, which a dict does not have."""
    with pytest.raises(
        ct.StructureError,
        match=exact(
            "getpath: cannot follow '.layers': a dict at the root has no child .layers. "
            "Its children are: ['layers'], ['n']."
        ),
    ):
        ct.getpath(TREE, ".layers")


@pytest.mark.parametrize(
    ("text", "pos", "what"),
    [
        ("layers", 0, "expected '.' or '['"),
        ("['layers'", 0, "this '[' is never closed"),
        ("[foo]", 0, "the text in [...] is not a Python literal"),
        (".1", 0, "expected a field name after '.'"),
        (".a[0]x", 5, "expected '.' or '['"),
    ],
)
def test_getpath_malformed_keystr(text, pos, what):
    """A malformed keystr says where parsing failed and shows the expected form."""
    with pytest.raises(
        ValueError,
        match=exact(
            f"cannot parse key path {text!r} at position {pos}: {what}. Write paths as keystr "
            'renders them, e.g. ".layers[2].w" or "[\'a\'][0]".'
        ),
    ):
        ct.getpath(TREE, text)


needs_int_limit = pytest.mark.skipif(
    not hasattr(sys, "get_int_max_str_digits"), reason="int() has no digit limit before 3.11"
)


@pytest.mark.parametrize("text", ["[²]", "[\u0661]", "[\uff11]"])
def test_getpath_non_ascii_digits_are_a_malformed_keystr(text):
    """Digits int() reads but keystr never writes ('²', Arabic-Indic, full-width) make
    a StructureError naming the position, not a bare ValueError from int()."""
    with pytest.raises(
        ct.StructureError,
        match=exact(
            f"cannot parse key path {text!r} at position 0: the text in [...] is not a "
            'Python literal. Write paths as keystr renders them, e.g. ".layers[2].w" or '
            "\"['a'][0]\"."
        ),
    ):
        ct.getpath(TREE, text)


@needs_int_limit
@pytest.mark.parametrize("sign", ["", "-"])
def test_getpath_index_too_long_for_int(sign):
    """An index with more digits than int() converts is a StructureError that says so
    and quotes the path shortened, not int()'s bare ValueError."""
    limit = sys.get_int_max_str_digits()
    text = f".layers[{sign}{'9' * (limit + 1)}]"
    with pytest.raises(
        ct.StructureError,
        match=exact(
            f"cannot parse key path {text[:80]!r}... ({len(text)} characters) at position 7: "
            f"the number in [...] has {limit + 1} digits, more than Python converts to int "
            f"(sys.get_int_max_str_digits() is {limit}). Write paths as keystr renders them, "
            'e.g. ".layers[2].w" or "[\'a\'][0]".'
        ),
    ):
        ct.getpath(TREE, text)


@needs_int_limit
def test_getpath_long_index_within_int_limit_is_a_missing_child():
    """A 4,300-digit index parses (int() converts it) and is reported as a missing child."""
    big = "9" * sys.get_int_max_str_digits()
    with pytest.raises(ct.StructureError, match=f"has no child \\[{big}\\]"):
        ct.getpath([1], f"[{big}]")


def test_getpath_non_key_elements():
    """A tuple path must hold keys."""
    with pytest.raises(
        ct.StructureError,
        match=exact(
            "getpath: paths are tuples of AttrKey/IndexKey/DictKey or keystr strings like "
            "'.layers[0].w'; got the element 'layers'. Write the key as DictKey('layers') "
            "or AttrKey('layers'), or the whole path as a string."
        ),
    ):
        ct.getpath(TREE, ("layers",))  # type: ignore[arg-type]


@pytest.mark.parametrize("op", ["getpath", "haspath", "setpath"])
@pytest.mark.parametrize(
    ("path", "shown"), [(3, "int 3"), (b".w", "bytes b'.w'"), (None, "NoneType None")]
)
def test_a_path_that_is_neither_a_string_nor_keys_is_named(op, path, shown):
    """A path of another type (an int, bytes, None) is a StructureError naming the
    operation, as malformed paths are (docs/glossary.md), before anything is read: it was
    Python's "'int' object is not iterable", and bytes were taken for a tuple of ints."""
    call = {
        "getpath": ct.getpath,
        "haspath": ct.haspath,
        "setpath": lambda t, p: ct.setpath(t, p, 0),
    }
    with pytest.raises(
        ct.StructureError,
        match=exact(
            f"{op}: path must be a keystr string like '.layers[0].w' or a tuple of keys "
            f"(AttrKey, IndexKey, DictKey), got {shown}."
        ),
    ):
        call[op](TREE, path)


def test_haspath():
    """haspath is True for reachable paths, False for missing keys or paths through leaves."""
    assert ct.haspath(TREE, "['layers'][1].w.x") is True
    assert ct.haspath(TREE, "['n']") is True
    assert ct.haspath(TREE, ()) is True
    assert ct.haspath(TREE, "['layers'][2]") is False
    assert ct.haspath(TREE, "['n'][0]") is False
    assert ct.haspath(TREE, (DictKey("layers"), IndexKey(0), AttrKey("w"), AttrKey("x"))) is False


def test_haspath_malformed_keystr_still_raises():
    """haspath does not hide a malformed path."""
    with pytest.raises(ValueError, match=re.escape("cannot parse key path 'bad' at position 0")):
        ct.haspath(TREE, "bad")


# --- setpath ---------------------------------------------------------------------------------


def test_setpath_is_functional():
    """setpath returns a new tree; the original is unchanged."""
    new = ct.setpath(TREE, "['layers'][1].w.x", 30)
    assert new["layers"][1].w == Named(30, 4)
    assert TREE["layers"][1].w == Named(3, 4)


def test_setpath_rebuilds_only_the_nodes_on_the_path():
    """Siblings off the path are the same objects; nodes on it are new; kept fields stay."""
    new = ct.setpath(TREE, "['layers'][1].w.x", 30)
    assert new is not TREE
    assert new["layers"] is not TREE["layers"]
    assert new["layers"][0] is TREE["layers"][0]
    assert new["layers"][1].b is TREE["layers"][1].b
    assert new["layers"][1].name == "second"
    assert new["n"] is None


def test_setpath_keeps_node_types_and_order():
    """setpath rebuilds each node as its type: dict order, namedtuple, OrderedDict, deque."""
    assert list(ct.setpath({"b": 1, "a": 2}, "['a']", 5).items()) == [("b", 1), ("a", 5)]
    assert ct.setpath(Named(1, 2), ".y", 5) == Named(1, 5)
    assert ct.setpath(OrderedDict(b=1, a=2), "['a']", 5) == OrderedDict(b=1, a=5)
    assert ct.setpath(deque([1, 2], maxlen=3), "[1]", 5) == deque([1, 5], maxlen=3)


def test_setpath_can_replace_a_subtree_with_another_shape():
    """The new value may be any tree."""
    assert ct.setpath([1, 2], (IndexKey(1),), {"x": [3]}) == [1, {"x": [3]}]


def test_setpath_at_the_root_returns_the_value():
    """Setting the empty path returns the value."""
    assert ct.setpath(TREE, (), 7) == 7


def test_setpath_errors_name_setpath():
    """setpath reports a missing key like getpath, under its own name."""
    with pytest.raises(
        ct.StructureError,
        match=exact(
            "setpath: cannot follow \"['layers'][9]\": a list at \"['layers']\" has no child "
            "[9]. Its children are: [0], [1]."
        ),
    ):
        ct.setpath(TREE, "['layers'][9]", 1)
