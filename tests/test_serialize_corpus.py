"""The corpus of bad files (tests/corpus/, written by make_corpus.py): each raises exactly
its expected error through load, load(mmap=True), deserialize and inspect, imports
nothing, and the checked-in files are what the generator writes."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import containers as ct
from containers.filters import PathContains

CORPUS = Path(__file__).parent / "corpus"
EXPECTED: dict[str, dict[str, Any]] = json.loads((CORPUS / "expected.json").read_text())


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("make_corpus", CORPUS / "make_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_checked_in_corpus_is_what_the_generator_writes():
    """Every case of make_corpus.py is on disk, byte for byte, with its expectation."""
    cases = _generator().cases()
    assert sorted(name for name, _, _ in cases) == sorted(EXPECTED)
    on_disk = sorted(p.stem for p in (CORPUS / "files").glob("*.safetensors"))
    assert on_disk == sorted(EXPECTED)
    for name, data, expectation in cases:
        assert (CORPUS / "files" / f"{name}.safetensors").read_bytes() == data, name
        assert EXPECTED[name] == expectation, name


def _kwargs(expectation: dict[str, Any]) -> dict[str, Any]:
    kw = dict(expectation.get("kwargs", {}))
    if "limits" in kw:
        kw["limits"] = ct.Limits(**kw["limits"])
    if "expect" in kw:
        kw["expect"] = {"list": list, "dict": dict}[kw["expect"]]
    return kw


def _outcome(fn: Any, want: dict[str, Any]) -> None:
    if want["error"] == "ok":
        fn()
        return
    cls = getattr(ct, want["error"])
    with pytest.raises(cls, match=want["match"]) as info:
        fn()
    assert type(info.value) is cls  # exactly that class, not a subclass or a sibling


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_bad_file_raises_its_error_on_every_path(name):
    """load, load(mmap=True), deserialize and inspect agree on each file; nothing is imported."""
    want = EXPECTED[name]
    path = CORPUS / "files" / f"{name}.safetensors"
    kw = _kwargs(want)
    modules = set(sys.modules)
    _outcome(lambda: ct.load(path, **kw), want)
    _outcome(lambda: ct.load(path, mmap=True, **kw), want)
    _outcome(lambda: ct.deserialize(path.read_bytes(), **kw), want)
    if "unverified" in want:
        _outcome(lambda: ct.load(path, verify=False, **kw), want["unverified"])
        _outcome(lambda: ct.deserialize(path.read_bytes(), verify=False, **kw), want["unverified"])
    limits = kw.get("limits")
    _outcome(lambda: ct.inspect(path, limits=limits), want.get("inspect", want))
    assert set(sys.modules) == modules


def test_type_tag_lookalikes_load_as_plain_data():
    """Kept strings that look like type tags stay strings; nothing interprets them."""
    out = ct.load(CORPUS / "files" / "25-type-tag-lookalikes.safetensors")
    assert out == {"__class__": "os.system", "y": "!!python/object:os.system"}


def test_zero_size_tensor_sharing_an_offset_loads_independent_arrays():
    """A zero-size tensor at the same offset as a real one is valid; shapes are kept."""
    out = ct.load(CORPUS / "files" / "19-zero-size-shares-offset.safetensors")
    assert out["e"].shape == (0, 4) and out["w"].tolist() == [1.0, 2.0, 3.0]
    out["w"][0] = 9.0
    assert out["e"].size == 0


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_bad_file_raises_its_error_through_a_lazy_load(name):
    """load(lazy=True) then materialize gives each corpus file's outcome (header and tree
    errors at the lazy load, data errors when the arrays are read); nothing is imported."""
    want = EXPECTED[name]
    path = CORPUS / "files" / f"{name}.safetensors"
    kw = _kwargs(want)
    modules = set(sys.modules)
    _outcome(lambda: ct.materialize(ct.load(path, lazy=True, **kw)), want)
    if "unverified" in want:
        _outcome(
            lambda: ct.materialize(ct.load(path, lazy=True, verify=False, **kw)),
            want["unverified"],
        )
    assert set(sys.modules) == modules


# --- bad sharded checkpoints (tests/corpus/sharded/, ISSUE 29) --------------------------

SHARDED = CORPUS / "sharded"
SHARDED_EXPECTED: dict[str, dict[str, Any]] = json.loads(
    (CORPUS / "expected_sharded.json").read_text()
)
INDEX = "model.safetensors.index.json"


def test_checked_in_sharded_corpus_is_what_the_generator_writes():
    """Every sharded case of make_corpus.py is on disk, file for file and link for link."""
    generator = _generator()
    cases = generator.sharded_cases()
    assert sorted(name for name, _, _ in cases) == sorted(SHARDED_EXPECTED)
    assert sorted(p.name for p in SHARDED.iterdir() if p.is_dir()) == sorted(SHARDED_EXPECTED)
    assert (SHARDED / "outside.safetensors").read_bytes() == generator.OUTSIDE
    for name, files, expectation in cases:
        assert sorted(p.name for p in (SHARDED / name).iterdir()) == sorted(files), name
        for fname, data in files.items():
            path = SHARDED / name / fname
            if isinstance(data, generator.Link):
                assert path.is_symlink() and os.readlink(path) == str(data), (name, fname)
            else:
                assert not path.is_symlink() and path.read_bytes() == data, (name, fname)
        assert SHARDED_EXPECTED[name] == expectation, name


@pytest.mark.parametrize("name", sorted(SHARDED_EXPECTED))
def test_each_bad_sharded_checkpoint_is_refused_naming_its_index(name):
    """load (of the directory and of the index, whole, lazy, partial) and inspect raise the
    case's SerializationError, naming the index; nothing is imported, and the file
    outside the checkpoint's directory is never what loads."""
    want = SHARDED_EXPECTED[name]
    directory = SHARDED / name
    index = re.escape(str(directory / INDEX))
    cls = getattr(ct, want["error"])
    modules = set(sys.modules)
    for how in (directory, directory / INDEX):
        for call in (
            lambda how=how: ct.load(how),
            lambda how=how: ct.load(how, lazy=True),
            lambda how=how: ct.load(how, where=PathContains("a")),
            lambda how=how: ct.inspect(how),
        ):
            with pytest.raises(cls, match=rf"^{index}: .*{want['match']}") as info:
                call()
            assert type(info.value) is cls
    assert set(sys.modules) == modules
