"""Checkpoints of the built-in models: one ``torch.save`` file of plain data (loadable with ``weights_only=True``)
that rebuilds the model without its code; ``kgeval demo --save-checkpoint`` writes one, ``kgeval evaluate`` and
``kgeval strat --checkpoint`` read it.
"""

from __future__ import annotations

import os
import pickle
from typing import Any

import torch
from torch import nn

from kgeval.models import DistMult

__all__ = ["BUILTIN_MODELS", "CHECKPOINT_FORMAT", "load_checkpoint", "save_checkpoint"]

CHECKPOINT_FORMAT = "kgeval.models.checkpoint/1"

#: The models a checkpoint can name, by class name.
BUILTIN_MODELS: dict[str, type[nn.Module]] = {"DistMult": DistMult}


def save_checkpoint(model: nn.Module, path: str | os.PathLike[str]) -> None:
    """Write ``model`` (a built-in model, see :data:`BUILTIN_MODELS`) and its sizes to ``path``.

    The file holds ``{"format": "kgeval.models.checkpoint/1", "model": "DistMult", "num_entities": int,
    "num_relations": int, "dim": int, "state_dict": {name: tensor}}``.
    """
    name = type(model).__name__
    if BUILTIN_MODELS.get(name) is not type(model):
        raise TypeError(f"save_checkpoint takes a built-in model ({', '.join(BUILTIN_MODELS)}), got {name}")
    state = {name: tensor.detach().cpu() for name, tensor in model.state_dict().items()}
    torch.save(
        {
            "format": CHECKPOINT_FORMAT,
            "model": name,
            "num_entities": model.num_entities,
            "num_relations": model.num_relations,
            "dim": model.dim,
            "state_dict": state,
        },
        path,
    )


#: the first torch release whose weights-only unpickler has no published advisory against it (remote code
#: execution through torch.load(weights_only=True) up to 2.5.1; memory corruption before 2.10)
SAFE_WEIGHTS_ONLY_TORCH = (2, 10)


def weights_only_loader_is_safe(version: str) -> bool:
    """Whether ``torch.load(weights_only=True)`` of this torch version (e.g. ``"2.13.0+cpu"``) is safe for files
    from others, as far as the published advisories go (:data:`SAFE_WEIGHTS_ONLY_TORCH`)."""
    parts = version.split("+")[0].split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return False
    return (major, minor) >= SAFE_WEIGHTS_ONLY_TORCH


def load_checkpoint(
    path: str | os.PathLike[str],
    map_location: Any = "cpu",
    num_entities: int | None = None,
    num_relations: int | None = None,
    *,
    trusted: bool = False,
) -> nn.Module:
    """The model saved by :func:`save_checkpoint`, on ``map_location``, in eval mode.

    The file is read with PyTorch's weights-only unpickler (it never runs code from the file), and its header is
    checked against the stored tensors before anything is allocated: a header cannot make kgeval allocate more
    than the file holds.

    Parameters
    ----------
    path : str or path-like
    map_location : str or torch.device, default="cpu"
    num_entities, num_relations : int, optional
        When given, the checkpoint's sizes must equal them (the dataset the model is evaluated on).
    trusted : bool, default=False
        The file is your own. Needed only with torch older than 2.10, whose weights-only unpickler has published
        vulnerabilities: without it, kgeval refuses to load there.

    Raises
    ------
    ValueError
        For a file that is not a kgeval checkpoint, whose header and tensors disagree, or whose sizes differ from
        the given ones; on torch < 2.10 without ``trusted=True``.
    """
    where = repr(os.fspath(path))
    if not trusted and not weights_only_loader_is_safe(torch.__version__):
        raise ValueError(
            f"not loading {where}: torch {torch.__version__}'s weights-only loader has published vulnerabilities "
            "(fixed in torch 2.10); upgrade torch, or pass trusted=True for a file you made yourself"
        )
    try:
        document = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, pickle.UnpicklingError, EOFError, OSError) as error:
        if isinstance(error, FileNotFoundError):
            raise
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ValueError(
            f"{where} is not a kgeval checkpoint: {reason} (kgeval loads the files of save_checkpoint, e.g. "
            "'kgeval demo --save-checkpoint PATH')"
        ) from error
    if not isinstance(document, dict) or document.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{where} is not a kgeval checkpoint (expected format {CHECKPOINT_FORMAT!r})")
    model_class = BUILTIN_MODELS.get(document.get("model"))
    if model_class is None:
        raise ValueError(f"checkpoint model must be one of {sorted(BUILTIN_MODELS)}, got {document.get('model')!r}")
    sizes = _header_sizes(document, where)
    expected = {"num_entities": num_entities, "num_relations": num_relations}
    for name, value in expected.items():
        if value is not None and sizes[name] != value:
            raise ValueError(f"the checkpoint has {name}={sizes[name]}, the dataset {value}")
    with torch.device("meta"):  # the shapes the header implies, without allocating them
        model = model_class(sizes["num_entities"], sizes["num_relations"], dim=sizes["dim"])
    _check_tensors(document.get("state_dict"), model.state_dict(), where)
    model.load_state_dict(document["state_dict"], assign=True)
    return model.to(map_location).eval()


def _header_sizes(document: dict[str, Any], where: str) -> dict[str, int]:
    """num_entities, num_relations and dim of a checkpoint header: positive ints."""
    sizes = {}
    for name in ("num_entities", "num_relations", "dim"):
        value = document.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{where}: checkpoint {name} must be a positive int, got {value!r}")
        sizes[name] = value
    return sizes


def _check_tensors(stored: Any, expected: dict[str, torch.Tensor], where: str) -> None:
    """The stored state dict holds exactly the expected tensors, with their shapes and floating dtypes."""
    if not isinstance(stored, dict) or not all(isinstance(value, torch.Tensor) for value in stored.values()):
        raise ValueError(f"{where}: checkpoint state_dict must map names to tensors")
    if set(stored) != set(expected):
        raise ValueError(f"{where}: checkpoint tensors {sorted(stored)} differ from the model's {sorted(expected)}")
    for name, tensor in expected.items():
        if stored[name].shape != tensor.shape or not stored[name].dtype.is_floating_point:
            raise ValueError(
                f"{where}: checkpoint tensor {name} has shape {tuple(stored[name].shape)} ({stored[name].dtype}); "
                f"its header implies {tuple(tensor.shape)} (floating point)"
            )
