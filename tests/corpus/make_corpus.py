"""Write the corpus of bad files: one file per hostile input, and the error each must raise.

Run ``python tests/corpus/make_corpus.py`` to regenerate ``tests/corpus/files/`` and
``tests/corpus/expected.json``; ``tests/test_serialize_corpus.py`` checks that the
checked-in files are exactly what this script writes, and that ``load``,
``load(mmap=True)``, ``deserialize`` and ``inspect`` raise what ``expected.json`` says.
The cases are the ways a hostile file can lie (docs/serialization.md, "Loading untrusted
files"): about its sizes, offsets, header, tree, names, checksums and limits.
Files are built by hand from the format (docs/file-format.md), not with containers.
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
FILES = HERE / "files"

F32_12 = struct.pack("<3f", 1.0, 2.0, 3.0)  # 12 bytes: F32[3]
I64_1 = struct.pack("<q", 7)


def crc(data: bytes) -> str:
    return f"{zlib.crc32(data):08x}"


def header_bytes(header: Any, pad: bool = True) -> bytes:
    body = (
        header if isinstance(header, bytes) else json.dumps(header, separators=(",", ":")).encode()
    )
    if pad:
        body += b" " * (-(8 + len(body)) % 8)
    return struct.pack("<Q", len(body)) + body


def tree_file(
    records: Any, tensors: dict[str, tuple[str, list[int], bytes]], **meta: str
) -> bytes:
    """A containers file: ``tensors`` maps names to (dtype, shape, bytes), packed in order."""
    header: dict[str, Any] = {
        "__metadata__": {
            "containers.format": "1",
            "containers.tree": records if isinstance(records, str) else json.dumps(records),
            **meta,
        }
    }
    data = b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {
            "dtype": dtype,
            "shape": shape,
            "data_offsets": [len(data), len(data) + len(raw)],
        }
        data += raw
    return header_bytes(header) + data


def valid_records(name: str = "['w']") -> list[Any]:
    return [["D", ["n", "w"]], ["S", 1], ["A", name, crc(F32_12)]]


VALID = tree_file(valid_records(), {"['w']": ("F32", [3], F32_12)})


def raw_header(text: str, data: bytes = b"") -> bytes:
    return header_bytes(text.encode()) + data


def entry_file(entry: dict[str, Any], data: bytes, extra: dict[str, Any] | None = None) -> bytes:
    header = {
        "__metadata__": {"containers.format": "1", "containers.tree": json.dumps(valid_records())}
    }
    header["['w']"] = entry
    header.update(extra or {})
    return header_bytes(header) + data


def cases() -> list[tuple[str, bytes, dict[str, Any]]]:
    """(name, bytes, expectation) for every case. An expectation has ``error`` (class
    name or "ok"), ``match`` (a regex), optional ``kwargs`` for load/deserialize
    (``limits`` as a dict, ``expect`` as a builtin type name) and optional ``inspect``
    (what ``inspect`` gives when it differs: it reads the header only)."""
    out: list[tuple[str, bytes, dict[str, Any]]] = []

    def add(name: str, data: bytes, error: str, match: str, **extra: Any) -> None:
        out.append((name, data, {"error": error, "match": match, **extra}))

    ok_inspect = {"inspect": {"error": "ok", "match": ""}}
    # 1-4: framing
    add("01-empty", b"", "FormatError", r"file too small: 0 bytes")
    add("02-seven-bytes", b"\x01" * 7, "FormatError", r"file too small: 7 bytes")
    add(
        "03-header-past-end",
        struct.pack("<Q", 100) + b"{}",
        "FormatError",
        r"not a safetensors file: its first 8 bytes give a header length of 100 bytes, but "
        r"only 2 bytes follow them",
    )
    add(  # past the file's end: no limit could make it valid
        "04-header-2-64",
        struct.pack("<Q", 2**64 - 1) + b"{}",
        "FormatError",
        r"not a safetensors file: its first 8 bytes give a header length of "
        r"18446744073709551615 bytes",
    )
    add(
        "04b-header-over-limit",
        VALID,
        "LimitError",
        r"more than max_header_bytes=16",
        kwargs={"limits": {"max_header_bytes": 16}},
    )
    # 5-7: header text
    add("05-not-utf8", header_bytes(b'{"\xff":1}'), "FormatError", r"the header is not UTF-8")
    add("06-json-array", header_bytes(b"[1,2]"), "FormatError", r"does not start with '\{'")
    add("06b-leading-space", header_bytes(b' {"a":1}'), "FormatError", r"does not start with '\{'")
    add("06c-not-json", header_bytes(b"{nope"), "FormatError", r"the header: not valid JSON")
    add(
        "07-depth-bomb-header",
        header_bytes(b'{"a":' + b"[" * 100_000),
        "LimitError",
        r"the header: its JSON would take about 6,\d+,\d+ bytes of memory to parse",
    )
    add(
        "07b-depth-bomb-tree",
        tree_file("[" * 2_000 + "]" * 2_000, {}),  # deeper than json's recursion
        "FormatError",
        r"the tree: JSON nested too deeply",
        **ok_inspect
        | {"inspect": {"error": "FormatError", "match": r"the tree: JSON nested too deeply"}},
    )
    # 8: duplicates
    dup = (
        header_bytes(
            b'{"__metadata__":{"containers.format":"1","containers.tree":"[]"},'
            b'"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
            b'"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}'
        )
        + b"\x00" * 4
    )
    add("08-duplicate-tensor", dup, "FormatError", r"duplicate key 'w'")
    add(
        "08b-duplicate-metadata-key",
        header_bytes(b'{"__metadata__":{"containers.format":"1","containers.format":"1"}}'),
        "FormatError",
        r"duplicate key 'containers.format'",
    )
    add(
        "08c-duplicate-key-in-tree",
        tree_file('[["S",{"i":"1","i":"2"}]]', {}),
        "FormatError",
        r"the tree: duplicate key 'i'",
    )
    # 9-13: numbers in entries
    for tag, bad in (("true", True), ("float", 2.0), ("string", "3")):
        add(
            f"09-dim-{tag}",
            entry_file({"dtype": "F32", "shape": [bad], "data_offsets": [0, 12]}, F32_12),
            "FormatError",
            r"tensor \"\['w'\]\": the shape must be a list of non-negative integers",
        )
    add(
        "09b-offset-true",
        entry_file({"dtype": "F32", "shape": [3], "data_offsets": [False, 12]}, F32_12),
        "FormatError",
        r"data_offsets must be two non-negative integers",
    )
    nan = raw_header('{"w":{"dtype":"F32","shape":[NaN],"data_offsets":[0,12]}}', F32_12)
    add("09c-dim-nan", nan, "FormatError", r"NaN is not JSON")
    inf = raw_header('{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,Infinity]}}', F32_12)
    add("09d-offset-infinity", inf, "FormatError", r"Infinity is not JSON")
    huge = raw_header('{"w":{"dtype":"F32","shape":[1e999],"data_offsets":[0,12]}}', F32_12)
    add(  # Python's json reads 1e999 as inf
        "09e-dim-1e999",
        huge,
        "FormatError",
        r"the header: the number 1e999 is out of the range of a float",
    )
    add(
        "10-negative-dim",
        entry_file({"dtype": "F32", "shape": [-3], "data_offsets": [0, 12]}, F32_12),
        "FormatError",
        r"the shape must be a list of non-negative integers",
    )
    add(
        "10b-negative-offset",
        entry_file({"dtype": "F32", "shape": [3], "data_offsets": [-12, 0]}, F32_12),
        "FormatError",
        r"data_offsets must be two non-negative integers",
    )
    add(
        "11-overflowing-shape",
        entry_file({"dtype": "F32", "shape": [2**32, 2**32, 8], "data_offsets": [0, 12]}, F32_12),
        "FormatError",
        r"F32\[4294967296, 4294967296, 8\] needs 590295810358705651712 bytes but its data_offsets span 12",
    )
    add(
        "11b-terabyte-claim",
        entry_file({"dtype": "F32", "shape": [2**38], "data_offsets": [0, 2**40]}, F32_12),
        "FormatError",
        r"truncated: need 1099511627776 bytes of tensor data, have 12",
    )
    add(  # numpy refuses an empty array whose other dimensions overflow a pointer
        "11c-empty-with-huge-dims",
        tree_file(
            [["L", 2], ["A", "e", crc(b"")], ["A", "w", crc(F32_12)]],
            {"e": ("F32", [0, 2**62, 2**62], b""), "w": ("F32", [3], F32_12)},
        ),
        "FormatError",
        r"tensor 'e': F32\[0, 4611686018427387904, 4611686018427387904\] is empty, but its "
        r"other dimensions describe 85070591730234615865843651857942052864 bytes, more than "
        r"an array can address",
    )
    add(
        "12-size-mismatch",
        entry_file({"dtype": "F64", "shape": [3], "data_offsets": [0, 12]}, F32_12),
        "FormatError",
        r"F64\[3\] needs 24 bytes but its data_offsets span 12",
    )
    add(
        "13-begin-after-end",
        entry_file({"dtype": "F32", "shape": [3], "data_offsets": [12, 0]}, F32_12),
        "FormatError",
        r"data_offsets begin 12 is after end 0",
    )
    bools = {name: ("BOOL", [2], b"\x01\x00") for name in ("a", "b")}
    bools["c"] = ("BOOL", [2], b"\x01\x02")
    add(  # docs/file-format.md: a BOOL is 0 or 1; numpy would keep a 2 as neither
        "13b-bool-not-0-or-1",
        tree_file(
            [["L", 3], *[["A", name, crc(raw)] for name, (_, _, raw) in bools.items()]], bools
        ),
        "FormatError",
        r"tensor 'c': BOOL data holds the byte 2 at element 1; a bool is stored as 0 or 1",
        unverified={
            "error": "FormatError",
            "match": r"tensor 'c': BOOL data holds the byte 2 at element 1",
        },
        **ok_inspect,
    )
    # 14-17: coverage of the data section
    two = {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}
    add(
        "14-overlap",
        entry_file(two, F32_12, {"v": {"dtype": "U8", "shape": [8], "data_offsets": [4, 12]}}),
        "FormatError",
        r"starts at data offset 4, expected 12: it overlaps the previous tensor",
    )
    add(
        "15-gap",
        entry_file({"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}, F32_12),
        "FormatError",
        r"starts at data offset 4, expected 0: it leaves a gap",
    )
    add(
        "16-trailing-bytes",
        VALID + b"PK\x05\x06" + b"\x00" * 18,
        "FormatError",
        r"trailing 22 bytes after the last tensor",
    )
    add(
        "17-truncated-data",
        VALID[:-5],
        "FormatError",
        r"truncated: need 12 bytes of tensor data, have 7",
    )
    # 18: dtypes that must never reach np.dtype
    for i, dtype in enumerate(["Q99", "O", "object", "<U5", "[('a','O')]", "V8", "F4"]):
        add(
            f"18-dtype-{i}",
            entry_file({"dtype": dtype, "shape": [3], "data_offsets": [0, 12]}, F32_12),
            "FormatError",
            r"unsupported dtype",
        )
    # 19: a zero-size tensor sharing an offset is accepted
    zero = tree_file(
        [["D", ["e", "w"]], ["A", "['e']", crc(b"")], ["A", "['w']", crc(F32_12)]],
        {"['e']": ("F32", [0, 4], b""), "['w']": ("F32", [3], F32_12)},
    )
    add("19-zero-size-shares-offset", zero, "ok", "")
    # 20: metadata and entry fields
    add(
        "20-metadata-not-string",
        header_bytes(b'{"__metadata__":{"containers.format":1}}'),
        "FormatError",
        r"__metadata__ must map strings to strings",
    )
    add(
        "20b-metadata-nested",
        header_bytes(b'{"__metadata__":{"x":{"y":"z"}}}'),
        "FormatError",
        r"__metadata__ must map strings to strings",
    )
    add(
        "20c-extra-entry-field",
        entry_file({"dtype": "F32", "shape": [3], "data_offsets": [0, 12], "x": 1}, F32_12),
        "FormatError",
        r"an entry must have exactly 'dtype', 'shape' and 'data_offsets'",
    )
    # 21: not a containers file, a garbled tree, a newer format
    plain = header_bytes({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}}) + F32_12
    add(
        "21-plain-safetensors",
        plain,
        "FormatError",
        r"was not written by containers",
        **ok_inspect,
    )
    add("21b-garbled-tree", tree_file('[["D",', {}), "FormatError", r"the tree: not valid JSON")
    add(
        "21c-format-99",
        tree_file(valid_records(), {"['w']": ("F32", [3], F32_12)}, **{"containers.format": "99"}),
        "VersionError",
        r"containers format 99, newer than this version reads",
    )
    add(
        "21d-format-garbage",
        tree_file([["N"]], {}, **{"containers.format": "x"}),
        "FormatError",
        r"unknown containers format 'x'",
    )
    add(  # "²".isdigit() is true, but int() refuses it
        "21u-format-unicode-digit",
        tree_file([["N"]], {}, **{"containers.format": "\u00b2"}),
        "FormatError",
        r"unknown containers format '\u00b2'",
    )
    add(
        "21e-unknown-record",
        tree_file([["Z", 1]], {}),
        "FormatError",
        r"record #0 is not a known record \(tag 'Z'",
    )
    add("21f-empty-tree", tree_file([], {}), "FormatError", r"the tree is not a non-empty list")
    add(
        "21g-tree-ends-early",
        tree_file([["L", 2], ["S", 1]], {}),
        "FormatError",
        r"the tree ends inside a node",
    )
    add(
        "21h-records-after-root",
        tree_file([["S", 1], ["S", 2]], {}),
        "FormatError",
        r"record #1 follows the end of the tree",
    )
    add(
        "21i-bad-scalar",
        tree_file([["S", {"x": 1}]], {}),
        "FormatError",
        r"record #0 has a bad scalar",
    )
    add(
        "21j-alias-forward",
        tree_file([["L", 1], ["@", 5]], {}),
        "FormatError",
        r"record #1 is an alias to 5, which is not an earlier record",
    )
    add(
        "21k-alias-to-ancestor",
        tree_file([["L", 1], ["@", 0]], {}),
        "FormatError",
        r"alias to record #0, which is not (a finished array or mutable node|finished)",
    )
    add(
        "21l-bad-factory",
        tree_file([["DD", [], None, "os.system"]], {}),
        "FormatError",
        r"names a default_factory 'os.system' that is not a builtin one",
    )
    add(
        "21m-bad-crc",
        tree_file([["A", "w", "zzzzzzzz"]], {"w": ("F32", [3], F32_12)}),
        "FormatError",
        r"CRC32 'zzzzzzzz' that is not 8 hex digits",
    )
    add(
        "21n-huge-int-literal",
        tree_file('[["S",' + "9" * 5000 + "]]", {}),
        "FormatError",
        r"the tree: not valid JSON \(Exceeds the limit \(4300( digits)?\)",
    )
    # Record fields of the wrong type are refused before they are used (sorted() of
    # indices that are not all ints raised TypeError; a maxlen past sys.maxsize,
    # OverflowError).
    for name, order in [("not-ints", [1, "x"]), ("null", [1, None]), ("bools", [True, False])]:
        add(
            f"21o-order-{name}",
            tree_file([["D", ["a", "b"], order], ["S", 1], ["S", 2]], {}),
            "FormatError",
            r"record #0 has an insertion order that is not a permutation of its keys",
        )
    add(
        "21p-defaultdict-order-not-ints",
        tree_file([["DD", ["a", "b"], [1, "x"], None], ["S", 1], ["S", 2]], {}),
        "FormatError",
        r"record #0 has an insertion order that is not a permutation of its keys",
    )
    add(
        "21q-deque-maxlen-huge",
        tree_file([["Q", 0, 10**30]], {}),
        "FormatError",
        r"record #0 is a deque of 0 items with maxlen 1000000000000000000000000000000\. The file",
    )
    add(
        "21r-bad-key-form",
        tree_file([["R", "x.Y", 1, [["d", [1]]]], ["S", 1], ["N"]], {}),
        "FormatError",
        r"record #0 has a bad key: \[1\] is not a scalar",
    )
    for name, text in (
        ("21s-float-overflow", "1e999"),
        ("21t-complex-overflow", '{"c":[0.0,-1e999]}'),
    ):
        add(
            name,
            tree_file(f'[["S",{text}]]', {}),
            "FormatError",
            r"the tree: the number -?1e999 is out of the range of a float",
        )
    for name, hexed in (("prefix", "0xff"), ("underscore", "f_f"), ("space", " ff")):
        add(  # int() takes these; docs/file-format.md says lowercase hexadecimal only
            f"21u-big-int-{name}",
            tree_file([["S", {"i": hexed}]], {}),
            "FormatError",
            r"record #0 has a bad scalar: \{'i': '.*'\} is not a scalar",
        )
    # 22: tree vs tensors
    add(
        "22-missing-tensor",
        tree_file([["A", "['nope']", crc(F32_12)]], {}),
        "FormatError",
        r"refers to a tensor \"\['nope'\]\"|refers to tensor \"\['nope'\]\" that the file does not have",
    )
    add(
        "22b-orphan-tensor",
        tree_file([["S", 1]], {"w": ("F32", [3], F32_12)}),
        "FormatError",
        r"1 tensor\(s\) the tree never refers to, e\.g\. 'w'",
    )
    add(
        "22c-tensor-twice",
        tree_file(
            [["L", 2], ["A", "w", crc(F32_12)], ["A", "w", crc(F32_12)]],
            {"w": ("F32", [3], F32_12)},
        ),
        "FormatError",
        r"tensor 'w' twice",
    )
    # 23: names that are not registered (never imported, never looked up as attributes)
    for i, name in enumerate(["os.system", "builtins.eval", "subprocess.Popen", "__import__"]):
        add(
            f"23-unknown-type-{i}",
            tree_file([["C", name, 1, [], []]], {}),
            "UnknownTypeError",
            rf"type named '{name}' at the root, but no class is registered",
            **ok_inspect,
        )
    add(
        "23b-unknown-register-node",
        tree_file([["R", "os.popen", 0, None], ["S", "ls"]], {}),
        "UnknownTypeError",
        r"type named 'os.popen'",
        **ok_inspect,
    )
    # 24: bombs
    deep = [["L", 1]] * 5000 + [["N"]]
    add(
        "24-nesting-over-limit",
        tree_file(deep, {}),
        "LimitError",
        r"nested deeper than max_depth=1000",
        kwargs={"limits": {"max_depth": 1000}},
    )
    add(
        "24b-records-over-limit",
        tree_file([["L", 3000]] + [["N"]] * 3000, {}),
        "LimitError",
        r"3001 records, more than max_nodes=1000",
        kwargs={"limits": {"max_nodes": 1000}},
    )
    add(
        "24c-tensors-over-limit",
        VALID,
        "LimitError",
        r"1 tensors, more than max_tensors=0",
        kwargs={"limits": {"max_tensors": 0}},
    )
    add(
        "24d-ndim-over-limit",
        entry_file({"dtype": "F32", "shape": [1] * 65 + [3], "data_offsets": [0, 12]}, F32_12),
        "LimitError",
        r"66 dimensions, more than max_ndim=64",
    )
    add(
        "24e-huge-count",
        tree_file([["L", 2**62], ["N"]], {}),
        "FormatError",
        r"the tree ends inside a node",
    )
    # 25: data that imitates type tags is plain data
    tags = [["D", ["__class__", "y"]], ["S", "os.system"], ["S", "!!python/object:os.system"]]
    add("25-type-tag-lookalikes", tree_file(tags, {}), "ok", "")
    # 26: the root is not what the caller expects
    add(
        "26-root-not-expected",
        VALID,
        "SchemaError",
        r"expected a 'list' at the root, but the file holds 'dict' there",
        kwargs={"expect": "list"},
        **ok_inspect,
    )
    # 31: corruption that only the checksum catches
    flipped = bytearray(VALID)
    flipped[-1] ^= 0x01
    add(
        "31-flipped-data-bit",
        bytes(flipped),
        "IntegrityError",
        r"tensor \"\['w'\]\": CRC32 mismatch",
        **ok_inspect,
        unverified={"error": "ok", "match": ""},
    )
    bad_crc = tree_file(
        [["D", ["n", "w"]], ["S", 1], ["A", "['w']", "00000001"]], {"['w']": ("F32", [3], F32_12)}
    )
    add(
        "31b-flipped-crc",
        bad_crc,
        "IntegrityError",
        r"the file says 00000001",
        **ok_inspect,
        unverified={"error": "ok", "match": ""},
    )
    return out


# --- sharded checkpoints (ISSUE 29) ----------------------------------------------------

SHARDED = HERE / "sharded"
INDEX = "model.safetensors.index.json"
S1 = "model-00001-of-00002.safetensors"
S2 = "model-00002-of-00002.safetensors"
ZEROS = struct.pack("<4f", 0, 0, 0, 0)
ONES = struct.pack("<4f", 1, 1, 1, 1)


class Link(str):
    """A symbolic link to write, holding its target."""


def shard(**tensors: bytes) -> bytes:
    """A hub-style shard (no containers metadata): float32[n] tensors, packed in order."""
    header: dict[str, Any] = {}
    pos = 0
    for name, raw in tensors.items():
        header[name] = {
            "dtype": "F32",
            "shape": [len(raw) // 4],
            "data_offsets": [pos, pos + len(raw)],
        }
        pos += len(raw)
    return header_bytes(header) + b"".join(tensors.values())


def index(weight_map: Any = None, total_size: Any = 32, **extra: Any) -> bytes:
    """An index as the hub writes it (``metadata.total_size`` and ``weight_map``)."""
    body: dict[str, Any] = {
        "metadata": {"total_size": total_size},
        "weight_map": {"a": S1, "b": S2} if weight_map is None else weight_map,
    }
    body.update(extra)
    return json.dumps(body, indent=2).encode()


def sharded(**files: bytes | Link) -> dict[str, bytes | Link]:
    """A checkpoint directory's files: the two valid shards, an index, then ``files``."""
    out: dict[str, bytes | Link] = {S1: shard(a=ZEROS), S2: shard(b=ONES), INDEX: index()}
    out.update(files)
    return out


