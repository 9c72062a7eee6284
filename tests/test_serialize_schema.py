"""Schema evolution (SPEC section 8): files written by real old declarations, in a child
interpreter that declares the old class under the same registered name, load into the
new class through defaults, removed=, renamed=, migrations=, or fail with SchemaError /
VersionError naming class, field and path, every problem at once."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import containers as ct

OLD_CODE = """
import sys
import numpy as np
import containers as ct

out = sys.argv[1]

@ct.container(name="schema.AddedDefault")
class AddedDefault:
    w: np.ndarray

@ct.container(name="schema.AddedRequired")
class AddedRequired:
    w: np.ndarray

@ct.container(children=["w"], name="schema.Removed")
class Removed:
    w: np.ndarray
    dropout: float = 0.1

@ct.container(name="schema.Unknown")
class Unknown:
    w: np.ndarray
    extra: np.ndarray

@ct.container(children=["proj"], name="schema.Renamed")
class Renamed:
    proj: np.ndarray
    act: str = "relu"

@ct.container(name="schema.Newer", version=3)
class Newer:
    w: np.ndarray

@ct.container(children=["w"], name="schema.Chain")
class Chain:
    w: np.ndarray
    lr: float = 0.1

@ct.container(name="schema.Gap")
class Gap:
    w: np.ndarray

@ct.container(name="schema.Broken")
class Broken:
    w: np.ndarray

@ct.container(name="schema.MigrationAdds")
class MigrationAdds:
    w: np.ndarray

w = np.arange(3.0)
trees = {
    "added_default": AddedDefault(w),
    "added_required": AddedRequired(w),
    "removed": Removed(w, 0.5),
    "unknown": Unknown(w, np.ones(1)),
    "renamed": Renamed(w, "gelu"),
    "newer": Newer(w),
    "chain": Chain(w, 0.01),
    "gap": Gap(w),
    "broken": Broken(w),
    "migration_adds": MigrationAdds(w),
    "many": {"a": [Unknown(w, w * 2), AddedRequired(w)], "b": AddedRequired(w)},
}
for name, tree in trees.items():
    ct.save(f"{out}/{name}.safetensors", tree)
"""


@pytest.fixture(scope="module")
def old(tmp_path_factory: Any) -> Path:
    """The directory of files written by the old declarations, in a child interpreter."""
    out = tmp_path_factory.mktemp("old")
    subprocess.run([sys.executable, "-c", OLD_CODE, str(out)], check=True, timeout=120)
    return out


# --- the new declarations, under the same names --------------------------------------


@ct.container(children=["w", "b"], keep=["scale"], name="schema.AddedDefault")
class AddedDefault:
    w: np.ndarray
    b: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(2))
    scale: float = 2.0


@ct.container(name="schema.AddedRequired")
class AddedRequired:
    w: np.ndarray
    b: np.ndarray


@ct.container(name="schema.Removed", removed=["dropout"])
class Removed:
    w: np.ndarray


@ct.container(name="schema.Unknown")
class Unknown:
    w: np.ndarray


@ct.container(
    children=["head"], name="schema.Renamed", renamed={"proj": "head", "act": "activation"}
)
class Renamed:
    head: np.ndarray
    activation: str = "relu"


@ct.container(name="schema.Newer", version=2, migrations={1: lambda c, m: (c, m)})
class Newer:
    w: np.ndarray


CALLS: list[int] = []


def _one_to_two(children: dict[str, Any], meta: dict[str, Any]) -> tuple[dict, dict]:
    CALLS.append(1)
    return children, {**meta, "momentum": 0.9}


def _two_to_three(children: dict[str, Any], meta: dict[str, Any]) -> tuple[dict, dict]:
    CALLS.append(2)
    assert meta["momentum"] == 0.9  # the first step ran before this one
    return {"weight": children["w"]}, {**meta, "lr": meta["lr"] * 10}


@ct.container(
    children=["weight"],
    name="schema.Chain",
    version=3,
    migrations={1: _one_to_two, 2: _two_to_three},
)
class Chain:
    weight: np.ndarray
    lr: float = 0.1
    momentum: float = 0.0


@ct.container(name="schema.Gap", version=3, migrations={2: lambda c, m: (c, m)})
class Gap:
    w: np.ndarray


def _broken(children: dict[str, Any], meta: dict[str, Any]) -> Any:
    return children["missing"], meta


@ct.container(name="schema.Broken", version=2, migrations={1: _broken})
class Broken:
    w: np.ndarray


@ct.container(
    name="schema.MigrationAdds", version=2, migrations={1: lambda c, m: ({**c, "junk": 1}, m)}
)
class MigrationAdds:
    w: np.ndarray


# --- tests ---------------------------------------------------------------------------


def test_an_added_field_with_a_default_loads_with_the_default(old):
    """Fields added since the file was written get their default (or a fresh factory value)."""
    out = ct.load(old / "added_default.safetensors", expect=AddedDefault)
    assert np.array_equal(out.w, np.arange(3.0))
    assert np.array_equal(out.b, np.zeros(2)) and out.scale == 2.0


def test_an_added_field_without_a_default_is_a_schema_error(old):
    """A required field the file lacks raises SchemaError naming class, field and path."""
    with pytest.raises(
        ct.SchemaError,
        match=r"missing field AddedRequired\.b \(file version 1, class version 1\) at the root: "
        r"give it a default, or add a migration",
    ):
        ct.load(old / "added_required.safetensors")


def test_an_unknown_field_a_migration_returned_is_blamed_on_the_migration(old):
    """A field the file does not hold, added by a migration, is the migration's error,
    not the file's (removed= would not help)."""
    with pytest.raises(
        ct.SchemaError,
        match=r"the migrations of MigrationAdds from version 1 to 2 returned an unknown "
        r"field 'junk' at the root: a migration must return the fields of the class",
    ):
        ct.load(old / "migration_adds.safetensors")


