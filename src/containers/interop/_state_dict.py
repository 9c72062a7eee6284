"""The torch bridge: container trees as ``state_dict``s, checkpoints into ``nn.Module``s.

Names are dotted (``layers.0.w``), as ``nn.Module.state_dict`` and hub files name
tensors; paths go through ``ct.leaves_with_path`` and templates through the same
fitting as ``ct.load(like=)`` (``_serialize._target``). torch is imported only when a
function here runs.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import Any, TypeVar

from containers._paths import DictKey, keystr
from containers._serialize._like import FileLeaf, fit
from containers._serialize._load import read_leaves
from containers._serialize._storable import to_numpy as _to_numpy
from containers._serialize._target import dotted, torch_tensor

__all__ = ["from_state_dict", "load_into_module", "to_state_dict"]

T = TypeVar("T")


def to_state_dict(tree: Any, /) -> dict[str, Any]:
    """The array leaves of a tree as a torch ``state_dict``: dotted name -> tensor.

    Each array leaf becomes a ``torch.Tensor`` named as ``nn.Module.state_dict``
    names parameters (``.layers[0].w`` -> ``layers.0.w``); torch tensors are given
    as they are, numpy and JAX arrays are wrapped without a copy where torch can
    (bfloat16 and float8 too). Scalar leaves are left out, as a state_dict holds
    tensors. ``torch.func.functional_call(module, to_state_dict(params), args)`` and
    ``module.load_state_dict(to_state_dict(params))`` take the result.

    Examples:
        >>> import pytest
        >>> torch = pytest.importorskip("torch")
        >>> import numpy as np
        >>> from containers.interop import to_state_dict
        >>> sd = to_state_dict({"layers": [{"weight": np.ones((2, 3), np.float32)}]})
        >>> list(sd), sd["layers.0.weight"].dtype
        (['layers.0.weight'], torch.float32)

    Args:
        tree: Any tree; its array leaves need dotted names (str or int dict keys).

    Returns:
        A dict of dotted names to tensors, in the tree's leaf order.

    Raises:
        ValueError: a path holds a dict key that has no dotted name.
        ImportError: torch is not installed.
    """
    from containers._flatten import leaves_with_path

    torch = importlib.import_module("torch")
    out: dict[str, Any] = {}
    for path, leaf in leaves_with_path(tree):
        if isinstance(leaf, torch.Tensor):
            out[dotted(path)] = leaf
            continue
        a = _to_numpy(leaf, "")
        if a is not None:
            out[dotted(path)] = torch_tensor(torch, a)
    return out


def from_state_dict(like: T, state_dict: Mapping[str, Any], /, *, strict: bool = True) -> T:
    """A tree like ``like`` whose leaves come from a ``state_dict``, by dotted name.

    ``like`` decides the classes, kept values, framework, device and dtype of every
    leaf (as ``ct.load(path, like=...)``): a numpy leaf gets a numpy view of the
    tensor's memory, a torch leaf a tensor on its device, a JAX leaf a JAX array.
    ``strict=True`` (torch's default) requires the names to match both ways; with
    ``strict=False`` missing leaves keep the template's values and unexpected names
    are ignored. A shape or dtype that differs is always an error, as in torch.

    Examples:
        >>> import pytest
        >>> torch = pytest.importorskip("torch")
        >>> import numpy as np
        >>> from containers.interop import from_state_dict
        >>> linear = torch.nn.Linear(3, 2)
        >>> like = {"weight": np.zeros((2, 3), np.float32), "bias": np.zeros(2, np.float32)}
        >>> params = from_state_dict(like, linear.state_dict())
        >>> bool((params["weight"] == linear.weight.detach().numpy()).all())
        True

    Args:
        like: The template tree.
        state_dict: Dotted names to tensors (or arrays).
        strict: Whether names must match exactly (torch's ``strict=``).

    Returns:
        The tree, built from ``like``'s structure.

    Raises:
        StructureError: names missing or unexpected (with ``strict``), or a shape or
            dtype changed; every problem listed.
    """
    leaves = []
    for name, given in state_dict.items():
        value = given.detach() if hasattr(given, "detach") else given
        a = _to_numpy(value, name)
        leaves.append(FileLeaf((DictKey(name),), value if a is None else a, a is not None))
    out: T = fit(like, leaves, "from_state_dict: ", strict=strict)
    return out


def load_into_module(
    module: Any, path: str | os.PathLike[str], /, *, strict: bool = True, verify: bool = True
) -> Any:
    """Load a checkpoint into a ``torch.nn.Module`` with ``load_state_dict``.

    The file may be any file ``ct.save`` wrote (a container tree saved with either
    ``names=``, or a ``state_dict``) or a plain safetensors file: its array leaves are
    named by dotted path (``.layers[0].w`` -> ``layers.0.w``) and given to
    ``module.load_state_dict(..., strict=strict)``, so ``strict`` means exactly what
    torch says: with ``True`` missing and unexpected keys raise ``RuntimeError``;
    with ``False`` they are returned. Tensors are copied into the module's own
    parameters and buffers (their device and dtype stay).

    Examples:
        >>> import os, tempfile, pytest
        >>> torch = pytest.importorskip("torch")
        >>> import containers as ct
        >>> from containers.interop import load_into_module, to_state_dict
        >>> path = os.path.join(tempfile.mkdtemp(), "m.safetensors")
        >>> ct.save(path, to_state_dict({"weight": torch.ones(2, 3), "bias": torch.ones(2)}))
        >>> load_into_module(torch.nn.Linear(3, 2), path)
        <All keys matched successfully>

    Args:
        module: The module.
        path: The file.
        strict: torch's ``strict=``.
        verify: Check the tensors' CRC32s.

    Returns:
        torch's ``_IncompatibleKeys(missing_keys, unexpected_keys)``.

    Raises:
        RuntimeError: torch refuses the state_dict (keys with ``strict``, shapes).
        SerializationError: the file is not valid.
    """
    torch = importlib.import_module("torch")
    # A path longer than the module's deepest name matches none of its names: it is cut
    # (a hostile file nested deep costs linear time) and given as an unexpected key.
    max_path = max((name.count(".") + 1 for name in module.state_dict()), default=0)
    state: dict[str, Any] = {}
    for leaf in read_leaves(path, verify=verify, max_path=max_path):
        if leaf.is_array:
            try:
                name = dotted(leaf.path)
            except ValueError:  # a dict key with no dotted name: named as keystr does
                name = keystr(leaf.path)
            state[name + (".(deeper)" if leaf.deep else "")] = torch_tensor(torch, leaf.value)
    return module.load_state_dict(state, strict=strict)
