"""The ``containers`` command line: ``demo``, ``inspect FILE``, ``diff A B`` (also ``python -m containers``).

The last stage: it only calls the public API and prints.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
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
    print(
        "In a notebook: ct.display(model), or %load_ext containers then `model`, shows "
        "it as a foldable HTML view with array statistics (docs/view.md)."
    )

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
        # like=: the template decides classes and kept values (the file's names are
        # not looked up); to="torch"/"jax" gives that framework's arrays
        fitted = ct.load(file, like=model)
        print("load(file, like=model):", [layer.name for layer in fitted.layers])
        print(str(ct.inspect(file)).split("\n", 1)[1])

        step("11. containers diff: what changed between two saved files")
        stepped_file = os.path.join(tmp, "stepped.safetensors")
        ct.save(stepped_file, stepped)
        print("$ containers diff model.safetensors stepped.safetensors")
        for line in _file_command(argparse.Namespace(command="diff", a=file, b=stepped_file))[1]:
            _print(line)
        print("(also from the shell: containers inspect FILE)")

        step("12. Interop: the same classes as optree pytrees (also JAX and PyTorch)")
        _demo_optree(model)

        step("13. Schema evolution: version 2 of Linear still loads the version 1 file")

        def transpose_w(children: dict[str, Any], kept: dict[str, Any]) -> Any:
            return {**children, "w": children["w"].T}, kept  # v2 stores w as (out, in)

        @ct.container(  # the same name in files: this class takes it over from the first
            children=["w", "bias"],
            keep=["name", "scale"],
            name="demo.Linear",
            version=2,
            migrations={1: transpose_w},  # upgrades version 1 data to version 2
            renamed={"b": "bias"},  # a field's old name
        )
        class Linear:  # type: ignore[no-redef]
            w: npt.NDArray[Any]
            bias: npt.NDArray[Any]
            name: str = "linear"
            scale: float = 1.0  # new: files without it load with the default

        ct.pprint(ct.load(file).layers[0])

        step("14. Big checkpoints: sharded in the hub's layout, loaded lazily, one layer read")
        shards = os.path.join(tmp, "sharded")
        ct.save(shards, ct.load(file), max_shard_size=64)  # bytes: a shard per array or two
        print(f"sharded/: {', '.join(sorted(os.listdir(shards)))}")
        lazy = ct.load(shards, lazy=True)  # the header only: no array is read
        ct.pprint(lazy.layers)

        def second(path: Any, value: Any) -> bool:
            return ct.keystr(path).startswith(".layers[1]")

        one = ct.load(shards, where=second)  # reads .layers[1]'s arrays only
        ct.pprint(one.layers)

    step("15. Parallel maps: fmap's calls of f on a thread pool, the same result")
    with ThreadPoolExecutor(2) as pool:  # also a process pool or a dask Client
        squashed = ct.fmap(np.tanh, model, executor=pool)
    print("fmap(np.tanh, model, executor=pool).layers[0].w[0] =", squashed.layers[0].w[0])
    agree = map(np.array_equal, ct.leaves(squashed), ct.leaves(ct.fmap(np.tanh, model)))
    print("the serial fmap's result:", all(agree))


def _demo_optree(model: Any) -> None:
    """The demo's interop step: optree maps the model's arrays, if optree is installed."""
    try:
        import optree
    except ImportError:
        print("optree is not installed: pip install optree, then run the demo again.")
        return
    from containers.interop import register_optree

    register_optree()
    print(optree.tree_map(lambda a: a.shape, model))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = argparse.ArgumentParser(
        prog="containers", description="Traversable user classes: tools and a demo."
    )
    parser.add_argument("--version", action="version", version=f"containers {ct.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="print a short tour of the library")
    p_inspect = sub.add_parser(
        "inspect", help="print the tree of a saved file from its header (no arrays are read)"
    )
    p_inspect.add_argument(
        "files",
        nargs="+",
        metavar="file",
        help="a file written by containers.save, or a safetensors file of its dtypes",
    )
    p_inspect.add_argument("--json", action="store_true", help="print JSON, one object per file")
    p_inspect.add_argument(
        "--follow-links",
        action="store_true",
        help="let a sharded checkpoint's shards be symbolic links out of its directory "
        "(a Hugging Face hub cache snapshot)",
    )
    p_diff = sub.add_parser(
        "diff",
        help="list the differences between two saved files (exit 0 equal, 1 different, 2 error)",
    )
    p_diff.add_argument("a", help="the first file")
    p_diff.add_argument("b", help="the second file")
    p_diff.add_argument(
        "--rtol", type=float, default=0.0, help="relative tolerance for arrays and floats"
    )
    p_diff.add_argument(
        "--atol", type=float, default=0.0, help="absolute tolerance for arrays and floats"
    )
    p_diff.add_argument("--json", action="store_true", help="print the differences as JSON")
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
    one line on stderr that starts with the file's path, no traceback) and the lines to
    print. ``inspect`` of several files prints each it can read and fails for the rest."""
    from containers._serialize._diff import diff_entries

    as_json = getattr(args, "json", False)
    if args.command == "inspect":
        files = getattr(args, "files", None) or [args.file]
        status, out, infos = 0, list[str](), list[Any]()
        for file in files:
            try:
                info = ct.inspect(file, follow_links=getattr(args, "follow_links", False))
            except (ct.ContainersError, OSError) as err:
                _error(err, [file], args.command)
                status = 2
                continue
            infos.append(info)
            if not as_json:
                out.append(str(info) if not out else "\n" + str(info))
        if as_json:
            out = (
                [
                    json.dumps(
                        [_info_json(i) for i in infos] if len(files) > 1 else _info_json(infos[0]),
                        indent=1,
                    )
                ]
                if infos
                else []
            )
        return status, out
    rtol, atol = getattr(args, "rtol", 0.0), getattr(args, "atol", 0.0)
    if not (rtol >= 0 and atol >= 0):  # NaN too
        print(
            f"containers diff: --rtol and --atol must be >= 0, got {rtol}, {atol}", file=sys.stderr
        )
        return 2, []
    try:
        entries = diff_entries(
            args.a, args.b, rtol=rtol, atol=atol, progress=_progress_on(sys.stderr)
        )
    except (ct.ContainersError, OSError) as err:
        _error(err, [args.a, args.b], args.command)
        return 2, []
    counts = {op: sum(1 for e in entries if e[0] == op) for op in "~-+"}
    summary = (
        f"{len(entries)} difference{'' if len(entries) == 1 else 's'}: {counts['~']} "
        f"changed, {counts['-']} only in {args.a}, {counts['+']} only in {args.b}"
    )
    if as_json:
        doc = {
            "a": os.fspath(args.a),
            "b": os.fspath(args.b),
            "equal": not entries,
            "summary": summary if entries else "equal",
            "differences": [{"op": op, "path": path, "text": text} for op, path, text in entries],
        }
        return (1 if entries else 0), [json.dumps(doc, indent=1)]
    lines = [f"{op} {path}: {text}" for op, path, text in entries]
    if lines:
        lines.append(summary)
    return (1 if lines else 0), lines


