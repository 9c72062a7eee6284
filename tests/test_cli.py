"""The command line: `python -m containers demo` and argument errors."""

from __future__ import annotations

import subprocess
import sys

from containers._cli import main


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "containers", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_demo_tours_the_pipeline():
    """The demo runs every step (declare, map, flatten, paths, filters, treelize, save,
    inspect, diff, interop, schema evolution, a lazy partial load of a sharded checkpoint,
    an executor map)
    and shows the errors it promises."""
    result = run("demo")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for step in range(1, 16):
        assert f"== {step}. " in out
    assert "Linear(w=float32[4,3], b=float32[3], name='hidden')" in out
    assert "In a notebook: ct.display(model), or %load_ext containers" in out
    assert "scaled.layers[1].w[0]" in out and "cache = None" in out
    assert "{'layers': ({'w': (4, 3), 'b': (3,)}, {'w': (3, 2), 'b': (2,)})}" in out
    assert "  .layers[1].b   float32[2]" in out
    assert "StructureError: fmap: trees differ at '.layers'" in out
    assert "kept field MLP.activation is 'relu' in one and 'gelu' in the other" in out
    assert (
        "weights: ['.layers[0].w', '.layers[1].w']  rest: ['.layers[0].b', '.layers[1].b']" in out
    )
    assert "name = hidden" in out
    assert "{'loss': 2.0, 'acc': {'top1': 0.5, 'top5': 0.75}}" in out
    assert "loaded MLP, 4 arrays equal: True" in out
    assert "load(file, like=model): ['hidden', 'out']" in out
    assert "(root): demo.MLP v1  kept: activation" in out
    assert "      .w: float32[4,3]  48 B  crc32 " in out
    assert "Linear(w=(4, 3), b=(3,), name='hidden', cache=None)" in out  # optree.tree_map
    # containers diff on two saved files, and a version 2 class loading a version 1 file
    assert "~ .layers[1].w: float32[3,2] values differ, max abs diff 0.1\n" in out
    assert "Linear(w=float32[3,4], bias=float32[3], name='hidden', scale=1.0)" in out
    # a lazy load reads nothing; a partial one reads .layers[1] only
    assert "sharded/: model-00001-of-00002.safetensors, model-00002-of-00002" in out
    assert "Linear(w=float32[2,3] (lazy), bias=float32[2] (lazy), name='out'" in out
    assert "Linear(w=float32[2,3], bias=float32[2], name='out', scale=1.0)" in out
    # an executor map, and its result as fmap's
    assert "fmap(np.tanh, model, executor=pool).layers[0].w[0] = [" in out
    assert "the serial fmap's result: True" in out


def test_demo_into_a_closed_pipe_exits_quietly():
    """`containers demo | head -1` ends without a BrokenPipeError traceback."""
    shell = f"{sys.executable} -m containers demo | head -1"
    result = subprocess.run(
        shell, shell=True, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0
    assert "Traceback" not in result.stderr


def test_no_command_prints_usage(capsys):
    """Without a command, argparse says which commands exist and exits with 2."""
    try:
        main([])
    except SystemExit as exit_:
        assert exit_.code == 2
    else:
        raise AssertionError("main([]) should exit")
    assert "usage: containers" in capsys.readouterr().err


def test_inspect_into_a_closed_pipe_exits_quietly(tmp_path):
    """`containers inspect FILE | head -1` ends quietly: a reader that goes away is not an
    error in the file (it printed 'BrokenPipeError' and exited with 2)."""
    import numpy as np

    import containers as ct

    file = tmp_path / "long.safetensors"
    ct.save(file, [np.zeros(1)] + [[i, i] for i in range(20_000)])  # more than a pipe holds
    with subprocess.Popen(
        [sys.executable, "-m", "containers", "inspect", str(file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline().startswith(str(file))
        proc.stdout.close()
        status = proc.wait(timeout=120)
        assert proc.stderr.read() == ""
    assert status == 0


def test_diff_names_the_file_that_cannot_be_read(tmp_path, capsys):
    """`containers diff A B` says which of its two files is broken or missing, and how."""
    import numpy as np

    import containers as ct

    good, text = tmp_path / "good.safetensors", tmp_path / "notes.txt"
    ct.save(good, [np.zeros(2)])
    text.write_text("not a tensor file\n")
    assert main(["diff", str(good), str(text)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{text}: FormatError: ")
    assert err.count("\n") == 1
    assert main(["diff", str(tmp_path / "missing"), str(good)]) == 2
    assert capsys.readouterr().err == (
        f"{tmp_path / 'missing'}: FileNotFoundError: cannot read it: No such file or directory.\n"
    )
    assert main(["inspect", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"{tmp_path}: IsADirectoryError: cannot read it: Is a "
        "directory. Give the path of a file written by containers.save or a safetensors file.\n"
    )
