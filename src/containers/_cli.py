"""The ``containers`` command line: ``demo``, ``inspect FILE``, ``diff A B`` (also ``python -m containers``).

The last stage: it only calls the public API and prints.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

import containers as ct
from containers.filters import PathContains

__all__ = ["main"]


def demo() -> None:
    """Print a short tour of the pipeline on a two-layer model."""

    @ct.container(children=["w", "b"], keep=["name"], name="demo.Linear")  # name: in files
    class Linear:
        w: npt.NDArray[Any]
        b: npt.NDArray[Any]
        name: str = "linear"
        cache: dict[str, object] | None = None  # neither child nor kept: reset on rebuild

    @ct.container(children=["layers"], name="demo.MLP")
    class MLP:
        layers: tuple[Linear, ...]
        activation: str = "relu"  # not a child: kept

    rng = np.random.default_rng(0)
    model = MLP(
        (
            Linear(rng.normal(size=(4, 3)).astype("float32"), np.zeros(3, "float32"), "hidden"),
            Linear(
                rng.normal(size=(3, 2)).astype("float32"),
                np.zeros(2, "float32"),
                "out",
                cache={"x": 1},
            ),
        )
    )

    def step(title: str) -> None:
        print(f"\n== {title}")

    step("1. Two declared containers: MLP(layers) holding Linear(w, b), name kept")
    ct.pprint(model)

    step("2. fmap: halve every array; kept fields stay, the reset field `cache` is reset")
    scaled = ct.fmap(lambda a: a * 0.5, model)
    print("model.layers[1].w[0]  =", model.layers[1].w[0], "  cache =", model.layers[1].cache)
    print("scaled.layers[1].w[0] =", scaled.layers[1].w[0], "  cache =", scaled.layers[1].cache)

    step("3. fmapstructure: containers become dicts; here each array becomes its shape")
    print(ct.fmapstructure(lambda a: a.shape, model))

    step("4. flatten / unflatten: leaves plus a Structure, and back")
    leaves, structure = ct.flatten(model)
    print(f"{len(leaves)} leaves; structure = {structure}")
    rebuilt = ct.unflatten(structure, [np.ones_like(a) for a in leaves])
    print("rebuilt first bias:", rebuilt.layers[0].b)

    step("5. Key paths: every leaf has one; get and set by path")
    for path, leaf in ct.leaves_with_path(model):
        print(f"  {ct.keystr(path):<14} {leaf.dtype}[{','.join(map(str, leaf.shape))}]")
    patched = ct.setpath(model, ".layers[1].b", np.full(2, 7.0, "float32"))
    print("getpath(patched, '.layers[1].b') =", ct.getpath(patched, ".layers[1].b"))

    step("6. Two-tree fmap: an update step, params - 0.1 * grads")
    grads = ct.fmap(np.ones_like, model)
    updated = ct.fmap(lambda p, g: p - 0.1 * g, model, grads)
    print("updated.layers[0].b =", updated.layers[0].b)

    step("7. A structure mismatch names the path and what differs")
    short = MLP((model.layers[0],))
    try:
        ct.fmap(lambda p, g: p - g, model, short)
    except ct.StructureError as err:
        print(f"StructureError: {err}")
    try:
        ct.structure(model).flatten_up_to(MLP(model.layers, activation="gelu"))
    except ct.StructureError as err:
        print(f"StructureError: {err}")

    step("8. Filters: split the weights from the rest, step them alone, merge back")
    structure, weights, rest = ct.split(model, PathContains("w"), ...)
    print("weights:", [ct.keystr(p) for p in weights], " rest:", [ct.keystr(p) for p in rest])
    stepped = ct.merge(structure, {p: w - 0.1 for p, w in weights.items()}, rest)
    print("stepped.layers[0].w[0] =", stepped.layers[0].w[0], "  name =", stepped.layers[0].name)

    step("9. treelize: a function of leaves, lifted to trees that need not match")

    @ct.treelize("outer", missing=0.0)
    def add(a: float, b: float) -> float:
        return a + b

    print(add({"loss": 1.5, "acc": {"top1": 0.5}}, {"loss": 0.5, "acc": {"top5": 0.75}}))

    step("10. save / load / inspect: a safetensors file, the tree in its header")
    with tempfile.TemporaryDirectory() as tmp:
        file = os.path.join(tmp, "model.safetensors")
        ct.save(file, model)
        back = ct.load(file, expect=MLP)
        same = [np.array_equal(a, b) for a, b in zip(ct.leaves(model), ct.leaves(back))]
        print(f"loaded {type(back).__name__}, {len(same)} arrays equal: {all(same)}")
        print(str(ct.inspect(file)).split("\n", 1)[1])
        print("From the shell, on a saved file: containers inspect FILE; containers diff A B")

    step("11. Interop: the same classes as optree pytrees (also JAX and PyTorch)")
    try:
        import optree
    except ImportError:
        print("optree is not installed: pip install optree, then run the demo again.")
        return
    from containers.interop import register_optree

    register_optree()
    tree: Any = model  # optree's own annotations know nothing of MLP
    print(optree.tree_map(lambda a: a.shape, tree))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = argparse.ArgumentParser(
        prog="containers", description="Traversable user classes: tools and a demo."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="print a short tour of the library")
    p_inspect = sub.add_parser(
        "inspect", help="print the tree of a saved file from its header (no arrays are read)"
    )
    p_inspect.add_argument(
        "file", help="a file written by containers.save, or a safetensors file of its dtypes"
    )
    p_diff = sub.add_parser(
        "diff", help="list the differences between two saved files (exit 0 equal, 1 different)"
    )
    p_diff.add_argument("a", help="the first file")
    p_diff.add_argument("b", help="the second file")
    args = parser.parse_args(argv)
    status = 0
    try:
        if args.command == "demo":
            demo()
        elif args.command in ("inspect", "diff"):
            # The status is known before printing, so a reader that goes away (`| head`)
            # changes nothing: diff still says the files differ.
            status, lines = _file_command(args)
            for line in lines:
                _print(line)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`containers demo | head`): stop quietly, as CLI tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return status


def _print(text: str) -> None:
    """Print text that may hold unprintable names from a file (escaped, never an error)."""
    encoding = sys.stdout.encoding or "utf-8"
    print(text.encode(encoding, "backslashreplace").decode(encoding))


def _file_command(args: argparse.Namespace) -> tuple[int, list[str]]:
    """``inspect`` and ``diff``: the exit status (0 equal/ok, 1 different, 2 error, told in
    one line on stderr, no traceback) and the lines to print."""
    from containers._serialize._diff import diff_files

    try:
        if args.command == "inspect":
            return 0, [str(ct.inspect(args.file))]
        lines = diff_files(args.a, args.b)
    except (ct.ContainersError, OSError) as err:
        what = type(err).__name__
        text = " ".join(str(err).split())  # one line, whatever the message holds
        print(f"containers {args.command}: {what}: {text}", file=sys.stderr)
        return 2, []
    return (1 if lines else 0), lines


if __name__ == "__main__":  # pragma: no cover - exercised through python -m containers
    sys.exit(main())