def _progress_on(stream: Any) -> Callable[[int, int], None] | None:
    """A ``progress(done, total)`` that shows ``12.0 / 1,024.0 MiB`` on ``stream`` when it
    is a terminal, once an operation has run for ``_PROGRESS_AFTER`` seconds, at most
    five times a second, and erases it at the end; None when it is not a terminal."""
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    start = time.monotonic()
    last = [0.0]
    shown = [False]

    def show(done: int, total: int) -> None:
        now = time.monotonic()
        if done >= total:
            if shown[0]:
                stream.write("\r" + " " * 40 + "\r")
                stream.flush()
            return
        if now - start < _PROGRESS_AFTER or now - last[0] < 0.2:
            return
        last[0] = now
        shown[0] = True
        stream.write(f"\r{done / 2**20:,.1f} / {total / 2**20:,.1f} MiB")
        stream.flush()

    return show


#: Seconds an operation runs before the command line shows its progress.
_PROGRESS_AFTER = float(os.environ.get("CONTAINERS_PROGRESS_AFTER", "1.0"))


def _info_json(info: Any) -> dict[str, Any]:
    """``inspect --json``: a file's format, tensors and metadata (the tree stays text)."""
    return {
        "path": info.path,
        "format": info.format,
        "data_bytes": info.data_bytes,
        "tensors": {
            name: {"dtype": dt, "shape": list(shape), "nbytes": nbytes}
            for name, (dt, shape, nbytes) in info.tensors.items()
        },
        "metadata": info.user_metadata,
        "tree": str(info).split("\n"),
    }


def _error(err: Exception, files: list[Any], command: str) -> None:
    """Print ``err`` as one line on stderr that starts with the path of the file at fault
    (``FILE: ErrorType: message``)."""
    what = type(err).__name__
    text = " ".join(_error_text(err).split())  # one line, whatever it holds
    for file in map(os.fspath, files):
        if text.startswith(f"{file}: "):
            print(f"{file}: {what}: {text[len(file) + 2 :]}", file=sys.stderr)
            return
    if isinstance(err, OSError) and err.filename is not None:
        print(f"{os.fsdecode(err.filename)}: {what}: {text}", file=sys.stderr)
        return
    print(f"containers {command}: {what}: {text}", file=sys.stderr)


def _error_text(err: Exception) -> str:
    """The message for ``err``: a file error in the words of a CLI tool (load's and
    inspect's own errors start with the file's path)."""
    if isinstance(err, OSError) and err.filename is not None and err.strerror:
        text = f"cannot read it: {err.strerror}."
        if isinstance(err, IsADirectoryError):
            text += " Give the path of a file written by containers.save or a safetensors file."
        return text
    return str(err)


if __name__ == "__main__":  # pragma: no cover - exercised through python -m containers
    sys.exit(main())
