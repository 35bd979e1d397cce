"""Inductive models bound to the graph of one mode (``evaluate(..., mode="testing")``): kgeval's protocol for a
model that scores against the entities of an inference graph it did not train on (docs/inductive.md).

An inductive model keeps one entity space per graph -- the training graph's, and the inference graph's that
validation and test triples live in (PyKEEN's modes ``"training"``, ``"validation"``, ``"testing"``) -- and one
relation space shared by all, or (fully inductive) one per graph too. kgeval's protocol is PyKEEN's, public:

- ``kgeval_num_entities(mode) -> int``: the number of entities of the mode's graph (the candidates);
- optionally ``kgeval_num_relations(mode) -> int``: the number of relations of the mode's graph, for a fully
  inductive model whose inference graph has relations of its own (new ones included); without it the relations
  are ``num_relations``, shared by every graph;
- ``score_t(hr_batch, *, tails=None, mode)`` / ``score_h(rt_batch, *, heads=None, mode)`` (and ``score_r`` to rank
  relations): the scores of the mode's entities, as :class:`kgeval.protocol.ScoringModel` has them;
- optionally the query/candidate form with a mode: ``kgeval_query(batch, target, *, mode)``,
  ``kgeval_candidates(target, *, mode)`` and ``kgeval_similarity`` (:class:`kgeval.protocol.QueryCandidateModel`).

PyKEEN's inductive models (``InductiveNodePiece``, ``InductiveNodePieceGNN``, any ``InductiveERModel``) need none
of it: :mod:`kgeval.adapters.pykeen` scores them per mode as PyKEEN predicts. A model that is simply built over the
inference graph (a PyTorch Geometric encoder given that graph's edges) is an ordinary model of that graph's entity
ids and needs no mode at all.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from kgeval._counts import declared_count
from kgeval.adapters.devices import model_device
from kgeval.adapters.signatures import candidate_argument
from kgeval.typing import INDUCTIVE_MODES, InductiveMode

__all__ = ["ModeBound", "ModeBoundQueryCandidate", "check_mode", "mode_view"]


def check_mode(mode: Any) -> InductiveMode:
    """``mode`` as one of :data:`kgeval.typing.INDUCTIVE_MODES` (PyKEEN's inductive modes: the graph the training,
    the validation and the test triples live in), or a ValueError naming them."""
    if mode not in INDUCTIVE_MODES:
        raise ValueError(f"mode must be None (transductive) or one of {INDUCTIVE_MODES}, got {mode!r}")
    return mode


def mode_view(model: Any, mode: InductiveMode) -> ModeBound:
    """``model`` (kgeval's inductive protocol, see the module docstring) bound to ``mode``'s graph.

    Raises
    ------
    TypeError
        For a model without ``kgeval_num_entities(mode)``: it does not score per mode (a model built over the
        inference graph is evaluated without ``mode``).
    ValueError
        For an unknown mode, or a count that is not a positive int.
    """
    check_mode(mode)
    counter = getattr(model, "kgeval_num_entities", None)
    if not callable(counter):
        raise TypeError(f"mode={mode!r} is for models that score per inductive mode: {type(model).__name__} has no "
                        "kgeval_num_entities(mode) (kgeval.adapters.inductive). A model built over the inference "
                        "graph scores its entity ids as they are: evaluate it without mode")  # fmt: skip
    has_form = all(callable(getattr(model, name, None)) for name in ("kgeval_query", "kgeval_candidates"))
    bound = ModeBoundQueryCandidate if has_form and hasattr(model, "kgeval_similarity") else ModeBound
    return bound(model, mode)


def _mode_relations(model: Any, mode: InductiveMode) -> Any:
    """The relations of the mode's graph: ``model.kgeval_num_relations(mode)`` where the model has it (a fully
    inductive model: a relation vocabulary per graph), else ``model.num_relations`` (one vocabulary shared by every
    graph), else None."""
    counter = getattr(model, "kgeval_num_relations", None)
    if not callable(counter):
        return getattr(model, "num_relations", None)
    declared = counter(mode)
    count = declared_count(declared)
    if count is None or count < 1:
        raise ValueError(f"{type(model).__name__}.kgeval_num_relations({mode!r}) must be a positive int, got "
                         f"{declared!r}")  # fmt: skip
    return count


class ModeBound:
    """A model of kgeval's inductive protocol bound to one mode: the scoring methods of :mod:`kgeval.protocol`,
    each calling the model's with ``mode=``.

    Attributes
    ----------
    model : object
    mode : str
    num_entities : int
        ``model.kgeval_num_entities(mode)``: the entities of the mode's graph, every one a candidate.
    num_relations : int, optional
        The relations of the mode's graph: ``model.kgeval_num_relations(mode)`` where the model has it (fully
        inductive: a relation vocabulary per graph), else ``model.num_relations`` (shared by every graph).
    """

    def __init__(self, model: Any, mode: InductiveMode) -> None:
        self.model = model
        self.mode = mode
        declared = model.kgeval_num_entities(mode)
        count = declared_count(declared)  # a NumPy integer or a one-element integer tensor is a count too
        if count is None or count < 1:
            raise ValueError(f"{type(model).__name__}.kgeval_num_entities({mode!r}) must be a positive int, got "
                             f"{declared!r}")  # fmt: skip
        self.num_entities = count
        relations = _mode_relations(model, mode)
        if relations is not None:
            self.num_relations = relations
        if getattr(model, "kgeval_measure_memory", False) is True:  # batches sized from its memory (on_graphs)
            self.kgeval_measure_memory = True
        for name in ("score_r", "score_hrt"):  # optional: bound where the model has them
            method = getattr(model, name, None)
            if callable(method):
                setattr(self, name, functools.partial(method, mode=mode))  # its signature keeps relations=

    @property
    def device(self) -> torch.device:
        return model_device(self.model)

    def score_t(self, hr_batch: torch.Tensor, **candidates: Any) -> torch.Tensor:
        """(B, ``|tails|``) scores of (h, r, e) for the mode's entities e: ``model.score_t(hr_batch, mode=mode)``."""
        return self._scores("score_t", hr_batch, candidates.get("tails"), "tails")

    def score_h(self, rt_batch: torch.Tensor, **candidates: Any) -> torch.Tensor:
        """(B, ``|heads|``) scores of (e, r, t) for the mode's entities e: ``model.score_h(rt_batch, mode=mode)``."""
        return self._scores("score_h", rt_batch, candidates.get("heads"), "heads")

    def _scores(self, name: str, batch: torch.Tensor, ids: torch.Tensor | None, argument: str) -> torch.Tensor:
        """The model's method in the mode, given the candidate ids where it takes them (else its whole rows,
        cut to them)."""
        method = getattr(self.model, name, None)
        if not callable(method):
            raise TypeError(f"{type(self.model).__name__} has no {name}(batch, mode=...) (kgeval.adapters.inductive)")
        if ids is None:
            return method(batch, mode=self.mode)
        taken = candidate_argument(method, argument)
        if taken == "keyword":
            return method(batch, mode=self.mode, **{argument: ids})
        if taken == "positional":
            return method(batch, ids, mode=self.mode)
        return method(batch, mode=self.mode)[:, ids]


class ModeBoundQueryCandidate(ModeBound):
    """:class:`ModeBound` with the model's query/candidate form for the mode (the candidates: the mode's entities)."""

    def __init__(self, model: Any, mode: InductiveMode) -> None:
        super().__init__(model, mode)
        self.kgeval_similarity = model.kgeval_similarity
        targets = getattr(model, "kgeval_targets", None)
        if targets is not None:
            self.kgeval_targets = targets

    def kgeval_query(self, batch: torch.Tensor, target: str) -> torch.Tensor:
        """(B, d) queries of the mode's graph."""
        return self.model.kgeval_query(batch, target, mode=self.mode)

    def kgeval_candidates(self, target: str) -> torch.Tensor:
        """(num_entities, d) candidates: the mode's entities."""
        return self.model.kgeval_candidates(target, mode=self.mode)
