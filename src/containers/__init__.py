"""containers: make your own classes traversable.

One decorator gives a class what JAX pytrees, Functors.jl, Nx.Container, treevalue
and Flax NNX give theirs: structure-preserving maps, flatten/unflatten with key paths,
and the Container protocol. See the docs/ folder for the tutorial.
"""

from containers import composite as composite
from containers import filters as filters
from containers._access import getpath as getpath
from containers._access import haspath as haspath
from containers._access import setpath as setpath
from containers._decorator import container as container
from containers._decorator import field as field
from containers._decorator import register as register
from containers._decorator import register_node as register_node
from containers._decorator import spec as spec
from containers._display import pformat as pformat
from containers._display import pprint as pprint
from containers._engine._walks import CachedWalk as CachedWalk
from containers._engine._walks import CollectWalk as CollectWalk
from containers._engine._walks import DefaultWalk as DefaultWalk
from containers._engine._walks import ExcludeWalk as ExcludeWalk
from containers._engine._walks import StructuralWalk as StructuralWalk
from containers._engine._walks import Walk as Walk
from containers._engine._walks import execute as execute
from containers._errors import ContainerDefinitionError as ContainerDefinitionError
from containers._errors import ContainersError as ContainersError
from containers._errors import FormatError as FormatError
from containers._errors import IntegrityError as IntegrityError
from containers._errors import LimitError as LimitError
from containers._errors import SchemaError as SchemaError
from containers._errors import SerializationError as SerializationError
from containers._errors import StructureError as StructureError
from containers._errors import StructureKeyError as StructureKeyError
from containers._errors import StructureTypeError as StructureTypeError
from containers._errors import UnknownTypeError as UnknownTypeError
from containers._errors import VersionError as VersionError
from containers._flatten import Structure as Structure
from containers._flatten import flatten as flatten
from containers._flatten import flatten_with_path as flatten_with_path
from containers._flatten import leaves as leaves
from containers._flatten import leaves_with_path as leaves_with_path
from containers._flatten import structure as structure
from containers._flatten import unflatten as unflatten
from containers._fmap import fcollect as fcollect
from containers._fmap import fmap as fmap
from containers._fmap import fmap_with_path as fmap_with_path
from containers._fmap import fmapstructure as fmapstructure
from containers._html import html as html
from containers._notebook import display as display
from containers._notebook import load_ipython_extension as load_ipython_extension
from containers._notebook import notebook as notebook
from containers._notebook import unload_ipython_extension as unload_ipython_extension
from containers._parallel_dask import compute as compute
from containers._parallel_dask import persist as persist
from containers._paths import AttrKey as AttrKey
from containers._paths import DictKey as DictKey
from containers._paths import IndexKey as IndexKey
from containers._paths import keystr as keystr
from containers._protocol import Container as Container
from containers._protocol import LazyContainer as LazyContainer
from containers._protocol import Template as Template
from containers._protocol import children as children
from containers._protocol import functor as functor
from containers._protocol import isleaf as isleaf
from containers._protocol import lazy_traverse as lazy_traverse
from containers._protocol import reduce as reduce
from containers._protocol import traverse as traverse
from containers._serialize import CheckpointManager as CheckpointManager
from containers._serialize import LazyArray as LazyArray
from containers._serialize import Limits as Limits
from containers._serialize import deserialize as deserialize
from containers._serialize import inspect as inspect
from containers._serialize import load as load
from containers._serialize import materialize as materialize
from containers._serialize import save as save
from containers._serialize import serialize as serialize
from containers._shape import assert_same_structure as assert_same_structure
from containers._shape import broadcast as broadcast
from containers._shape import diff as diff
from containers._shape import transpose as transpose
from containers._split import MISSING as MISSING
from containers._split import combine as combine
from containers._split import merge as merge
from containers._split import partition as partition
from containers._split import split as split
from containers._split import state as state
from containers._tree import Tree as Tree
from containers._treelize import rise as rise
from containers._treelize import subside as subside
from containers._treelize import treelize as treelize

__version__ = "0.1.0"


# Plain sorted() order, as tests/test_public_api.py checks (ruff would put MISSING first).
__all__ = [  # noqa: RUF022
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

# Public classes and functions say they come from `containers` (reprs, tracebacks,
# pickles of classes, docs), wherever they are defined.
for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type) or hasattr(_obj, "__code__"):
        _obj.__module__ = "containers"
del _name, _obj
