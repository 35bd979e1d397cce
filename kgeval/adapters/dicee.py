"""dicee integration: ``dicee.models`` knowledge-graph-embedding models (every subclass of ``BaseKGE``) evaluated
unchanged, through the methods dicee's own evaluator scores with (:func:`dicee_view`), and dicee's experiment
folders read with their entity and relation indices (:func:`load_dicee_experiment`).

dicee scores tails against every entity with ``forward_k_vs_all(x=(h, r) batch)`` (the method its KvsAll
evaluation ranks with) and whole triples with ``forward_triples`` (its evaluation of heads, and of models without
an all-entity method). kgeval ranks through these methods, or through the query/candidate form they imply
(:class:`DiceeQueryCandidate`) where it computes the same scores.

**The fast path.** DistMult, ComplEx, QMult, OMult, Keci and CKeci compute ``forward_k_vs_all`` as
``k_vs_all_score(h, r, E)``, E the entity table, and that score is affine in E: a query vector q(h, r) dotted with
each entity's row, plus (Keci with p >= 2 or q >= 2) a constant of the query. kgeval reads q off the model's own
``k_vs_all_score``: its scores against the d unit vectors, less its score against the zero vector (that constant,
kept as an extra column of the form); the query vectors pass through the model's own representation, dropout and
normalisation modules (``get_head_relation_representation``), so the form follows them in evaluation mode, and the
probe against ``forward_k_vs_all`` refuses it where they act otherwise (dropout or batch norm in training mode).
Heads of a model trained with reciprocal relations are the tails of (t, r_inverse): the same form. Heads of a
model trained without them (scored by ``forward_triples``) are linear in the head's representation for DistMult,
ComplEx, QMult and OMult: the query is the model's own ``score`` of the d unit vectors with (r, t) as
``get_triple_representation`` gives them, the candidates the entity table through its head modules. Keci's heads
without reciprocals have no form: its ``forward_triples`` with p > 0 sums the terms of e_1..e_p over every tail of
the batch (an ``einsum('brp, erp -> b')``), so a triple's score depends on the batch it is scored in. Other dicee
models (TransE, RotatE, MuRE, TransH, the convolutional ConEx / ConvQ / ConvO and their attentive variants, DualE,
Pyke, Shallom, CoKE, DeCaL, KeciTransformer, the function-space and PyKEEN-wrapping models) are ranked through their
own methods; so are a user's subclass that redefines a scoring method (:data:`FORM_METHODS`) and a model with
sharded entity embeddings.

**Reciprocal relations.** dicee trains KvsAll, 1vsAll, AllvsAll, 1vsSample and KvsSample models on the triples
plus a reverse triple (t, r_inverse, h) for each (its ``apply_reciprical_or_noise``), with relation ids for
``r_inverse`` of their own (its relation index sorts every label, so r and r_inverse sit side by side, not R
apart), and evaluates them on the test triples plus their reverses, ranking tails only: the head of (h, r, t) is
ranked as the tail of (t, r_inverse, ?). kgeval ranks such a model's heads the same way, through
``forward_k_vs_all`` of (t, r_inverse), once it knows which id is whose inverse: from the experiment folder
(:func:`load_dicee_experiment`) or from the relation index given to :func:`with_relation_index`. A model whose
``args`` say it was trained with reciprocals but whose index kgeval was not given is refused (its inverse ids
cannot be told from the model alone). Models trained without them (NegSample) are ranked on both sides by
``forward_triples``, heads over candidate slices, as dicee's ``evaluate_lp`` ranks them.

dicee's evaluators (``dicee.evaluation``), for comparison: filtered (the known triples of train, valid and test
set to -inf), tails through ``forward_k_vs_all`` for KvsAll-trained models, heads and tails through
``forward_triples`` otherwise; the rank is the answer's position after ``torch.sort(descending=True)``, so among
tied scores it lies anywhere between kgeval's optimistic and pessimistic ranks (``torch.sort`` does not order ties),
and a filtered candidate set to -inf ties with an answer whose own score is -inf. kgeval reports the exact tie
bounds and the realistic mean.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from dicee import models as dicee_models
from dicee.models.base_model import BaseKGE, IdentityClass

from kgeval.adapters.overrides import foreign_override
from kgeval.typing import Target

__all__ = [
    "FORMS",
    "FORM_METHODS",
    "INVERSE_SUFFIX",
    "DiceeExperiment",
    "DiceeQueryCandidate",
    "DiceeScoring",
    "dicee_view",
    "inverse_relations",
    "is_dicee_experiment",
    "load_dicee_experiment",
    "with_relation_index",
]

#: the suffix dicee gives the label of a relation's reverse (``static_funcs.create_recipriocal_triples``)
INVERSE_SUFFIX = "_inverse"
#: the attribute of a dicee model through which kgeval knows its inverse relations: {relation id: inverse id}
INVERSE_ATTRIBUTE = "kgeval_inverse_relations"
#: the files of a dicee experiment folder kgeval reads
EXPERIMENT_FILES = ("configuration.json", "report.json", "model.pt", "entity_to_idx.csv", "relation_to_idx.csv")
#: dicee class name -> whether heads without reciprocal relations have the form (``forward_triples`` linear in the
#: head's representation, as ``score`` computes it); every class here has ``forward_k_vs_all`` =
#: ``k_vs_all_score(h, r, entity_embeddings.weight)``, affine in its entity table
FORMS: dict[str, bool] = {"DistMult": True, "ComplEx": True, "QMult": True, "OMult": True, "Keci": False,
                          "CKeci": False}  # fmt: skip
#: the methods through which these dicee models score: a subclass that redefines one may score otherwise than the
#: form read off them
FORM_METHODS: tuple[str, ...] = (
    "forward", "forward_k_vs_all", "k_vs_all_score", "forward_triples", "score", "get_head_relation_representation",
    "get_triple_representation", "construct_cl_multivector", "apply_coefficients", "compute_sigma_pp",
    "compute_sigma_qq", "compute_sigma_pq", "quaternion_normalizer", "octonion_normalizer",
)  # fmt: skip


def dicee_view(model: BaseKGE) -> DiceeScoring:
    """kgeval's model protocol over a dicee model (see the module docstring).

    Raises
    ------
    TypeError
        For byte-pair-encoded models (``byte_pair_encoding=True``: entities are token sequences, not ids), or a
        model without entity and relation counts.
    """
    if getattr(model, "byte_pair_encoding", False):
        raise TypeError(
            f"{type(model).__name__} is a byte-pair-encoded dicee model: it scores token sequences, not entity ids; "
            "kgeval cannot rank its entities by id"
        )
    for name in ("num_entities", "num_relations"):
        if not isinstance(getattr(model, name, None), int):
            raise TypeError(f"the dicee model {type(model).__name__} has no {name} (set in its args)")
    inverse = getattr(model, INVERSE_ATTRIBUTE, None)
    if inverse is None and trained_with_reciprocals(model):
        raise TypeError(
            f"the dicee model {type(model).__name__} was trained with reciprocal relations (its args: "
            f"scoring_technique={model.args.get('scoring_technique')!r}, apply_reciprical_or_noise=True): dicee ranks "
            "its heads as the tails of (t, r_inverse, ?), and which relation id is whose inverse is recorded only in "
            "its relation index. Load it with kgeval.adapters.dicee.load_dicee_experiment(folder), or pass its "
            "index with kgeval.adapters.dicee.with_relation_index(model, relation_to_idx)"
        )
    if not _form_class(model):
        return DiceeScoring(model, inverse)
    overridden = foreign_override(model, FORM_METHODS, "dicee")
    if overridden is not None:  # a subclass that scores differently keeps its own methods
        return DiceeScoring(model, inverse, refusal=f"{overridden} redefines dicee's scoring")
    return DiceeQueryCandidate(model, inverse)


def _form_class(model: BaseKGE) -> bool:
    """Whether ``model`` is of a dicee class of :data:`FORMS` (the nearest dicee class in its MRO, the class
    ``dicee.models`` exports under that name) with its entity table whole (not sharded)."""
    library = _library_class(model)
    if library is None or library.__name__ not in FORMS or getattr(dicee_models, library.__name__, None) is not library:
        return False
    return isinstance(getattr(model, "entity_embeddings", None), torch.nn.Embedding)


def _library_class(model: BaseKGE) -> type | None:
    """The nearest class of the ``dicee`` package in the MRO of ``model``'s class."""
    return next((cls for cls in type(model).__mro__ if (cls.__module__ or "").startswith("dicee.")), None)


