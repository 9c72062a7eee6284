"""pformat and pprint (SPEC.md section 10): the indented view, array summaries by shape
and dtype, reference cycles as StructureError, and any depth in linear size."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from collections import OrderedDict, defaultdict, deque
from typing import Any

import numpy as np
import pytest

import containers as ct
from containers._display import MAX_INDENT_DEPTH


def exact(message: str) -> str:
    """A `match=` pattern for exactly this message."""
    return f"^{re.escape(message)}$"


def cycle_message(where: str, first: str) -> str:
    """The exact message of pformat's cycle error."""
    return exact(
        f"pformat: the tree has a reference cycle: the object at {where} is the same object "
        f"as its ancestor at {first}. Trees must be acyclic; break the cycle, or make the "
        "object a leaf (exclude=/is_leaf=, where the operation takes them)."
    )


@ct.container(children=["w", "b"], keep=["name"])
class Dense:
    w: Any
    b: Any
    name: str = "dense"


@ct.container(frozen=False)
class Node:
    value: Any
    next: Any = None


def nested_lists(depth: int) -> list[Any]:
    """A list nested ``depth`` deep, built without recursion."""
    root: list[Any] = []
    inner = root
    for _ in range(depth - 1):
        child: list[Any] = []
        inner.append(child)
        inner = child
    return root


# --- the view ------------------------------------------------------------------------------


def test_pformat_shows_classes_fields_kept_values_and_arrays():
    """Containers show their class, field names and kept values; arrays their dtype and
    shape; a node of leaves that fits stays on one line."""
    tree = {"layers": [Dense(np.zeros((2, 3), "float32"), np.zeros(3, "float32"))], "step": 7}
    assert ct.pformat(tree) == (
        "{  # 9 params, 36 B\n"
        "  'layers': [  # 9 params, 36 B\n"
        "    Dense(w=float32[2,3], b=float32[3], name='dense'),  # 9 params, 36 B\n"
        "  ],\n"
        "  'step': 7,\n"
        "}"
    )


def test_pformat_of_leaves_none_and_single_tuples():
    """A leaf renders as its repr, None as None, a one-tuple with its comma."""
    assert ct.pformat(3.5) == "3.5"
    assert ct.pformat(None) == "None"
    assert ct.pformat((1,)) == "(1,)"
    assert ct.pformat({"a": None, "b": ()}) == "{\n  'a': None,\n  'b': (),\n}"


def test_pformat_of_ordered_dicts_defaultdicts_and_deques_reads_as_python():
    """OrderedDict, defaultdict and deque render as the calls that build them, on one
    line and broken over several, not as OrderedDict('a': 1) or deque(0: 1)."""
    assert ct.pformat(OrderedDict(a=1)) == "OrderedDict({'a': 1})"
    assert ct.pformat(defaultdict(list, a=1)) == "defaultdict(list, {'a': 1})"
    assert ct.pformat(deque([1, 2])) == "deque([1, 2])"
    assert ct.pformat(OrderedDict(a=[1, 2]), width=16) == ("OrderedDict({\n  'a': [1, 2],\n})")
    assert ct.pformat(deque([[1]]), width=5) == "deque([\n  [1],\n])"


def test_dicts_and_defaultdicts_show_their_insertion_order():
    """Keys come in the order they were inserted (flatten's sorted order is for
    traversal), in one-line and broken nodes, for dict and defaultdict."""
    assert ct.pformat({"b": 1, "a": 2}) == "{'b': 1, 'a': 2}"
    assert ct.pformat(defaultdict(int, b=1, a=2)) == "defaultdict(int, {'b': 1, 'a': 2})"
    assert ct.pformat({"z": [1], "y": [2]}, width=12) == "{\n  'z': [1],\n  'y': [2],\n}"


def test_pformat_breaks_nodes_wider_than_width_and_uses_indent():
    """A node of leaves wider than width gets a line per child, indented by indent."""
    tree = {"a": list(range(5))}
    assert ct.pformat(tree, width=12, indent=4) == (
        "{\n    'a': [\n        0,\n        1,\n        2,\n        3,\n        4,\n    ],\n}"
    )


def test_pformat_puts_kept_values_after_the_children_of_a_broken_node():
    """When a container does not fit on one line, its kept values follow its children."""
    text = ct.pformat(Dense([1, 2], "b", name="x" * 80))
    assert text == (f"Dense(\n  w=[1, 2],\n  b='b',\n  name='{'x' * 56}...,\n)")


def test_long_reprs_are_cut():
    """A leaf's repr longer than 60 characters is cut, with '...'."""
    assert ct.pformat(["y" * 100]) == f"['{'y' * 56}...]"


def test_pprint_writes_pformat_to_a_file():
    """pprint prints pformat's text and a newline to the given file."""
    out = io.StringIO()
    ct.pprint({"a": [1, 2]}, file=out)
    assert out.getvalue() == ct.pformat({"a": [1, 2]}) + "\n"


# --- arrays by duck typing -----------------------------------------------------------------


class Tensorish:
    """A leaf with a shape and a dtype, from no array library."""

    shape = (2, 5)
    dtype = "mylib.int8"