#: A valid safetensors file beside the case directories: what a weight_map or a link
#: pointing outside a checkpoint would reach. Nothing may read it.
OUTSIDE = shard(b=struct.pack("<4f", 6, 6, 6, 6))


def sharded_cases() -> list[tuple[str, dict[str, bytes | Link], dict[str, Any]]]:
    """(name, the directory's files, expectation) for every bad sharded checkpoint. Each
    is a FormatError or LimitError whose message starts with the index's path."""
    not_a_name = "which is not a file name in the checkpoint's directory"
    cases: list[tuple[str, dict[str, bytes | Link], dict[str, Any]]] = [
        (
            "s01-weight-map-parent",
            sharded(**{INDEX: index({"a": S1, "b": "../outside.safetensors"})}),
            not_a_name,
        ),
        (
            "s02-weight-map-absolute",
            sharded(**{INDEX: index({"a": S1, "b": "/etc/passwd"})}),
            not_a_name,
        ),
        (
            "s03-weight-map-separator",
            sharded(**{INDEX: index({"a": S1, "b": "sub/x.safetensors"})}),
            not_a_name,
        ),
        ("s04-weight-map-dot-dot", sharded(**{INDEX: index({"a": S1, "b": ".."})}), not_a_name),
        (
            "s05-symlink-out",
            sharded(
                **{
                    "link.safetensors": Link("../outside.safetensors"),
                    INDEX: index({"a": S1, "b": "link.safetensors"}),
                }
            ),
            "is a symbolic link to .*outside the checkpoint's directory",
        ),
        (
            "s06-shard-missing",
            {S1: shard(a=ZEROS), INDEX: index()},
            "the shard 'model-00002-of-00002.safetensors' that the weight_map names is missing",
        ),
        (
            "s07-shard-listed-twice",
            sharded(
                **{"twin.safetensors": Link(S1), INDEX: index({"a": S1, "b": "twin.safetensors"})}
            ),
            "the shards 'model-00001-of-00002.safetensors' and 'twin.safetensors' are the same file",
        ),
        (
            "s08-tensor-in-two-shards",
            sharded(**{S2: shard(a=ZEROS, b=ONES), INDEX: index(total_size=48)}),
            "holds the tensor 'a', but the weight_map maps it to 'model-00001",
        ),
        (
            "s09-tensor-not-listed",
            sharded(**{S1: shard(a=ZEROS, c=ONES), INDEX: index(total_size=48)}),
            "holds the tensor 'c', but the weight_map does not list it",
        ),
        (
            "s10-tensor-not-held",
            sharded(**{INDEX: index({"a": S1, "b": S2, "c": S1})}),
            "maps the tensor 'c' to 'model-00001-of-00002.safetensors', which does not hold it",
        ),
        (
            "s11-total-size-too-large",
            sharded(**{INDEX: index(total_size=10**12)}),
            "metadata.total_size is 1000000000000 bytes, but the shards' tensors hold 32",
        ),
        (
            "s12-total-size-too-small",
            sharded(**{INDEX: index(total_size=16)}),
            "metadata.total_size is 16 bytes, but the shards' tensors hold 32",
        ),
        (
            "s13-total-size-string",
            sharded(**{INDEX: index(total_size="32")}),
            "metadata.total_size '32' is not a non-negative integer",
        ),
        ("s14-index-not-json", sharded(**{INDEX: b'{"weight_map": '}), "not valid JSON"),
        (
            "s15-index-a-list",
            sharded(**{INDEX: b"[1, 2]"}),
            "the index must be an object with 'weight_map' and 'metadata', got list",
        ),
        (
            "s16-index-duplicate-key",
            sharded(
                **{INDEX: b'{"metadata": {"total_size": 32}, "weight_map": {"a": "x", "a": "y"}}'}
            ),
            "the index: duplicate key 'a'",
        ),
        (
            "s17-index-unknown-key",
            sharded(**{INDEX: index(extra=1)}),
            "got \\['extra', 'metadata', 'weight_map'\\]",
        ),
        (
            "s18-weight-map-value-a-list",
            sharded(**{INDEX: index({"a": S1, "b": ["x"]})}),
            "names a shard by the JSON value \\['x'\\] \\(a list\\); a shard is named by a string",
        ),
    ]
    return [
        (name, files, {"error": "FormatError", "match": match}) for name, files, match in cases
    ]


def write_sharded_cases() -> None:
    if SHARDED.exists():
        for old in sorted(SHARDED.rglob("*"), reverse=True):
            old.rmdir() if old.is_dir() and not old.is_symlink() else old.unlink()
    SHARDED.mkdir(exist_ok=True)
    (SHARDED / "outside.safetensors").write_bytes(OUTSIDE)
    expected = {}
    for name, files, expectation in sharded_cases():
        (SHARDED / name).mkdir()
        for fname, data in files.items():
            if isinstance(data, Link):
                (SHARDED / name / fname).symlink_to(str(data))
            else:
                (SHARDED / name / fname).write_bytes(data)
        expected[name] = expectation
    (HERE / "expected_sharded.json").write_text(
        json.dumps(expected, indent=1, sort_keys=True) + "\n"
    )


def main() -> None:
    FILES.mkdir(exist_ok=True)
    for old in FILES.glob("*.safetensors"):
        old.unlink()
    expected = {}
    for name, data, expectation in cases():
        (FILES / f"{name}.safetensors").write_bytes(data)
        expected[name] = expectation
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    write_sharded_cases()


if __name__ == "__main__":
    main()
