"""containers._scan's single passes held to their plain twins on texts made to hit
their edges: the tree span and the counts that bound_json checks first (block
boundaries, brackets and quotes everywhere, str and ASCII bytes), and the tree's
array records reusing the layout's name objects only where they are equal."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import containers as ct
from containers._serialize import _format, _layout_fast, _recparse, _strictjson

scanned = pytest.mark.skipif(_layout_fast._scan is None, reason="containers._scan is not built")

_AT = '"containers.tree":"'
_PIECES = st.sampled_from(["]", '"', '\\"', "\\", ']"', "[", "{", ",", ":", "a", "x" * 300, "é"])


@scanned
@settings(max_examples=400, deadline=None)
@given(
    before=st.lists(_PIECES, max_size=20),
    inside=st.lists(_PIECES, max_size=60),
    after=st.lists(_PIECES, max_size=20),
    at=st.booleans(),
)
def test_tree_span_and_counts_agree_with_their_plain_twins(before, inside, after, at):
    """tree_span and counts (blocks of bytes without a branch) give their plain twins'
    answers on any text, the tree's opening anywhere or nowhere, a `]"` and quotes
    escaped or not in any block, for a str and for its bytes when it is ASCII."""
    text = "".join(before) + (_AT if at else "") + "".join(inside) + "".join(after)
    scan = _layout_fast._scan
    span = _layout_fast._tree_span_plain(text)
    forms: list[str | bytes] = [text] + ([text.encode()] if text.isascii() else [])
    for form in forms:
        got = scan.tree_span(form)
        assert got is None if not text.isascii() else got == span
    n = len(text)
    for a, b in [span, (0, 0), (n // 3, n // 2), (n, n)]:
        plain = _strictjson._counts_plain(text, a, b)
        for form in forms:
            got = scan.counts(form, a, b)
            if got is None:
                assert not text.isascii()
                continue
            opens, commas, colons, quotes = got
            assert (opens, commas, colons, quotes // 2) == plain


_NAME_CHARS = st.sampled_from(["a", "b", "'", '"', "\\", "/", "\n", "\x7f", "é", "[", "]", "0"])


@scanned
@settings(max_examples=200, deadline=None)
@given(
    keys=st.lists(st.text(_NAME_CHARS, max_size=6), min_size=1, max_size=8, unique=True),
    others=st.lists(st.text(_NAME_CHARS, max_size=12), max_size=8),
    order=st.randoms(),
)
def test_scanned_records_reuse_only_equal_names(keys, others, order):
    """The C parse of a tree given the file's tensor names (``known``) makes the same
    records as without them, whatever names it is handed (the layout's in file order,
    reordered, names holding quotes, backslashes, control characters, any text that
    may stand in the tree's text as it is): it takes a known name's object only where
    the tree names that very string, and then every name of a file in order is the
    layout's object."""
    limits = ct.Limits()
    data = ct.serialize({k: np.zeros(1, np.float32) for k in keys})
    layout = _format.parse_header(
        data[8 : 8 + int.from_bytes(data[:8], "little")], len(data), limits
    )
    tree = layout.metadata[_format.TREE_KEY]
    alone = _recparse._scanned_records(tree, limits, False)
    if alone is None:
        return
    shuffled = list(layout.tensors) + others
    order.shuffle(shuffled)
    for known in (layout.tensors, dict.fromkeys(shuffled), dict.fromkeys(others), {}):
        got = _recparse._scanned_records(tree, limits, False, known)
        assert got is not None and repr(got[:4]) == repr(alone[:4])
    got = _recparse._scanned_records(tree, limits, False, layout.tensors)
    assert got is not None
    if got.names == list(layout.tensors):
        plain = all(" " <= c <= "~" and c not in '"\\' for k in layout.tensors for c in k)
        if plain:
            assert all(a is b for a, b in zip(got.names, layout.tensors))


@ct.container(children=["w"], keep=["act", "scale"], name="tests.scan.Unit")
class Unit:
    w: np.ndarray
    act: str = "relu"
    scale: float = 1.0


@scanned
def test_scanned_records_share_a_repeated_records_objects():
    """The C parse gives a class record or scalar record whose text repeats the last
    one's that same record (a list of containers: one C record and one kept str for
    all), which the plain parse gives as equal records; a different text breaks the
    run."""
    limits = ct.Limits()
    units = [Unit(np.zeros(1, np.float32)) for _ in range(3)]
    units += [Unit(np.zeros(1, np.float32), "tanh"), Unit(np.zeros(1, np.float32), scale=2.0)]
    data = ct.serialize(units)
    layout = _format.parse_header(
        data[8 : 8 + int.from_bytes(data[:8], "little")], len(data), limits
    )
    tree = layout.metadata[_format.TREE_KEY]
    got = _recparse._scanned_records(tree, limits)
    assert got is not None
    classes = [r for r in got.recs if r.tag == "C"]
    assert len(classes) == 5 and all(r is classes[0] for r in classes)
    acts = [got.recs[j] for j in range(len(got.recs)) if got.recs[j - 2].tag == "C"]
    assert [r.data for r in acts] == ["relu"] * 3 + ["tanh", "relu"]
    assert acts[0] is acts[1] is acts[2] and acts[3] is not acts[4]
    items = _strictjson.json_array_chunks(tree, "the tree")
    plain = _recparse._records_usual((r for chunk in items for r in chunk), limits)
    assert plain is not None and repr(plain[:4]) == repr(got[:4])
    assert [u.act for u in ct.deserialize(data)] == ["relu"] * 3 + ["tanh", "relu"]