def test_any_leaf_with_shape_and_dtype_is_summarized():
    """Anything with a shape of ints and a dtype renders as dtype[shape], the dtype's
    module prefix dropped."""
    assert ct.pformat([Tensorish()]) == "[int8[2,5]]  # 10 params, 10 B"


def test_torch_tensors_show_their_dtype_without_the_torch_prefix():
    """A torch tensor renders as float32[3,4], not torch.float32[3,4]."""
    torch = pytest.importorskip("torch")
    assert ct.pformat({"w": torch.zeros(3, 4)}) == "{'w': float32[3,4]}  # 12 params, 48 B"
    assert ct.pformat([torch.zeros(2, dtype=torch.bfloat16)]) == "[bfloat16[2]]  # 2 params, 4 B"


def test_jax_arrays_are_summarized():
    """A jax array renders as dtype[shape]."""
    jnp = pytest.importorskip("jax.numpy")
    assert ct.pformat([jnp.zeros((2, 2), jnp.float32)]) == "[float32[2,2]]  # 4 params, 16 B"


def test_scalars_show_their_value_and_0d_arrays_their_dtype():
    """A numpy scalar is a value: its repr shows it; a 0-d array is an array, shown as
    int32[] as inspect shows it, and counted as one parameter."""
    assert ct.pformat([np.float32(1.5), np.array(2, "int32")]) == (
        f"[{np.float32(1.5)!r}, int32[]]  # 1 param, 4 B"
    )


def test_ints_too_long_to_print_show_their_size():
    """Ints past Python's int-to-str limit, as leaves, keys or in kept values, show their size."""
    huge = 10**5000
    assert ct.pformat({"x": huge, huge: [-huge], "t": (huge,)}) == (
        "{\n"
        "  'x': int(16610 bits, crc32 c6d23d8d),\n"
        "  int(16610 bits, crc32 c6d23d8d): [-int(16610 bits, crc32 c6d23d8d)],\n"
        "  't': (int(16610 bits, crc32 c6d23d8d),),\n"
        "}"
    )


def test_pformat_imports_no_array_library():
    """Rendering arrays by duck typing imports neither jax nor torch."""
    code = (
        "import sys, containers as ct, numpy as np\n"
        "text = ct.pformat([np.zeros(2, 'float32')])\n"
        "assert text == '[float32[2]]  # 2 params, 8 B', text\n"
        "print(sorted(m for m in ('jax', 'torch') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]"


# --- cycles ----------------------------------------------------------------------------------


def test_a_list_that_contains_itself_is_a_structure_error():
    """l = [1]; l.append(l): a StructureError naming the place, not a MemoryError."""
    loop: list[Any] = [1]
    loop.append(loop)
    with pytest.raises(ct.StructureError, match=cycle_message("'[1]'", "the root")) as info:
        ct.pformat(loop)
    assert info.value.path == (ct.IndexKey(1),)


def test_a_cycle_through_a_tuple_and_a_dict_names_both_places():
    """A dict reached again through a tuple inside it: both paths are named."""
    inner: dict[str, Any] = {}
    inner["t"] = (1, [inner])
    with pytest.raises(
        ct.StructureError, match=cycle_message("\"['x']['t'][1][0]\"", "\"['x']\"")
    ):
        ct.pformat({"x": inner})


def test_a_cycle_through_a_mutable_container():
    """A non-frozen container that contains itself names its field's path."""
    node = Node(1)
    node.next = [node]
    with pytest.raises(ct.StructureError, match=cycle_message("'.next[0]'", "the root")):
        ct.pformat(node)


def test_shared_objects_are_not_cycles_and_show_once():
    """An object reached twice, but never inside itself, renders once, then as a mark
    naming where it is shown."""
    shared = [1, 2]
    assert ct.pformat({"a": shared, "b": shared}) == (
        "{\n  'a': [1, 2],\n  'b': <same as ['a']>,\n}"
    )


# --- depth -----------------------------------------------------------------------------------


def test_a_list_100000_deep_renders():
    """A list nested 100,000 deep renders (no RecursionError, no MemoryError), with two
    lines per level and the indentation capped."""
    text = ct.pformat(nested_lists(100_000))
    lines = text.split("\n")
    assert len(lines) == 2 * 100_000 - 1  # the innermost [] takes one line
    assert max(map(len, lines)) == 2 * MAX_INDENT_DEPTH + len("[],")


def test_output_grows_linearly_with_depth():
    """Twice as deep is twice as long, past the indentation cap (it used to be
    quadratic: 2,005,001 characters at depth 1,000)."""
    small, large = (len(ct.pformat(nested_lists(n))) for n in (1_000, 2_000))
    assert large <= 2.02 * small
    assert small < 2 * 1_000 * (2 * MAX_INDENT_DEPTH + 3)


def test_shallow_trees_are_indented_by_their_depth():
    """Below the cap every level adds indent spaces."""
    lines = ct.pformat(nested_lists(4)).split("\n")
    assert lines == ["[", "  [", "    [", "      [],", "    ],", "  ],", "]"]
