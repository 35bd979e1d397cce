"""Nothing of the user's model changes while kgeval scores it, or the user is told.

- **Tables whose lookups write** (``nn.Embedding`` / ``nn.EmbeddingBag`` with ``max_norm``): every lookup
  renormalises the rows it reads in place, so scoring the model would change it, and its scores -- and ranks --
  would depend on the order kgeval scores the tasks in (``torch.embedding_renorm_`` is not even idempotent: a row
  at the bound moves by an ulp at each lookup). Such a model is refused before anything is scored
  (:func:`refuse_writing_lookups`); :func:`without_max_norm` gives the copy to evaluate instead.
- **Lazy parameters not yet initialised** (``nn.LazyLinear`` before its first forward): the first scoring call
  would create them inside kgeval's ``torch.inference_mode`` -- inference tensors, which the model could never
  train afterwards. Refused before anything is scored (:func:`refuse_lazy_parameters`).
- **Anything else** (a scoring method that writes a buffer or a parameter in place, or replaces one): every
  parameter and buffer is recorded before the evaluation -- the tensor object and its version counter, which every
  in-place write bumps, inside ``torch.inference_mode`` too (an inference tensor has no version counter: only its
  replacement is seen) -- and compared after it (:class:`StateWatch`); a change is reported in one
  :class:`kgeval.exceptions.ModelChangedWarning` naming the tensors.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch

from kgeval.exceptions import ModelChangedWarning, warn_caller

__all__ = ["StateWatch", "refuse_lazy_parameters", "refuse_writing_lookups", "without_max_norm"]

_LOOKUP_TABLES = (torch.nn.Embedding, torch.nn.EmbeddingBag)


def _writing_lookups(model: Any) -> list[tuple[str, torch.nn.Embedding | torch.nn.EmbeddingBag]]:
    """(path, module) of every embedding table of ``model`` whose lookups renormalise rows in place."""
    if not isinstance(model, torch.nn.Module):
        return []
    return [(path, module) for path, module in model.named_modules()
            if isinstance(module, _LOOKUP_TABLES) and module.max_norm is not None]  # fmt: skip


def refuse_writing_lookups(model: Any, name: str) -> None:
    """TypeError, before anything is scored, when ``model`` holds an embedding table with ``max_norm``.

    ``name``: how the message names the model."""
    tables = _writing_lookups(model)
    if not tables:
        return
    path, table = tables[0]
    where = f".{path}" if path else ""
    more = f" (and {len(tables) - 1} more table(s))" if len(tables) > 1 else ""
    raise TypeError(
        f"{name}{where} is an nn.{type(table).__name__} with max_norm={table.max_norm}{more}: each of its lookups "
        "renormalises the rows it reads in place, so scoring the model would change it, and its ranks would depend "
        "on the order the tasks are scored in (two evaluations would give two results). Evaluate "
        "kgeval.adapters.without_max_norm(model) instead: a copy whose tables are renormalised once and looked up "
        "without max_norm (the model itself is left as it is)"
    )


def refuse_lazy_parameters(model: Any, name: str) -> None:
    """TypeError, before anything is scored, when ``model`` has a lazy parameter not yet initialised."""
    if not isinstance(model, torch.nn.Module):
        return
    lazy = [path for path, tensor in [*model.named_parameters(), *model.named_buffers()]
            if torch.nn.parameter.is_lazy(tensor)]  # fmt: skip
    if lazy:
        raise TypeError(
            f"{name} has lazy parameters that are not initialised yet ({', '.join(lazy[:3])}): its first call would "
            "create them inside kgeval's torch.inference_mode, as tensors it could never train afterwards. Run one "
            "forward pass (or training step) first"
        )


def without_max_norm(model: torch.nn.Module) -> torch.nn.Module:
    """A deep copy of ``model`` in which every embedding table with ``max_norm`` has had every row renormalised
    once (``torch.embedding_renorm_``, what a lookup of the row does) and is looked up without ``max_norm`` from
    then on: scoring the copy writes nothing, and gives each entity the vector a lookup of the original returns.
    ``model`` is not changed.

    A model that reads a table's ``weight`` directly as well as through lookups (e.g. every entity as a candidate)
    is scored with renormalised rows in both places by the copy; the original would mix them, row by row, as its
    lookups had touched them.
    """
    frozen = copy.deepcopy(model)
    for _, table in _writing_lookups(frozen):
        assert table.max_norm is not None  # what makes it a writing lookup
        with torch.no_grad():
            rows = torch.arange(table.weight.shape[0], device=table.weight.device)
            torch.embedding_renorm_(table.weight, rows, table.max_norm, table.norm_type)
        table.max_norm = None
    return frozen


def _named_state(model: Any) -> dict[str, torch.Tensor]:
    """Every parameter and buffer of ``model`` (a torch module) by its path; empty for other objects."""
    if not isinstance(model, torch.nn.Module):
        return {}
    return {**dict(model.named_parameters()), **dict(model.named_buffers())}


def _version(tensor: torch.Tensor) -> int | None:
    """The tensor's version counter; None for an inference tensor, which has none."""
    return None if tensor.is_inference() else tensor._version


@dataclass(frozen=True)
class StateWatch:
    """The parameters and buffers of a model when the watch began: each path's tensor object and version."""

    recorded: dict[str, tuple[torch.Tensor, int | None]]

    @classmethod
    def of(cls, model: Any) -> StateWatch:
        return cls({path: (tensor, _version(tensor)) for path, tensor in _named_state(model).items()})

    def changed(self, model: Any) -> list[str]:
        """The paths whose tensor was written in place, replaced, added or removed since the watch began."""
        now = _named_state(model)
        paths = [path for path, (tensor, version) in self.recorded.items()
                 if now.get(path) is not tensor or _version(tensor) != version]  # fmt: skip
        return paths + [path for path in now if path not in self.recorded]

    def warn_if_changed(self, model: Any, name: str, prefix: str = "") -> None:
        """A :class:`kgeval.exceptions.ModelChangedWarning` naming what changed (``prefix`` before each path), if
        anything did."""
        changed = [prefix + path for path in self.changed(model)]
        if not changed:
            return
        shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        warn_caller(
            f"kgeval: {name} changed its own state while it was scored ({shown}: written in place or replaced): "
            "its scores may depend on the order the tasks were scored in, so these ranks may not be reproducible. "
            "Make its scoring methods free of side effects (no in-place writes to parameters or buffers), or "
            "evaluate a copy (copy.deepcopy(model)); a cache filled once and read the same way after is harmless "
            "(warnings.filterwarnings('ignore', category=kgeval.exceptions.ModelChangedWarning))",
            ModelChangedWarning,
        )
