# The header and tree of a containers file parsed in C (_scan.c); optional, see
# _serialize._strictjson.load_extension. Each function returns None where its plain twin decides.
from typing import Any

def header(
    text: str | bytes,
    data_size: int,
    max_tensors: int,
    max_ndim: int,
    dtypes: dict[str, Any],
    tensor: type,
    /,
) -> tuple[dict[str, str], dict[str, Any]] | None: ...
def records(
    text: str, max_nodes: int, context: tuple[Any, ...], known: dict[str, Any] | None = None, /
) -> tuple[list[Any], list[str], list[int], set[int], list[Any] | None] | None: ...
def tree_span(text: str | bytes, /) -> tuple[int, int] | None: ...
def counts(text: str | bytes, a: int, b: int, /) -> tuple[int, int, int, int] | None: ...
def arrays_fit(
    values: list[Any],
    wants: list[Any],
    ndarray: type,
    tensor: type = ...,
    dtypes: dict[Any, Any] = ...,
    convert: Any = ...,
    /,
) -> set[type] | None: ...
def array_head(a: Any, ndarray: type, /) -> tuple[tuple[int, ...], Any]: ...
