"""`containers inspect FILE` and `containers diff A B` (SPEC section 9): the tree view from
the header alone, every difference with its path, exit status 0/1/2 as diff(1), and
one-line errors without tracebacks."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from typing import Any

import numpy as np
import pytest
import safetensors.numpy

import containers as ct
from containers._cli import main
from containers._serialize._diff import diff_files


@ct.container(children=["w", "b"], keep=["name"], name="tests.cli.Layer")
class Layer:
    w: np.ndarray
    b: np.ndarray
    name: str = "layer"


def test_inspect_prints_types_versions_paths_dtypes_shapes_and_kept_values(tmp_path, capsys):
    """The tree view shows every node and leaf from the header, without loading arrays."""
    path = tmp_path / "m.safetensors"
    ct.save(path, {"layers": [Layer(np.zeros((2, 3), np.float32), np.ones(3), "fc")], "step": 7})
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{path}: containers 1, 2 tensors, 48 bytes of data"
    assert out[1:] == [
        "(root): dict (2)",
        "  ['layers']: list (1)",
        "    [0]: tests.cli.Layer v1  kept: name",
        f"      .w: float32[2,3]  24 B  crc32 {ct.inspect(path).rows[3].text.rsplit(' ', 1)[1]}",
        f"      .b: float64[3]  24 B  crc32 {ct.inspect(path).rows[4].text.rsplit(' ', 1)[1]}",
        "      .name: 'fc'",
        "  ['step']: 7",
    ]


def test_inspect_shows_a_plain_safetensors_file_as_a_flat_list(tmp_path, capsys):
    """A file written by safetensors itself is listed tensor by tensor."""
    path = tmp_path / "plain.safetensors"
    safetensors.numpy.save_file(
        {"a.weight": np.zeros((4, 2), np.float16), "b": np.ones(3, np.int8)}, str(path)
    )
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "safetensors, 2 tensors, 19 bytes of data" in out
    assert "  a.weight: float16[4,2]  16 B" in out and "  b: int8[3]  3 B" in out


def test_inspect_of_a_float8_safetensors_file_lists_its_float8_tensors(tmp_path, capsys):
    """A real safetensors file with float8 tensors (written by safetensors.torch) is read:
    inspect lists them with their dtype names, as numpy (ml_dtypes) and torch spell them."""
    torch = pytest.importorskip("torch")
    import safetensors.torch

    path = tmp_path / "fp8.safetensors"
    safetensors.torch.save_file(
        {
            "w": torch.ones(4, dtype=torch.float8_e4m3fn),
            "v": torch.ones(2, dtype=torch.float8_e5m2),
        },
        path,
    )
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "w: float8_e4m3fn[4]  4 B" in out and "v: float8_e5m2[2]  2 B" in out


def test_inspect_escapes_unprintable_names_from_the_file(tmp_path, capsys):
    """Newlines and ANSI escapes in tensor, class and field names never reach the terminal."""
    plain = tmp_path / "plain.safetensors"
    safetensors.numpy.save_file({"a\nb": np.zeros(1, np.float32)}, str(plain))
    assert main(["inspect", str(plain)]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [
        "(root): safetensors file (1 tensor)",
        "  'a\\nb': float32[1]  4 B",
    ]
    tree = [["C", "x\x1b[2J", 1, ["\x1b[31mw"], ["k\n"]], ["S", 1], ["S", 2]]
    meta = {"containers.format": "1", "containers.tree": json.dumps(tree)}
    header = json.dumps({"__metadata__": meta}).encode()
    hostile = tmp_path / "hostile.safetensors"
    hostile.write_bytes(len(header).to_bytes(8, "little") + header)
    assert main(["inspect", str(hostile)]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [
        "(root): 'x\\x1b[2J' v1  kept: 'k\\n'",
        "  .'\\x1b[31mw': 1",
        "  .'k\\n': 2",
    ]


def test_inspect_reads_only_the_header_of_a_huge_file(tmp_path):
    """A file declaring 8 GiB of data (sparse on disk) is inspected in well under a second."""
    path = tmp_path / "huge.safetensors"
    size = 8 * 2**30
    crc = "00000000"
    tree = json.dumps([["A", "w", crc]])
    header = json.dumps(
        {
            "__metadata__": {"containers.format": "1", "containers.tree": tree},
            "w": {"dtype": "F32", "shape": [size // 4], "data_offsets": [0, size]},
        }
    ).encode()
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header)
        f.truncate(8 + len(header) + size)
    start = time.perf_counter()
    info = ct.inspect(path)
    assert time.perf_counter() - start < 1.0
    assert info.tensors == {"w": ("float32", (size // 4,), size)}


def _differences(capsys: Any) -> list[str]:
    """The lines diff printed, but its summary (the last line, checked here)."""
    *lines, summary = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"\d+ differences?: \d+ changed, \d+ only in .+, \d+ only in .+", summary)
    return lines


def test_diff_lists_every_difference_with_its_path(tmp_path, capsys):
    """Added, removed and changed nodes, kept values, scalars, dtypes/shapes and values."""
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    ct.save(
        a,
        {
            "l": Layer(w, np.zeros(3), "fc"),
            "gone": [1],
            "lr": 0.1,
            "t": np.zeros(3),
            "same": w.copy(),
        },
    )
    w2 = w.copy()
    w2[1, 2] += 0.25
    ct.save(
        b,
        {
            "l": Layer(w2, np.zeros(3), "out"),
            "lr": 0.2,
            "t": np.zeros(4, np.float32),
            "same": w,
            "new": None,
        },
    )
    assert main(["diff", str(a), str(b)]) == 1
    assert _differences(capsys) == [
        "- ['gone']: list (1)",
        "~ ['l'].w: float32[2,3] values differ, max abs diff 0.25",
        "~ ['l'].name: 'fc' -> 'out'",
        "~ ['lr']: 0.1 -> 0.2",
        "~ ['t']: float64[3] -> float32[4]",
        "+ ['new']: None",
    ]


def test_diff_of_arrays_holding_infinities_gives_the_largest_difference(tmp_path, capsys):
    """Equal infinities differ by 0, inf and -inf by inf, and NaN only where one side is
    NaN; numpy's warnings about inf - inf stay out of the output."""
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    inf, nan = np.inf, np.nan
    ct.save(
        a,
        {
            "f": np.array([inf, 1.0, -inf], np.float32),
            "c": np.array([complex(inf, 0), 1], np.complex64),
            "s": np.array([inf, 1.0]),
            "n": np.array([nan, 1.0]),
            "m": np.array([-np.finfo(np.float64).max]),
        },
    )
    ct.save(
        b,
        {
            "f": np.array([inf, 2.0, -inf], np.float32),
            "c": np.array([complex(inf, 0), 3], np.complex64),
            "s": np.array([-inf, 1.0]),
            "n": np.array([1.0, 1.0]),
            "m": np.array([np.finfo(np.float64).max]),
        },
    )
    assert main(["diff", str(a), str(b)]) == 1
    assert _differences(capsys) == [
        "~ ['c']: complex64[2] values differ, max abs diff 2",
        "~ ['f']: float32[3] values differ, max abs diff 1",
        "~ ['m']: float64[1] values differ, max abs diff inf",
        "~ ['n']: float64[2] values differ, max abs diff nan",
        "~ ['s']: float64[2] values differ, max abs diff inf",
    ]