def trained_with_reciprocal_args(args: Mapping[str, Any]) -> bool:
    """Whether dicee's training ``args`` (or configuration.json) add reciprocal triples."""
    return args.get("apply_reciprical_or_noise") is True


def trained_with_reciprocals(model: BaseKGE) -> bool:
    """Whether the model's ``args`` say it was trained on reciprocal triples (dicee's ``apply_reciprical_or_noise``,
    set by its preprocessing for KvsAll, 1vsAll, AllvsAll, 1vsSample and KvsSample)."""
    args = getattr(model, "args", None)
    return isinstance(args, Mapping) and trained_with_reciprocal_args(args)


def inverse_relations(relation_to_id: Mapping[str, int]) -> dict[int, int]:
    """{id of r: id of r_inverse} for every relation r whose reverse ``r + "_inverse"`` is in dicee's relation
    index ``relation_to_id`` (label -> id)."""
    return {
        int(identifier): int(relation_to_id[label + INVERSE_SUFFIX])
        for label, identifier in relation_to_id.items()
        if label + INVERSE_SUFFIX in relation_to_id
    }


def with_relation_index(model: BaseKGE, relation_to_id: Mapping[str, int] | pd.DataFrame) -> BaseKGE:
    """``model`` told its relation index (dicee's ``relation_to_idx``: a label -> id mapping, or dicee's DataFrame
    with a ``relation`` column indexed by id), so that kgeval ranks the heads of a model trained with reciprocal
    relations as dicee does. Sets the model's ``kgeval_inverse_relations`` and returns the model.

    Raises
    ------
    ValueError
        When the index does not fit the model (another count of relations), or a model trained with reciprocals
        has relations without a reverse in it.
    """
    index = _relation_index(relation_to_id)
    if len(index) != model.num_relations or sorted(index.values()) != list(range(model.num_relations)):
        raise ValueError(f"the relation index holds {len(index)} relations with ids {min(index.values(), default=0)}"
                         f"..{max(index.values(), default=-1)}, the dicee model {model.num_relations}: it is the "
                         "index of another model")  # fmt: skip
    pairs = inverse_relations(index)
    if trained_with_reciprocals(model):
        real = [label for label in index if not label.endswith(INVERSE_SUFFIX)]
        lonely = [label for label in real if label + INVERSE_SUFFIX not in index]
        if lonely or len(real) * 2 != len(index):
            raise ValueError(f"the dicee model was trained with reciprocal relations, but its relation index pairs "
                             f"{len(pairs)} of {len(index)} relations (e.g. {lonely[:3]} have no reverse)")  # fmt: skip
    setattr(model, INVERSE_ATTRIBUTE, pairs if pairs else None)
    return model


