# fmap's compiled child loops and interop's rebuild (_speedups.c); optional, see
# _fmap._load_speedups.
from collections.abc import Callable, Iterable
from typing import Any

UNROLLED: int

class Loop:
    def __init__(
        self,
        node: Callable[[Any, int], Any],
        direct: dict[type, Callable[[Any, int], Any]],
        immutable: frozenset[type],
        leaf_types: frozenset[type],
    ) -> None: ...
    def run(self, kids: Iterable[Any], depth: int, /) -> list[Any]: ...
    def bind(
        self,
        f: Callable[..., Any],
        results: dict[int, Any],
        keep: list[Any],
        prune: Any,
        use_prune: bool,
        /,
    ) -> None: ...

class PairLoop:
    def __init__(
        self,
        leaf: Callable[[Any, tuple[Any, ...]], Any],
        pair: Callable[[Any, Any, int], Any],
        node: Callable[[Any, tuple[Any, ...], int], Any],
        immutable: frozenset[type],
        leaf_types: frozenset[type],
    ) -> None: ...
    def run(self, kids: Iterable[Any], ykids: Iterable[Any], depth: int, /) -> list[Any]: ...
    def bind(self, f: Callable[..., Any], /) -> None: ...

class Rebuild:
    def __init__(
        self,
        cls: type,
        fields: tuple[tuple[str, str, Any], ...],
        unpack: Callable[[Any], tuple[Any, ...]] | None,
        kept_first: bool,
    ) -> None: ...
    def __call__(self, a: Any, b: Any, /) -> Any: ...
