# fmap's compiled child loops, flatten's walk, unflatten's rebuild, a Structure's key
# paths and interop's rebuild (_speedups*.c); optional, see _loops._load_speedups.
from array import array
from collections.abc import Callable, Iterable, Sequence
from typing import Any, overload

UNROLLED: int

@overload
def flatten(
    x: Any,
    kind: Any,
    leaf_types: set[type] | frozenset[type],
    records: list[Any] | None,
    context: tuple[Any, ...],
    /,
) -> list[Any]: ...
@overload
def flatten(
    x: Any,
    kind: Any,
    leaf_types: set[type] | frozenset[type],
    records: list[Any] | None,
    context: tuple[Any, ...],
    immutable: set[type] | frozenset[type],
    /,
) -> tuple[list[Any], bool]: ...
def leaf_paths(records: Sequence[Any], context: tuple[Any, Any, str], /) -> list[Any]: ...
def same_records(a: tuple[Any, ...], b: tuple[Any, ...], /) -> bool: ...
def fill_part(
    keys: list[Any], hashes: array[int], leaves: list[Any], picks: array[int], /
) -> dict[Any, Any]: ...
def build(records: tuple[Any, ...], leaves: Any, context: tuple[Any, ...], /) -> Any: ...
def new_instance(cls: type, names: tuple[str, ...], /, *values: Any) -> Any: ...
def frame_stack_room() -> int: ...

class KeyHash:
    _hash: int
    def __hash__(self) -> int: ...

class IdTable:
    def __init__(self) -> None: ...
    def get(self, id: int, default: Any = None, /) -> Any: ...
    def lookup(self, obj: Any, default: Any, /) -> Any: ...
    def store(self, obj: Any, value: Any, /) -> None: ...
    def keys(self) -> list[Any]: ...
    def clear(self) -> None: ...
    def __getitem__(self, id: int, /) -> Any: ...
    def __contains__(self, id: object, /) -> bool: ...
    def __len__(self) -> int: ...

class Loop:
    def __init__(
        self,
        node: Callable[[Any, int], Any],
        direct: dict[type, Callable[[Any, int], Any]],
        immutable: frozenset[type],
        leaf_types: frozenset[type],
        value_leaf: Callable[[Any, int], Any],
        cached_leaf: Callable[[Any, int], Any],
        max_depth: int,
    ) -> None: ...
    def run(self, kids: Iterable[Any], depth: int, /) -> list[Any]: ...
    def child(self, x: Any, depth: int, /) -> Any: ...
    def leaf(self, x: Any, /) -> Any: ...
    def bind(
        self, f: Callable[..., Any], table: IdTable | None, prune: Any, use_prune: bool, /
    ) -> None: ...

class PairLoop:
    def __init__(
        self,
        pair: Callable[[Any, Any, int], Any],
        node: Callable[[Any, tuple[Any, ...], int], Any],
        immutable: frozenset[type],
        leaf_types: frozenset[type],
    ) -> None: ...
    def run(self, kids: Iterable[Any], ykids: Iterable[Any], depth: int, /) -> list[Any]: ...
    def leaf(self, x: Any, y: Any, /) -> Any: ...
    def bind(
        self, f: Callable[..., Any], table: IdTable | None, prune: Any, use_prune: bool, /
    ) -> None: ...

class Rebuild:
    def __init__(
        self,
        cls: type,
        fields: tuple[tuple[str, str, Any], ...],
        unpack: Callable[[Any], tuple[Any, ...]] | None,
        kept_first: bool,
    ) -> None: ...
    def __call__(self, a: Any, b: Any, /) -> Any: ...

class MapNode:
    def __init__(
        self,
        mapper: Callable[[Any, int], Any],
        loop: Loop,
        cls: type,
        fields: tuple[tuple[str, str, Any], ...],
        children: tuple[str, ...],
        unset: Callable[[Any, AttributeError], BaseException],
        structural: bool,
    ) -> None: ...
    def __call__(self, x: Any, depth: int, /) -> Any: ...