def _relation_index(relation_to_id: Mapping[str, int] | pd.DataFrame) -> dict[str, int]:
    if isinstance(relation_to_id, pd.DataFrame):
        if "relation" not in relation_to_id.columns:
            raise ValueError(f"dicee's relation index has a 'relation' column, got {list(relation_to_id.columns)}")
        return {str(label): int(i) for i, label in zip(relation_to_id.index, relation_to_id["relation"], strict=True)}
    return {str(label): int(i) for label, i in relation_to_id.items()}


def _implements(model: BaseKGE, method: str) -> bool:
    """Whether ``model``'s class defines ``method`` below BaseKGE (whose versions raise 'does not have ...')."""
    return getattr(type(model), method, None) is not getattr(BaseKGE, method, None)


class DiceeScoring:
    """A dicee model's scores for kgeval: ``score_t`` through ``forward_k_vs_all`` when the model has it, whole
    triples through ``forward_triples``, and for a model trained with reciprocal relations (``inverse``: {relation
    id: its inverse's id}) ``score_h`` as the tails of (t, r_inverse); its entity / relation counts and device.
    ``kgeval_form_refused`` says why a fast path is not used (None: it is, or there is none)."""

    def __init__(self, model: BaseKGE, inverse: Mapping[int, int] | None = None, refusal: str | None = None) -> None:
        self.model = model
        self.kgeval_form_refused = refusal
        self.num_entities: int = model.num_entities
        self.num_relations: int = model.num_relations
        if _implements(model, "forward_k_vs_all"):
            self.score_t = self._score_t
        self._inverse_of: torch.Tensor | None = None
        if inverse:
            if not _implements(model, "forward_k_vs_all"):
                raise TypeError(f"the dicee model {type(model).__name__} has reciprocal relations but no "
                                "forward_k_vs_all to rank (t, r_inverse, ?) with")  # fmt: skip
            lookup = torch.full((model.num_relations,), -1, dtype=torch.long, device="cpu")
            relations = torch.tensor(list(inverse), dtype=torch.long, device="cpu")
            lookup[relations] = torch.tensor(list(inverse.values()), device="cpu")
            self._inverse_of = lookup
            self.score_h = self._score_h_reciprocal

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def _score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
        """(B, num_entities) scores of (h, r, e) for every entity e: ``forward_k_vs_all(x=hr_batch)``."""
        return self.model.forward_k_vs_all(x=hr_batch)

    def _score_h_reciprocal(self, rt_batch: torch.Tensor) -> torch.Tensor:
        """(B, num_entities) scores of (e, r, t) for every entity e, as dicee ranks heads of a model trained with
        reciprocal relations: ``forward_k_vs_all`` of (t, r_inverse)."""
        lookup = self._inverse_of.to(rt_batch.device)  # type: ignore[union-attr]
        inverse = lookup[rt_batch[:, 0]]
        if bool((inverse < 0).any()):
            relation = int(rt_batch[(inverse < 0).nonzero()[0, 0], 0])
            raise ValueError(f"relation {relation} has no inverse relation in the dicee model's index (it is an "
                             "inverse relation itself): evaluate the original triples, whose heads kgeval ranks "
                             "through the inverse relations")  # fmt: skip
        return self.model.forward_k_vs_all(x=torch.stack([rt_batch[:, 1], inverse], dim=1))

    def score_hrt(self, hrt_batch: torch.Tensor) -> torch.Tensor:
        """(n,) scores of (h, r, t) rows: ``forward_triples``."""
        return self.model.forward_triples(hrt_batch).reshape(-1)


