"""Checkpoints of the built-in models: one ``torch.save`` file that rebuilds the model without its code.

The file holds a plain dict (loadable with ``torch.load(path, weights_only=True)``)::

    {"format": "kgeval.checkpoint/1", "model": "DistMult", "num_entities": int, "num_relations": int,
     "dim": int, "state_dict": {name: tensor}}

``kgeval demo --save-checkpoint PATH`` writes one; ``kgeval strat --checkpoint PATH`` reads it.
"""

from __future__ import annotations

import os
import pickle
from typing import Any

import torch
from torch import nn

from kgeval.models import DistMult

__all__ = ["BUILTIN_MODELS", "CHECKPOINT_FORMAT", "load_checkpoint", "save_checkpoint"]

CHECKPOINT_FORMAT = "kgeval.checkpoint/1"

#: The models a checkpoint can name, by class name.
BUILTIN_MODELS: dict[str, type[nn.Module]] = {"DistMult": DistMult}


def save_checkpoint(model: nn.Module, path: str | os.PathLike[str]) -> None:
    """Write ``model`` (a built-in model, see :data:`BUILTIN_MODELS`) and its sizes to ``path``."""
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


def load_checkpoint(
    path: str | os.PathLike[str],
    map_location: Any = "cpu",
    num_entities: int | None = None,
    num_relations: int | None = None,
) -> nn.Module:
    """The model saved by :func:`save_checkpoint`, on ``map_location``, in eval mode.

    Parameters
    ----------
    path : str or path-like
    map_location : str or torch.device, default="cpu"
    num_entities, num_relations : int, optional
        When given, the checkpoint's sizes must equal them (the dataset the model is evaluated on).
    """
    try:
        document = torch.load(path, map_location=map_location, weights_only=True)
    except (RuntimeError, pickle.UnpicklingError, EOFError) as error:
        raise ValueError(f"{os.fspath(path)!r} is not a kgeval checkpoint: {error}") from error
    if not isinstance(document, dict) or document.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{os.fspath(path)!r} is not a kgeval checkpoint (expected format {CHECKPOINT_FORMAT!r})")
    model_class = BUILTIN_MODELS.get(document.get("model"))
    if model_class is None:
        raise ValueError(f"checkpoint model must be one of {sorted(BUILTIN_MODELS)}, got {document.get('model')!r}")
    expected = {"num_entities": num_entities, "num_relations": num_relations}
    for name, value in expected.items():
        if value is not None and document[name] != value:
            raise ValueError(f"the checkpoint has {name}={document[name]}, the dataset {value}")
    model = model_class(document["num_entities"], document["num_relations"], dim=document["dim"])
    model.load_state_dict(document["state_dict"])
    return model.to(map_location).eval()