def test_removed_fields_are_dropped_and_unknown_fields_are_errors(old):
    """removed= drops a field silently; a field that is neither kept nor removed raises."""
    out = ct.load(old / "removed.safetensors")
    assert type(out) is Removed and np.array_equal(out.w, np.arange(3.0))
    with pytest.raises(
        ct.SchemaError,
        match=r"unknown field 'extra' in Unknown \(file version 1, class version 1\) at the root: "
        r"add it to removed= to drop it, or to renamed=",
    ):
        ct.load(old / "unknown.safetensors")


def test_renamed_fields_load_under_their_new_names(old):
    """renamed= moves a child and a kept value to their new field names."""
    out = ct.load(old / "renamed.safetensors", expect=Renamed)
    assert np.array_equal(out.head, np.arange(3.0)) and out.activation == "gelu"


def test_a_file_newer_than_the_class_is_a_version_error(old):
    """Version 3 data cannot be loaded by a version 2 class."""
    with pytest.raises(
        ct.VersionError,
        match=r"Newer at the root was written with version 3, newer than this class's version 2",
    ):
        ct.load(old / "newer.safetensors")


def test_migrations_run_in_order(old):
    """A version 1 file goes through migrations 1 -> 2 -> 3, in that order."""
    CALLS.clear()
    out = ct.load(old / "chain.safetensors", expect=Chain)
    assert CALLS == [1, 2]
    assert np.array_equal(out.weight, np.arange(3.0))
    assert out.lr == pytest.approx(0.1) and out.momentum == 0.9


def test_a_gap_in_the_migrations_is_a_version_error(old):
    """A missing step in the chain names the versions and how to fix it."""
    with pytest.raises(
        ct.VersionError,
        match=r"Gap at the root was written with version 1; this class is version 3 but has no "
        r"migration from version 1 to 2\. Add migrations=\{1: fn\}",
    ):
        ct.load(old / "gap.safetensors")


def test_a_failing_migration_is_a_schema_error(old):
    """A migration that raises is reported with the class, versions and path."""
    with pytest.raises(
        ct.SchemaError,
        match=r"the migration of Broken from version 1 to 2 raised KeyError: 'missing' \(at the root\)",
    ):
        ct.load(old / "broken.safetensors")


def test_every_problem_is_reported_at_once(old):
    """Three bad nodes give one SchemaError: alike problems grouped with a count and one
    path, each with its path in the problems attribute."""
    with pytest.raises(ct.SchemaError, match=r"3 problems") as info:
        ct.load(old / "many.safetensors")
    message = str(info.value)
    assert (
        "unknown field 'extra' in Unknown (file version 1, class version 1) at ['a'][0]" in message
    )
    assert (
        "missing field AddedRequired.b (file version 1, class version 1), 2 times, e.g. at "
        "['a'][1]" in message
    )
    problems = info.value.problems
    assert len(problems) == 3
    assert any("AddedRequired.b (file version 1, class version 1) at ['b']" in p for p in problems)


def test_inspect_shows_old_files_without_their_classes(old):
    """inspect reads the header only: names and versions, no class needed."""
    text = str(ct.inspect(old / "chain.safetensors"))
    assert "(root): schema.Chain v1  kept: lr" in text
    assert ".w: float64[3]  24 B" in text


def test_migration_returning_garbage_is_a_schema_error():
    """A migration must return a (children, metadata) pair of dicts."""

    @ct.container(name="schema.Garbage.v1")
    class V1:
        w: int

    data = ct.serialize(V1(1))

    @ct.container(name="schema.Garbage.v2", version=2, migrations={1: lambda c, m: None})
    class V2:
        w: int

    swapped = data.replace(b"schema.Garbage.v1", b"schema.Garbage.v2")
    with pytest.raises(
        ct.SchemaError,
        match=r"returned None \(at the root\); it must return a \(children, metadata\) pair",
    ):
        ct.deserialize(swapped)


def test_an_added_field_whose_default_takes_self_asks_for_a_migration():
    """An added attrs field with Factory(takes_self=True) has a default, but not one a
    load can compute (there is no object yet): the message says so instead of asking
    for a default."""
    import attr

    @ct.container(children=["w"], name="schema.TakesSelf.v1")
    @attr.define
    class V1:
        w: np.ndarray

    data = ct.serialize(V1(np.ones(2)))

    @ct.container(children=["w"], name="schema.TakesSelf.v2")
    @attr.define
    class V2:
        w: np.ndarray
        n: int = attr.Factory(lambda self: len(self.w), takes_self=True)

    with pytest.raises(
        ct.SchemaError,
        match=r"missing field V2\.n \(file version 1, class version 1\) at the root: its "
        r"default is an attrs Factory\(takes_self=True\), which needs the object before it "
        r"is built; add a migration that fills it$",
    ):
        ct.deserialize(data.replace(b"schema.TakesSelf.v1", b"schema.TakesSelf.v2"))


def test_a_failing_reset_factory_is_a_schema_error(failing_factory: Callable[[str], Any]):
    """User code that runs while rebuilding (an attrs factory taking self) is wrapped."""
    data = ct.serialize(failing_factory("schema.Factory"))  # built without running it
    with pytest.raises(
        ct.SchemaError, match=r"rebuilding Factory at the root failed: RuntimeError: no\."
    ):
        ct.deserialize(data)
