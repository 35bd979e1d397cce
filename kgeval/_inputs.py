"""The boundary of an evaluation: the model resolved once (:class:`ResolvedModel`) and the arguments checked once
(:class:`CheckedInputs`), on the model's device. The evaluator, the sampled evaluator and ``predict_top_k`` build
them here; the engine receives them and settles nothing about the model again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kgeval import _checks
from kgeval._fingerprints import callable_fingerprint
from kgeval._tasks import tasks_inside_constraints, tasks_inside_restriction
from kgeval.adapters import held_form, model_device, query_candidate_form, refuse_exported_program, scoring_view
from kgeval.adapters.triples import triple_function
from kgeval.adapters.wrappers import describe
from kgeval.constraints import TypeConstraints
from kgeval.protocol import SHARD_METHOD
from kgeval.typing import InductiveMode, Target

__all__ = [
    "CheckedInputs",
    "ModelInputs",
    "RequestedSizes",
    "ResolvedModel",
    "check_evaluation_inputs",
    "check_model_inputs",
    "check_type_constraints",
    "check_whitelist",
    "resolve_model",
]

#: the scoring method of each target (PyKEEN's names)
SCORE_METHOD: dict[Target, str] = {"tail": "score_t", "head": "score_h", "relation": "score_r"}


@dataclass(frozen=True)
class ResolvedModel:
    """A model as kgeval scores it, settled once.

    Attributes
    ----------
    model : object
        As the caller handed it over: its modes, its evaluation lock and its fingerprint are this object's.
    view : object
        What it is scored through: the model inside any of torch's wrappers, or an adapter's view of it
        (:func:`kgeval.adapters.scoring_view`).
    name : str
        How messages name it, its wrappers included (``"DistMult (inside DataParallel)"``).
    device : torch.device
        Where it lives (and is evaluated).
    form : object or None
        Its query/candidate form (:class:`kgeval.protocol.QueryCandidateModel`), None without one.
    held_form : object or None
        Without a form of its own, the form of the one model it holds (a delegating module), which the probe must
        find to agree with its methods before it is used; else None.
    """

    model: Any
    view: Any
    name: str
    device: torch.device
    form: Any | None
    held_form: Any | None

    @property
    def declares_shard(self) -> bool:
        """Whether its form declares a shard of a candidate table held across ranks (kgeval._engine.sharding)."""
        return self.form is not None and callable(getattr(self.form, SHARD_METHOD, None))


def resolve_model(model: Any, device: Any = None, mode: InductiveMode | None = None) -> ResolvedModel:
    """``model`` resolved into what kgeval scores it through (see :class:`ResolvedModel`); ``device`` (PyKEEN's
    argument) must be None or the model's own device; ``mode``: the inductive mode whose graph it scores
    (:mod:`kgeval.adapters.inductive`), None for a transductive evaluation.

    Raises
    ------
    TypeError
        When an adapter recognises the model but kgeval cannot score it the way its library does.
    ValueError
        For a model on the meta device, another ``device``, or a malformed query/candidate form.
    """
    if isinstance(model, ResolvedModel):
        return model
    view = scoring_view(model, mode)
    where = model_device(view)
    _checks.check_device(device, where)
    form = query_candidate_form(view)
    return ResolvedModel(model, view, describe(model), where, form, held_form(view) if form is None else None)


@dataclass(frozen=True)
class RequestedSizes:
    """The batch and slice sizes a caller asked for, and the memory budget in bytes automatic sizes stay within
    (None: chosen from the device's memory, kgeval._engine.sizes)."""

    batch_size: int | None = None
    slice_size: int | None = None
    memory_budget: int | None = None


@dataclass(frozen=True)
class CheckedInputs:
    """The checked arguments of one evaluation, on the model's device.

    Attributes
    ----------
    model : ResolvedModel
    triples : LongTensor of shape (n, 3)
        The evaluated triples (``mapped_triples``), always part of the filter set.
    filter_triples : tuple of LongTensor of shape (m, 3)
        The additional known triples, on the device the caller has them on (the filter index copies them to the
        model's device when it builds itself, not on every call).
    task_index : LongTensor
        The rows of ``triples`` to rank (inside the restrictions and type constraints), in order.
    num_entities : int
    num_relations : int or None
        The model's relation count, None when it declares none.
    targets : tuple of str
    candidate_ids : LongTensor or None
        The sorted entity whitelist (``restrict_entities_to``); None: every entity.
    relation_ids : LongTensor or None
        ``restrict_relations_to``; None: every relation.
    constraints : TypeConstraints or None
    score_fn : callable or None
        Scores whole triples instead of the model's methods.
    sizes : RequestedSizes
    drop_outside_restriction : bool
    also_filter_triples : tuple of LongTensor of shape (m, 3)
        The known triples a second, wider filter level adds (``also_filter_triples``); empty: one level.
    """

    model: ResolvedModel
    triples: torch.Tensor
    filter_triples: tuple[torch.Tensor, ...]
    task_index: torch.Tensor
    num_entities: int
    num_relations: int | None
    targets: tuple[Target, ...]
    candidate_ids: torch.Tensor | None
    relation_ids: torch.Tensor | None
    constraints: TypeConstraints | None
    score_fn: Any
    sizes: RequestedSizes
    drop_outside_restriction: bool
    also_filter_triples: tuple[torch.Tensor, ...] = ()

    def identity(self) -> dict[str, Any]:
        """What makes two evaluations the same evaluation: the inputs every rank of a distributed evaluation must
        share, and a resumed evaluation must find in its progress file (compared as content fingerprints,
        kgeval._engine.distributed.fingerprint)."""
        constraints = self.constraints
        return {
            "mapped_triples": self.triples,
            "additional_filter_triples": list(self.filter_triples),
            "restrict_entities_to": self.candidate_ids,
            "restrict_relations_to": self.relation_ids,
            "drop_outside_restriction": self.drop_outside_restriction,
            "num_entities": self.num_entities,
            "targets": self.targets,
            "type_constraints": None if constraints is None else (
                sorted((r, tuple(ids.tolist())) for r, ids in constraints.heads.items()),
                sorted((r, tuple(ids.tolist())) for r, ids in constraints.tails.items()),
            ),
            "score_fn": None if self.score_fn is None else callable_fingerprint(self.score_fn),
            # only when given, so the progress files of one-level evaluations keep their identity
            **({"also_filter_triples": list(self.also_filter_triples)} if self.also_filter_triples else {}),
        }  # fmt: skip


@dataclass(frozen=True)
class ModelInputs:
    """A resolved model and the counts it is ranked with (:func:`check_model_inputs`)."""

    model: ResolvedModel
    num_entities: int
    num_relations: int | None  #: None when the model declares none (relation ids then need only be >= 0)


def check_model_inputs(
    model: Any,
    targets: Sequence[Target],
    num_entities: Any = None,
    score_fn: Any = None,
    device: Any = None,
    mode: InductiveMode | None = None,
) -> ModelInputs:
    """The model resolved (:func:`resolve_model`, in ``mode``), checked to score every one of ``targets`` (through
    its methods, whole triples or ``score_fn``; a sharded candidate table through its form), and its entity and
    relation counts (an inductive mode's: that graph's entities); shared by the evaluator, the sampled evaluator and
    ``predict_top_k``."""
    resolved = resolve_model(model, device, mode)
    view = resolved.view
    if score_fn is None:
        refuse_exported_program(view)
    scores_triples = score_fn is not None or (
        not all(callable(getattr(view, SCORE_METHOD[target], None)) for target in targets)
        and triple_function(view) is not None
    )
    ranked_by_methods = [t for t in targets if t == "relation"] if resolved.declares_shard else targets
    _checks.check_model(view, ranked_by_methods, scores_triples, resolved.name)  # a shard is ranked by its form
    entities = _checks.check_num_entities(view, num_entities, resolved.name)
    return ModelInputs(resolved, entities, _checks.model_num_relations(view))


def check_whitelist(restrict_entities_to: Any, num_entities: int, device: torch.device) -> torch.Tensor | None:
    """``restrict_entities_to`` as sorted unique entity ids on ``device``, or None (every entity a candidate)."""
    if restrict_entities_to is None:
        return None
    return _checks.check_entity_ids(restrict_entities_to, "restrict_entities_to", num_entities).to(device)


def check_type_constraints(type_constraints: Any, num_entities: int) -> None:
    """``type_constraints`` is None or a :class:`kgeval.TypeConstraints` whose ids are entities."""
    if type_constraints is None:
        return
    if not isinstance(type_constraints, TypeConstraints):
        raise TypeError(f"type_constraints must be a kgeval.TypeConstraints, got {type(type_constraints).__name__}")
    type_constraints.check(num_entities)


def check_evaluation_inputs(
    model: Any,
    mapped_triples: Any,
    *,
    additional_filter_triples: Any = None,
    num_entities: Any = None,
    restrict_entities_to: Any = None,
    targets: Any = ("head", "tail"),
    batch_size: Any = None,
    slice_size: Any = None,
    memory_budget: Any = None,
    drop_outside_restriction: bool = False,
    restrict_relations_to: Any = None,
    score_fn: Any = None,
    type_constraints: Any = None,
    device: Any = None,
    mode: InductiveMode | None = None,
    also_filter_triples: Any = None,
) -> CheckedInputs:
    """The arguments of an evaluation, checked and moved to the model's device (see ``RankBasedEvaluator.evaluate``
    for each); a ValueError / TypeError naming the offending argument (and, for triples, the first offending row)
    otherwise."""
    targets = _checks.check_targets(targets)
    model_inputs = check_model_inputs(model, targets, num_entities, score_fn, device, mode)
    resolved, num_entities, num_relations = model_inputs.model, model_inputs.num_entities, model_inputs.num_relations
    device = resolved.device
    if "relation" in targets and num_relations is None:
        raise ValueError(
            "ranking relations (targets with 'relation') needs the model's number of relations: give the model "
            "a positive int attribute num_relations"
        )
    triples = _checks.check_triples(mapped_triples, "mapped_triples", num_entities, num_relations, read_ranges=False)
    known = _checks.check_filter_triples(additional_filter_triples, num_entities, num_relations, read_ranges=False)
    wider = _checks.check_filter_triples(also_filter_triples, num_entities, num_relations, read_ranges=False,
                                         argument="also_filter_triples")  # fmt: skip
    named = [(triples, "mapped_triples"), *((t, f"additional_filter_triples[{i}]") for i, t in enumerate(known)),
             *((t, f"also_filter_triples[{i}]") for i, t in enumerate(wider))]  # fmt: skip
    _checks.check_id_ranges(named, num_entities, num_relations)  # one read for every tensor of ids
    triples = triples.to(device)
    candidate_ids = check_whitelist(restrict_entities_to, num_entities, device)
    relation_ids = None
    if restrict_relations_to is not None:
        relation_ids = _checks.check_relation_ids(restrict_relations_to, "restrict_relations_to").to(device)
    check_type_constraints(type_constraints, num_entities)
    task_index = tasks_inside_restriction(triples, candidate_ids, num_entities, drop_outside_restriction, relation_ids)
    if type_constraints is not None:
        task_index = tasks_inside_constraints(triples, task_index, type_constraints, targets, drop_outside_restriction)
    if task_index.numel() == 0 and relation_ids is not None:
        raise ValueError(
            f"no triple of mapped_triples is left to evaluate with restrict_relations_to={relation_ids.tolist()}"
        )
    if task_index.numel() == 0:
        raise ValueError("mapped_triples is empty: there is nothing to evaluate")
    return CheckedInputs(
        model=resolved,
        triples=triples,
        filter_triples=tuple(known),  # where the caller has them: the filter index moves them only when it is built
        task_index=task_index,
        num_entities=num_entities,
        num_relations=num_relations,
        targets=targets,
        candidate_ids=candidate_ids,
        relation_ids=relation_ids,
        constraints=type_constraints,
        score_fn=score_fn,
        sizes=RequestedSizes(
            _checks.check_positive_int(batch_size, "batch_size", allow_none=True),
            _checks.check_positive_int(slice_size, "slice_size", allow_none=True),
            _checks.check_positive_int(memory_budget, "memory_budget", allow_none=True),
        ),
        drop_outside_restriction=bool(drop_outside_restriction),
        also_filter_triples=tuple(wider),
    )
