# save's walk over a tree in C (_encoder.c); optional, see _serialize._compiled.
from typing import Any

def encode(
    tree: Any, context: tuple[Any, ...], /
) -> tuple[list[Any], list[str], list[Any], list[list[Any]]]: ...
def render(records: Any, quoted: bool, /) -> str | None: ...
def entries(
    arrays: list[Any], names: list[str], order: list[int], codes: dict[str, str], /
) -> str | None: ...
