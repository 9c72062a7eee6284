# CRC-32 by carry-less multiplication (_crc32.c); optional, see _serialize._format._load_crc32.
from typing import Any

from typing_extensions import Buffer

IMPLEMENTATION: str
IMPLEMENTATIONS: tuple[str, str, str]
ACCELERATED: bool

def crc32(data: Buffer, value: int = 0, /) -> int: ...
def crc32_using(implementation: str, data: Buffer, value: int = 0, /) -> int: ...
def first_mismatch(data: Buffer, tensors: list[Any], base: int, wants: list[Any], /) -> int: ...
