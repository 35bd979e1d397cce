"""dicee integration: ``dicee.models`` knowledge-graph-embedding models (every subclass of ``BaseKGE``) evaluated
unchanged, through the methods dicee's own evaluator scores with (:func:`dicee_view`), and dicee's experiment
folders read with their entity and relation indices (:func:`load_dicee_experiment`).

dicee scores tails against every entity with ``forward_k_vs_all(x=(h, r) batch)`` (the method its KvsAll
evaluation ranks with) and whole triples with ``forward_triples`` (its evaluation of heads, and of models without
an all-entity method). No fast path: dicee's scores pass through its own normalisation and dropout layers
(identity in evaluation mode, but the model's own modules all the same), and the model's own methods are what
kgeval ranks.

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
from dicee.models.base_model import BaseKGE

__all__ = [
    "INVERSE_SUFFIX",
    "DiceeExperiment",
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
    return DiceeScoring(model, inverse)


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
    id: its inverse's id}) ``score_h`` as the tails of (t, r_inverse); its entity / relation counts and device."""

    def __init__(self, model: BaseKGE, inverse: Mapping[int, int] | None = None) -> None:
        self.model = model
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
