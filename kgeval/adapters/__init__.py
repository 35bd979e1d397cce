"""Adapters: what makes a model scoreable by kgeval's engine, below it -- models of other libraries (PyKEEN,
PyTorch Geometric, TorchKGE, dicee) scored the way their own library scores them, and models inside torch's
wrappers. :func:`scoring_view` takes off the wrappers (``torch.compile``, ``DataParallel``,
``DistributedDataParallel``, ``AveragedModel``, Lightning Fabric; :mod:`kgeval.adapters.wrappers`) and returns an
adapter's view of a model it recognises, importing that adapter (and its library) only then. The drop-ins that put
kgeval inside other libraries' machinery are in :mod:`kgeval.integrations`.
"""

from __future__ import annotations

import sys
from typing import Any

from kgeval._model_state import without_max_norm
from kgeval.adapters.devices import model_device
from kgeval.adapters.inductive import mode_view
from kgeval.adapters.wrappers import SCORING_ATTRIBUTES, delegate_of, unwrap
from kgeval.protocol import SIMILARITIES, QueryCandidateModel
from kgeval.typing import InductiveMode

__all__ = [
    "held_form",
    "model_device",
    "query_candidate_form",
    "refuse_exported_program",
    "scores_itself",
    "scoring_view",
    "without_max_norm",
]


def scoring_view(model: Any, mode: InductiveMode | None = None) -> Any:
    """The object to score ``model`` through: an adapter's view of the model inside any of torch's wrappers, or
    that model itself; with an inductive ``mode``, the model bound to the graph of that mode
    (:mod:`kgeval.adapters.inductive`).

    Raises
    ------
    TypeError
        When an adapter recognises the model but kgeval cannot score it the way its library does, or a ``mode``
        is given for a model that does not score per mode.
    ValueError
        For a mode the model does not know, or a model of kgeval's inductive protocol without a ``mode``.
    """
    model = unwrap(model).model
    pykeen_models = sys.modules.get("pykeen.models")
    if pykeen_models is not None and isinstance(model, pykeen_models.Model):
        from kgeval.adapters.pykeen import pykeen_view

        return pykeen_view(model, mode)
    if mode is not None:
        return mode_view(model, mode)
    if callable(getattr(model, "kgeval_num_entities", None)):  # kgeval's inductive protocol: a graph per mode
        raise ValueError(
            f"{type(model).__name__} scores the entities of one graph per inductive mode (kgeval_num_entities(mode)): "
            "pass mode='training', 'validation' or 'testing', the graph the evaluated triples' ids belong to "
            "(without it, inference-graph ids would be ranked among the training graph's entities)"
        )
    pyg_kge = sys.modules.get("torch_geometric.nn.kge")
    if pyg_kge is not None and isinstance(model, pyg_kge.KGEModel):
        from kgeval.adapters.pyg import pyg_view

        return pyg_view(model)
    torchkge_models = sys.modules.get("torchkge.models.interfaces")
    if torchkge_models is not None and isinstance(model, torchkge_models.Model):
        from kgeval.adapters.torchkge import torchkge_view

        return torchkge_view(model)
    dicee_models = sys.modules.get("dicee.models.base_model")
    if dicee_models is not None and isinstance(model, dicee_models.BaseKGE):
        from kgeval.adapters.dicee import dicee_view

        return dicee_view(model)
    return model


def refuse_exported_program(model: Any) -> None:
    """TypeError for a ``torch.export.ExportedProgram`` scored without a ``score_fn``: a program, not a module; its
    ``module()`` is one."""
    exported = getattr(sys.modules.get("torch.export"), "ExportedProgram", None)
    if exported is not None and isinstance(model, exported):
        raise TypeError(
            "this is a torch.export ExportedProgram, which is not a module kgeval can call: evaluate "
            "exported.module() (its forward(h, r, t) scores triples; export it with a dynamic first dimension), or "
            "pass the original model"
        )


def query_candidate_form(model: Any) -> Any | None:
    """The object exposing the query/candidate form (:class:`kgeval.protocol.QueryCandidateModel`) for ``model``
    (itself or an adapter's view), or None.

    Raises
    ------
    ValueError
        For a form whose ``kgeval_similarity`` is none of :data:`kgeval.protocol.SIMILARITIES`.
    """
    model = scoring_view(model)
    if isinstance(model, QueryCandidateModel):
        similarity = model.kgeval_similarity
        if similarity not in SIMILARITIES:
            raise ValueError(f"model.kgeval_similarity must be one of {SIMILARITIES}, got {similarity!r}")
        return model
    return None


def held_form(model: Any) -> Any | None:
    """The query/candidate form of the one model ``model`` holds that has one (a LightningModule's ``self.model``),
    or None. Holding it proves nothing about how ``model`` scores: kgeval's probe compares the two before the form
    is used (kgeval._engine.scorer_choice)."""
    found = delegate_of(model, _has_form)
    return None if found is None else query_candidate_form(found[1])


def _has_form(model: Any) -> bool:
    try:
        return query_candidate_form(model) is not None
    except (TypeError, ValueError):  # an adapter refuses the model, or a malformed form: not a delegate
        return False


def scores_itself(model: Any) -> bool:
    """Whether ``model`` has a scoring method kgeval ranks with, or is a model of a library kgeval integrates (what
    makes a held model the one a holder delegates to)."""
    try:
        view = scoring_view(model)
    except TypeError:  # a library's model kgeval refuses
        return False
    return view is not model or any(
        callable(getattr(model, name, None)) for name in SCORING_ATTRIBUTES if name != "kgeval_similarity"
    )