class DiceeQueryCandidate(DiceeScoring):
    """:class:`DiceeScoring` with the query/candidate form of a dicee model of :data:`FORMS` (the module docstring):
    tails, heads through reciprocal relations, and heads through ``score`` where the class allows it
    (``kgeval_targets``). Candidates are the entity table as the model's method reads it, with a column of ones
    where its score has a constant of the query (Keci with p >= 2 or q >= 2: the last query column). The class
    check was made on the model (:func:`dicee_view`): the view's own methods, bound per instance, are no subclass's
    (``kgeval_form_checked``); the probe still compares the two."""

    kgeval_similarity = "dot"
    kgeval_form_checked = True

    def __init__(self, model: BaseKGE, inverse: Mapping[int, int] | None = None) -> None:
        super().__init__(model, inverse)
        name = type(model).__name__ if (library := _library_class(model)) is None else library.__name__
        self._constant = name in ("Keci", "CKeci") and (model.p >= 2 or model.q >= 2)
        heads_by_score = FORMS[name] and isinstance(model.hidden_normalizer, IdentityClass)
        reciprocal = self._inverse_of is not None
        self.kgeval_targets: tuple[Target, ...] = ("head", "tail") if reciprocal or heads_by_score else ("tail",)

    def kgeval_query(self, batch: torch.Tensor, target: Target) -> torch.Tensor:
        """(B, d) queries (one more column for Keci's constant) from (h, r) rows (target "tail") or (r, t) rows
        (target "head")."""
        if target == "tail":
            return self._tail_query(batch)
        if self._inverse_of is not None:
            inverse = self._inverse_of.to(batch.device)[batch[:, 0]]
            if bool((inverse < 0).any()):
                self._score_h_reciprocal(batch)  # raises its error
            return self._tail_query(torch.stack([batch[:, 1], inverse], dim=1))
        return self._head_query(batch)

    def kgeval_candidates(self, target: Target) -> torch.Tensor:
        """The (num_entities, d) entity table as the model's scoring method reads it: raw for
        ``forward_k_vs_all``, through its head modules for ``forward_triples``' heads."""
        model = self.model
        table = model.entity_embeddings.weight
        if target == "head" and self._inverse_of is None:
            table = model.normalize_head_entity_embeddings(model.input_dp_ent_real(table))
        if self._constant:
            table = torch.cat([table, torch.ones_like(table[:, :1])], dim=1)
        return table

    def _tail_query(self, hr_batch: torch.Tensor) -> torch.Tensor:
        """q(h, r) off ``k_vs_all_score``: its scores of the unit vectors less its score of the zero vector."""
        model = self.model
        head, relation = model.get_head_relation_representation(hr_batch)
        dim = model.entity_embeddings.weight.shape[1]
        basis = torch.cat([torch.eye(dim, dtype=head.dtype, device=head.device), head.new_zeros(1, dim)])
        scores = model.k_vs_all_score(head, relation, basis)
        constant = scores[:, dim:]
        if self._constant:
            return torch.cat([scores[:, :dim] - constant, constant], dim=1)
        return scores[:, :dim]

    def _head_query(self, rt_batch: torch.Tensor) -> torch.Tensor:
        """q(r, t) off ``score``: the scores of the unit vectors as heads with (r, t) as ``forward_triples`` reads
        them (linear in the head: no constant)."""
        model = self.model
        rows = torch.stack([rt_batch[:, 1], rt_batch[:, 0], rt_batch[:, 1]], dim=1)
        _head, relation, tail = model.get_triple_representation(rows)
        batch, dim = tail.shape
        basis = torch.eye(dim, dtype=tail.dtype, device=tail.device).repeat(batch, 1)
        scores = model.score(basis, relation.repeat_interleave(dim, dim=0), tail.repeat_interleave(dim, dim=0))
        return scores.reshape(batch, dim)


