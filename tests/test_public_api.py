"""The public surface: the names `containers` exports, where they say they live, and the
builtin exceptions its errors subclass (SPEC.md section 10)."""

from __future__ import annotations

import inspect
import re

import pytest

import containers as ct

EXPECTED_ALL = [
    "AttrKey",
    "CachedWalk",
    "CheckpointManager",
    "CollectWalk",
    "Container",
    "ContainerDefinitionError",
    "ContainersError",
    "DefaultWalk",
    "DictKey",
    "ExcludeWalk",
    "FormatError",
    "IndexKey",
    "IntegrityError",
    "LazyArray",
    "LazyContainer",
    "LimitError",
    "Limits",
    "MISSING",
    "SchemaError",
    "SerializationError",
    "StructuralWalk",
    "Structure",
    "StructureError",
    "StructureKeyError",
    "StructureTypeError",
    "Template",
    "Tree",
    "UnknownTypeError",
    "VersionError",
    "Walk",
    "assert_same_structure",
    "broadcast",
    "children",
    "combine",
    "composite",
    "compute",
    "container",
    "deserialize",
    "diff",
    "display",
    "execute",
    "fcollect",
    "field",
    "filters",
    "flatten",
    "flatten_with_path",
    "fmap",
    "fmap_with_path",
    "fmapstructure",
    "functor",
    "getpath",
    "haspath",
    "html",
    "inspect",
    "isleaf",
    "keystr",
    "lazy_traverse",
    "leaves",
    "leaves_with_path",
    "load",
    "load_ipython_extension",
    "materialize",
    "merge",
    "notebook",
    "partition",
    "persist",
    "pformat",
    "pprint",
    "reduce",
    "register",
    "register_node",
    "rise",
    "save",
    "serialize",
    "setpath",
    "spec",
    "split",
    "state",
    "structure",
    "subside",
    "transpose",
    "traverse",
    "treelize",
    "unflatten",
    "unload_ipython_extension",
]

PUBLIC_CLASSES = [name for name in EXPECTED_ALL if inspect.isclass(getattr(ct, name))]
PUBLIC_FUNCTIONS = [name for name in EXPECTED_ALL if inspect.isfunction(getattr(ct, name))]


def test_all_is_the_expected_sorted_list():
    """`ct.__all__` is exactly the documented list of public names, sorted."""
    assert ct.__all__ == EXPECTED_ALL
    assert sorted(EXPECTED_ALL) == EXPECTED_ALL


def test_every_name_in_all_is_importable():
    """Every name in `__all__` is an attribute of the package."""
    missing = [name for name in ct.__all__ if not hasattr(ct, name)]
    assert missing == []


def test_no_public_name_is_left_out_of_all():
    """Every public attribute is in `__all__`, except submodules that imports attach."""
    public = {
        name
        for name, value in vars(ct).items()
        if not name.startswith("_")
        and (name in ("composite", "filters") or not inspect.ismodule(value))
    }
    assert public == set(EXPECTED_ALL)


def test_version_is_a_string():
    """`ct.__version__` is a dotted version string."""
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", ct.__version__)


def test_composite_is_the_composite_module():
    """`ct.composite` is the `containers.composite` module."""
    assert inspect.ismodule(ct.composite)
    assert ct.composite.__name__ == "containers.composite"


def test_every_public_name_is_a_class_a_function_composite_or_tree():
    """The public names split into classes, functions, two modules, Tree and MISSING."""
    others = ["composite", "filters", "Tree", "MISSING"]
    assert sorted([*PUBLIC_CLASSES, *PUBLIC_FUNCTIONS, *others]) == EXPECTED_ALL


def test_filters_is_the_filters_module_and_missing_a_sentinel():
    """`ct.filters` is `containers.filters`; `ct.MISSING` is a one-member enum's member."""
    assert inspect.ismodule(ct.filters)
    assert ct.filters.__name__ == "containers.filters"
    assert list(type(ct.MISSING)) == [ct.MISSING]
    assert repr(ct.MISSING) == "ct.MISSING"


@pytest.mark.parametrize("name", PUBLIC_CLASSES)
def test_public_classes_live_in_containers(name):
    """Every public class says it comes from `containers`."""
    assert getattr(ct, name).__module__ == "containers"


def test_public_functions_live_in_containers():
    """Every public function says it comes from `containers`."""
    wrong = {name: getattr(ct, name).__module__ for name in PUBLIC_FUNCTIONS}
    assert {name: mod for name, mod in wrong.items() if mod != "containers"} == {}