def test_diff_of_integer_arrays_is_exact(tmp_path, capsys):
    """int64/uint64 values past 2**53 that differ by 1 differ (float64 rounds them
    equal), and the largest difference of extreme values is not wrapped around."""
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    i64 = np.iinfo(np.int64)
    ct.save(
        a,
        {
            "i": np.array([2**62, 5], np.int64),
            "u": np.array([2**64 - 1], np.uint64),
            "x": np.array([i64.min], np.int64),
            "s": np.array([-128], np.int8),
        },
    )
    ct.save(
        b,
        {
            "i": np.array([2**62 + 1, 5], np.int64),
            "u": np.array([2**64 - 2], np.uint64),
            "x": np.array([i64.max], np.int64),
            "s": np.array([127], np.int8),
        },
    )
    assert main(["diff", str(a), str(b)]) == 1
    assert _differences(capsys) == [
        "~ ['i']: int64[2] values differ, max abs diff 1",
        "~ ['s']: int8[1] values differ, max abs diff 255",
        "~ ['u']: uint64[1] values differ, max abs diff 1",
        "~ ['x']: int64[1] values differ, max abs diff 1.84467e+19",
    ]


def _first_line_then_close(*args: str) -> tuple[str, int, str]:
    """Run the command line, read one line of its output and close the pipe, as
    `containers ... | head -1` does: (that line, exit status, stderr)."""
    child = subprocess.Popen(
        [sys.executable, "-m", "containers", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stderr is not None
    line = child.stdout.readline()
    child.stdout.close()
    status = child.wait(timeout=120)
    err = child.stderr.read()
    child.stderr.close()
    return line, status, err


def test_inspect_and_diff_into_a_closed_pipe_exit_quietly_with_their_status(tmp_path):
    """`containers inspect F | head -1` exits 0 and `containers diff A B | head -1` exits 1
    (the files differ), both silent on stderr: inspect reported the closed pipe as an
    error (status 2), diff reported the different files as equal (status 0)."""
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    ct.save(a, {f"k{i}": i for i in range(20_000)})  # far more output than a pipe holds
    ct.save(b, {f"k{i}": i + 1 for i in range(20_000)})
    line, status, err = _first_line_then_close("inspect", str(a))
    assert line.startswith(f"{a}: containers 1") and (status, err) == (0, "")
    line, status, err = _first_line_then_close("diff", str(a), str(b))
    assert line == "~ ['k0']: 0 -> 1\n" and (status, err) == (1, "")


HUGE = "int(16610 bits, crc32 c6d23d8d)"  # 10**5000


def test_ints_too_long_to_print_are_shown_by_their_size(tmp_path, capsys):
    """inspect and diff show an int past Python's int-to-str limit by its size and CRC32."""
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    ct.save(a, {"x": 10**5000})
    ct.save(b, {"x": 10**5000 + 1})
    assert main(["inspect", str(a)]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == ["(root): dict (1)", f"  ['x']: {HUGE}"]
    assert main(["diff", str(a), str(b)]) == 1
    assert _differences(capsys) == [f"~ ['x']: {HUGE} -> int(16610 bits, crc32 fd4f8fb7)"]


def test_diff_of_equal_files_is_silent_and_exits_0(tmp_path, capsys):
    """Two saves of one tree (and a file with itself) are equal, NaNs included."""
    tree = {"x": np.array([np.nan, 1.0]), "k": Layer(np.ones(1), np.ones(1))}
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    ct.save(a, tree)
    ct.save(b, tree)
    assert main(["diff", str(a), str(b)]) == 0
    assert capsys.readouterr().out == ""


def test_errors_print_one_line_and_exit_2(tmp_path, capsys):
    """A missing or corrupt file gives exit status 2 and one line on stderr, no traceback."""
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00[1,2]")
    assert main(["inspect", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"{bad}: FormatError: the header does not start with '{{': this "
        f"is not a safetensors file.\n"
    )
    assert main(["diff", str(bad), str(tmp_path / "missing.safetensors")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{bad}: FormatError: ") and err.count("\n") == 1


def test_diff_names_the_file_that_is_bad(tmp_path, capsys):
    """diff A B says which of the two files is corrupt, whichever side it is on: in its
    header, or in data that only diff reads (a BOOL byte that is not 0 or 1)."""
    good, cut = tmp_path / "good.safetensors", tmp_path / "cut.safetensors"
    ct.save(good, {"w": np.ones(3), "b": np.ones(2, bool)})
    cut.write_bytes(good.read_bytes()[:-5])
    for args in ([str(good), str(cut)], [str(cut), str(good)]):
        assert main(["diff", *args]) == 2
        assert capsys.readouterr().err == (
            f"{cut}: FormatError: truncated: need 26 bytes of tensor data, have 21.\n"
        )
    data = good.read_bytes()
    cut.write_bytes(data[:-1] + b"\x02")  # the last byte is the bool tensor's
    for args in ([str(good), str(cut)], [str(cut), str(good)]):
        assert main(["diff", *args]) == 2
        assert capsys.readouterr().err == (
            f"{cut}: FormatError: tensor \"['b']\": BOOL data holds the byte "
            f"2 at element 1; a bool is stored as 0 or 1. The file is corrupt.\n"
        )


def test_inspect_of_a_text_file_says_it_is_not_safetensors(tmp_path, capsys):
    """A text file is not a safetensors file: no advice to raise a limit."""
    text = tmp_path / "notes.txt"
    text.write_text("ten bytes\n")
    assert main(["inspect", str(text)]) == 2
    assert capsys.readouterr().err == (
        f"{text}: FormatError: this is not a safetensors file: its first 8 bytes "
        "give a header length of 7310601557487019380 bytes, but only 2 bytes follow them (or "
        "the file is truncated).\n"
    )


def test_python_dash_m_containers_runs_inspect_and_diff(tmp_path):
    """The installed entry point gives the same output and exit codes, no traceback."""
    a = tmp_path / "a.safetensors"
    ct.save(a, [1, np.zeros(2)])
    run = [sys.executable, "-m", "containers"]
    result = subprocess.run([*run, "inspect", str(a)], capture_output=True, text=True, check=False)
    assert result.returncode == 0 and "(root): list (2)" in result.stdout
    result = subprocess.run(
        [*run, "diff", str(a), str(tmp_path / "no")], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"{tmp_path / 'no'}: FileNotFoundError:")


def _chain(depth: int, leaf: object) -> list[object]:
    """[[[...[[], leaf]...], leaf], leaf]: leaf's first occurrence is the deepest."""
    tree: list[object] = []
    for _ in range(depth):
        tree = [tree, leaf]
    return tree


def test_inspect_and_diff_show_deep_paths_by_both_ends(tmp_path):
    """Past 40 levels a path is shown by its first and last 12 keys and the depth, as
    load's messages show it, so a line per row of a deep tree (an alias in inspect, a
    difference in diff) does not make the output quadratic in the depth."""
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    depth = 3_000
    ct.save(a, _chain(depth, [0.0]))
    ct.save(b, _chain(depth, [1.0]))
    deep = "[0]" * 12 + "..." + "[0]" * 11 + "[1]"
    lines = str(ct.inspect(a)).splitlines()
    aliases = [line.strip() for line in lines if "same object as" in line]
    assert len(aliases) == depth - 1
    assert aliases[0] == f"[1]: same object as {deep} (depth {depth})"
    changed = f"{'[0]' * 12}...{'[0]' * 10}[1][0] (depth {depth + 1})"
    assert diff_files(a, b) == [f"~ {changed}: 0.0 -> 1.0"]