@dataclass(frozen=True)
class DiceeExperiment:
    """A dicee experiment folder as :func:`load_dicee_experiment` read it.

    Attributes
    ----------
    model : dicee.models.base_model.BaseKGE
        The trained model, in evaluation mode, told its relation index (:func:`with_relation_index`).
    entity_to_id, relation_to_id : dict of str to int
        dicee's indices (``entity_to_idx.csv``, ``relation_to_idx.csv``); the relation index holds the
        ``_inverse`` relations of a model trained with reciprocals. Pass them to
        :func:`kgeval.datasets.load_tsv_dataset` to read the dataset with the model's ids.
    configuration : dict
        ``configuration.json``: how dicee trained the model (``scoring_technique``, ``dataset_dir``, ...).
    reciprocal : bool
        Whether the model was trained with reciprocal relations (its heads are ranked through them).
    """

    model: Any
    entity_to_id: dict[str, int]
    relation_to_id: dict[str, int]
    configuration: dict[str, Any]
    reciprocal: bool


def is_dicee_experiment(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` holds a dicee experiment's model, configuration and indices."""
    return all((Path(folder) / name).is_file() for name in EXPERIMENT_FILES)


def load_dicee_experiment(folder: str | os.PathLike[str]) -> DiceeExperiment:
    """The model of a dicee experiment folder (``Execute``'s ``path_to_store_single_run``) with its indices.

    The model is built from ``configuration.json`` and ``report.json`` by dicee's own ``load_model``, its weights
    read from ``model.pt`` (plain tensors: no code from the file runs); the indices are dicee's CSV files. The
    counts are checked against each other.

    Raises
    ------
    ValueError
        For a folder that is not a dicee experiment, a byte-pair-encoded model, or indices that do not fit the model.
    """
    location = Path(os.fspath(folder))
    missing = [name for name in EXPERIMENT_FILES if not (location / name).is_file()]
    if missing:
        raise ValueError(f"{str(location)!r} is not a dicee experiment folder: it has no {', '.join(missing)}")
    configuration = json.loads((location / "configuration.json").read_text())
    if configuration.get("byte_pair_encoding"):
        raise ValueError(f"{str(location)!r} holds a byte-pair-encoded dicee model: it scores token sequences, not "
                         "entity ids; kgeval cannot rank its entities by id")  # fmt: skip
    from dicee.static_funcs import load_model

    model, (entity_to_id, relation_to_id) = load_model(str(location))
    entity_to_id = {str(label): int(i) for label, i in entity_to_id.items()}
    if len(entity_to_id) != model.num_entities or sorted(entity_to_id.values()) != list(range(model.num_entities)):
        raise ValueError(f"{str(location)!r}: entity_to_idx.csv holds {len(entity_to_id)} entities, the model "
                         f"{model.num_entities}")  # fmt: skip
    model = with_relation_index(model, relation_to_id)
    return DiceeExperiment(
        model=model.eval(),
        entity_to_id=entity_to_id,
        relation_to_id=_relation_index(relation_to_id),
        configuration=configuration,
        reciprocal=trained_with_reciprocals(model),
    )