def test_container_definition_error_is_a_type_error():
    """ContainerDefinitionError is a ContainersError and a TypeError."""
    assert issubclass(ct.ContainerDefinitionError, ct.ContainersError)
    assert issubclass(ct.ContainerDefinitionError, TypeError)


def test_structure_error_is_a_value_error_with_a_path():
    """StructureError is a ContainersError and a ValueError, and carries `.path`."""
    assert issubclass(ct.StructureError, ct.ContainersError)
    assert issubclass(ct.StructureError, ValueError)
    err = ct.StructureError("trees differ", (ct.DictKey("a"),))
    assert err.path == (ct.DictKey("a"),)
    assert str(err) == "trees differ"
    assert ct.StructureError("no place").path is None


def test_treelize_errors_are_structure_errors_and_the_builtin_treevalue_raises():
    """StructureKeyError is a KeyError and StructureTypeError a TypeError (what treevalue
    users catch), both StructureErrors, public as containers.*."""
    assert issubclass(ct.StructureKeyError, ct.StructureError)
    assert issubclass(ct.StructureKeyError, KeyError)
    assert issubclass(ct.StructureTypeError, ct.StructureError)
    assert issubclass(ct.StructureTypeError, TypeError)
    with pytest.raises(ct.StructureKeyError, match="different keys at the root") as info:
        ct.treelize()(lambda a, b: a)({"a": 1}, {"b": 2})
    assert str(info.value).startswith("treelize: the tree arguments have different keys")
    assert ct.StructureKeyError.__module__ == "containers"


def test_containers_error_is_an_exception():
    """ContainersError is the base of the hierarchy and an Exception."""
    assert issubclass(ct.ContainersError, Exception)


@pytest.mark.parametrize(
    "name",
    [
        "SerializationError",
        "FormatError",
        "LimitError",
        "IntegrityError",
        "UnknownTypeError",
        "VersionError",
        "SchemaError",
    ],
)
def test_serialization_errors_are_value_errors(name):
    """SerializationError and its subclasses are ContainersErrors and ValueErrors."""
    cls = getattr(ct, name)
    assert issubclass(cls, ct.SerializationError)
    assert issubclass(cls, ct.ContainersError)
    assert issubclass(cls, ValueError)


def test_errors_are_distinct_branches():
    """A StructureError is not a declaration error, and neither is a serialization error."""
    assert not issubclass(ct.StructureError, ct.ContainerDefinitionError)
    assert not issubclass(ct.SerializationError, ct.StructureError)
    assert not issubclass(ct.ContainerDefinitionError, ValueError)


def _not_a_container():
    class Plain:
        pass

    return ct.spec(Plain)


def _bad_keystr():
    return ct.getpath({"a": 1}, "a")


def _non_key_in_path():
    return ct.getpath({"a": 1}, ("a",))


def _keystr_of_a_string():
    return ct.keystr(("a",))


def _unflatten_arguments_swapped():
    return ct.unflatten([1], ct.structure([0]))


def _transpose_of_a_list():
    return ct.transpose([0], ct.structure([0]), [[1]])


def _functor_rebuild_missing_child():
    return ct.functor({"a": 1, "b": 2})[1]({"a": 1})


def _field_tags_string():
    return ct.field(tags="param")


# Each of these raises a builtin error today; the base class ContainersError ("the base",
# SPEC.md section 10; "Base class of every error raised by containers") does not catch it.
ESCAPING_ERRORS = [
    (_not_a_container, "spec: 'Plain' is not a declared container."),
    (_bad_keystr, "cannot parse key path 'a' at position 0: expected '.' or '['."),
    (_non_key_in_path, "got the element 'a'."),
    (_keystr_of_a_string, "keystr: 'a' is not a key."),
    (_unflatten_arguments_swapped, "unflatten: the first argument must be a Structure"),
    (_transpose_of_a_list, "transpose: outer must be a Structure (from ct.structure), got list."),
    (_functor_rebuild_missing_child, "functor rebuild of a dict: the new children lack 'b'."),
    (_field_tags_string, "field(tags=...) takes a tuple of tags, got 'param'"),
]


@pytest.mark.parametrize(
    ("call", "message"),
    ESCAPING_ERRORS,
    ids=[call.__name__.lstrip("_") for call, _ in ESCAPING_ERRORS],
)
def test_every_error_is_a_containers_error(call, message):
    """Errors raised by the library's entry points can be caught as ContainersError."""
    with pytest.raises(ct.ContainersError, match=re.escape(message)):
        call()
