"""Triple classification: can the model tell a true triple from a false one? Each labelled triple is scored by the
model, a threshold per relation is fitted on validation, and test triples scoring at or above their relation's
threshold are called true (:func:`classify_triples`; precomputed scores: :func:`classify_scores`).

The labelled triples come from a dataset split and CoDEx's hard negatives (:func:`load_split_with_negatives`), from a
``head relation tail label`` file as WN11 and FB13 ship them (:func:`read_labelled_triples`), or from tensors
(:class:`LabelledTriples`), or drawn with a seed (:func:`draw_negatives`, :func:`split_with_drawn_negatives`).
docs/classification.md describes the conventions (``"kgeval"``, ``"codex"``, ``"torchkge"``, ``"global"``,
``"pykeen"``), the drawn negatives and the metrics.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from kgeval import _checks
from kgeval._engine import candidate_scorer, exact_arithmetic
from kgeval._inputs import check_model_inputs
from kgeval._modes import evaluation_mode
from kgeval.adapters.triples import triple_function
from kgeval.datasets.reading import iter_data_lines
from kgeval.exceptions import (
    KnownNegativesWarning,
    NegativeShortfallWarning,
    OptimisticThresholdWarning,
    ThresholdFallbackWarning,
    UndefinedMetricWarning,
    warn_caller,
)

__all__ = [
    "CLASSIFICATION_METRICS",
    "CONVENTIONS",
    "NEGATIVE_STRATEGIES",
    "DrawnNegativesReport",
    "LabelledTriples",
    "TripleClassificationResults",
    "average_precision",
    "best_threshold",
    "classify_scores",
    "classify_triples",
    "draw_negatives",
    "load_split_with_negatives",
    "read_labelled_triples",
    "roc_auc",
    "score_triples",
    "split_with_drawn_negatives",
    "top_p_predictions",
]

Convention = Literal["kgeval", "codex", "torchkge", "global", "pykeen"]
Objective = Literal["accuracy", "f1"]
KnownNegatives = Literal["keep", "drop"]

#: the threshold conventions by name (docs/classification.md)
CONVENTIONS: tuple[str, ...] = ("kgeval", "codex", "torchkge", "global", "pykeen")
NegativeStrategy = Literal["uniform", "positional", "type-constrained"]
#: the strategies of :func:`draw_negatives` (docs/classification.md)
NEGATIVE_STRATEGIES: tuple[str, ...] = ("uniform", "positional", "type-constrained")
#: rounds of redrawing the rejected draws before a positive is left with fewer than K negatives
MAX_ROUNDS = 100


#: the metrics reported micro, per relation and macro, in this order
CLASSIFICATION_METRICS: tuple[str, ...] = (
    "accuracy", "precision", "recall", "f1", "mcc", "balanced_accuracy", "roc_auc", "average_precision",
)  # fmt: skip
_ALIASES = {
    "acc": "accuracy", "f1_score": "f1", "matthews_correlation_coefficient": "mcc", "auc": "roc_auc",
    "auc_roc": "roc_auc", "ap": "average_precision", "tpr": "recall", "sensitivity": "recall",
}  # fmt: skip
#: triples scored per model call when the model scores whole triples, and score rows (B x entities) otherwise
TRIPLES_PER_CALL = 65536
ROW_SCORES_PER_CALL = 2**22


@dataclass(frozen=True, eq=False)
class LabelledTriples:
    """Triples with a true / false label each, in a model's ids.

    Attributes
    ----------
    triples : LongTensor of shape (n, 3)
        (head, relation, tail) ids.
    labels : BoolTensor of shape (n,)
        True for a true triple, False for a false one.
    relation_labels : tuple of str, optional
        The label of each relation id (results then name relations by label).
    known_negatives : int, default=0
        Given negatives found among the known triples when they were read (warned; kept or dropped as asked).
    source : str, default=""
        Where the triples came from, for messages.
    drawn : DrawnNegativesReport, optional
        How the negatives were drawn, when they were (:func:`split_with_drawn_negatives`).
    """

    triples: torch.Tensor = field(repr=False)
    labels: torch.Tensor = field(repr=False)
    relation_labels: tuple[str, ...] | None = field(default=None, repr=False)
    known_negatives: int = 0
    source: str = ""
    drawn: DrawnNegativesReport | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        triples = _checks.check_triples(self.triples, "triples", num_entities=2**62)
        if not isinstance(self.labels, torch.Tensor) or self.labels.dtype != torch.bool or self.labels.dim() != 1:
            raise TypeError("labels must be a BoolTensor of shape (n,); LabelledTriples.from_labels converts 0 / 1")
        if self.labels.shape[0] != triples.shape[0] or triples.shape[0] == 0:
            raise ValueError(f"labels must have one entry per triple, and there must be one: got {triples.shape[0]} "
                             f"triples and {self.labels.shape[0]} labels")  # fmt: skip
        object.__setattr__(self, "triples", triples.cpu())
        object.__setattr__(self, "labels", self.labels.cpu())

    @classmethod
    def from_labels(cls, triples: torch.Tensor, labels: Any, **kwargs: Any) -> LabelledTriples:
        """Labelled triples from labels given as bools or as the numbers 0 / 1 (a tensor, array or list); any other
        value is a ValueError naming the first row holding one."""
        values = labels.cpu() if isinstance(labels, torch.Tensor) else torch.as_tensor(np.asarray(labels))
        if values.dtype != torch.bool:
            bad = ~((values == 0) | (values == 1))
            if bool(bad.any()):
                row = int(bad.nonzero()[0, 0])
                raise ValueError(
                    f"labels must be 0 / 1 (false / true) or bools: row {row} holds {values[row].item()!r}"
                )
            values = values == 1
        return cls(triples, values.reshape(-1), **kwargs)

    @classmethod
    def from_positives_and_negatives(cls, positives: torch.Tensor, negatives: torch.Tensor,
                                     **kwargs: Any) -> LabelledTriples:  # fmt: skip
        """The positives (n, 3) labelled true, then the negatives (m, 3) labelled false."""
        labels = torch.cat(
            [torch.ones(len(positives), dtype=torch.bool), torch.zeros(len(negatives), dtype=torch.bool)]
        )
        return cls(torch.cat([positives.cpu(), negatives.cpu()]), labels, **kwargs)

    def __len__(self) -> int:
        return int(self.triples.shape[0])

    @property
    def num_positives(self) -> int:
        return int(self.labels.sum())

    @property
    def num_negatives(self) -> int:
        return len(self) - self.num_positives


def load_split_with_negatives(
    dataset: Any,
    split: str,
    *,
    negatives: str | os.PathLike[str] | None = None,
    known_negatives: KnownNegatives = "keep",
) -> LabelledTriples:
    """A split's triples labelled true beside the hard negatives of CoDEx's layout labelled false.

    Parameters
    ----------
    dataset : TriplesDataset
        The dataset (:func:`kgeval.datasets.load_dataset`); its ``entity_to_id`` / ``relation_to_id`` map the
        negatives' labels, and its three splits are the known triples.
    split : {"valid", "test"}
        The split whose triples are the positives.
    negatives : path, optional
        The negatives' file, one ``head<TAB>relation<TAB>tail`` per line (gzipped when its name ends in ``.gz``);
        by default ``{split}_negatives.txt`` or ``.txt.gz`` beside the split's file (CoDEx ships them so).
    known_negatives : {"keep", "drop"}, default="keep"
        A negative that is a triple of train, valid or test: kept (labelled false) or dropped; either way a
        :class:`KnownNegativesWarning` counts them, and so does the result's ``known_negatives``.

    Returns
    -------
    LabelledTriples
        The split's positives, then the negatives, in the files' order.

    Raises
    ------
    ValueError
        For a label outside the dataset's vocabulary or a malformed line (naming the file and line), or when the
        negatives' file is not found (naming the names tried).
    """
    if split not in ("train", "valid", "test"):
        raise ValueError(f"split must be 'train', 'valid' or 'test', got {split!r}")
    positives = getattr(dataset, split)
    path = Path(negatives) if negatives is not None else _negatives_beside(dataset, split)
    read = _read_rows(path, dataset.entity_to_id, dataset.relation_to_id, with_labels=False)[0]
    known = torch.cat([dataset.train, dataset.valid, dataset.test])
    false = torch.zeros(len(read), dtype=torch.bool)
    (kept, _), count = _known_negatives(read, false, known, known_negatives, str(path))
    return LabelledTriples.from_positives_and_negatives(
        positives, kept, relation_labels=_labels_by_id(dataset.relation_to_id), known_negatives=count,
        source=f"{split} + {path}",
    )  # fmt: skip


# -- drawn negatives -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class DrawnNegativesReport:
    """How :func:`draw_negatives` went.

    Attributes
    ----------
    strategy : str
        One of :data:`NEGATIVE_STRATEGIES`.
    per_positive : int
        K, the negatives asked for per positive.
    seed : int
        The seed of the CPU generator the draws came from.
    positives : int
        The positives corrupted.
    drawn : int
        The negatives returned (at most ``positives * per_positive``).
    rejected : int
        Draws rejected because they were a known triple or the positive itself (then redrawn).
    duplicates : int
        Draws rejected because the same positive already had that negative (then redrawn).
    short_positives : int
        Positives left with fewer than K negatives, for want of possible ones (warned:
        :class:`NegativeShortfallWarning`).
    missing : int
        The negatives those positives lack: ``positives * per_positive - drawn``.
    rounds : int
        The rounds of drawing used (the first draw included).
    enumerated : int
        Positives still short after the rounds, whose remaining negatives were drawn from an enumeration of all
        their candidates (so a positive is left short only when it has fewer than K possible negatives).
    counts : LongTensor of shape (positives,)
        The negatives of each positive; the negatives are grouped by positive, in the positives' order.
    """

    strategy: str
    per_positive: int
    seed: int
    positives: int
    drawn: int
    rejected: int
    duplicates: int
    short_positives: int
    missing: int
    rounds: int
    enumerated: int
    counts: torch.Tensor = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The counts and settings, JSON-ready (``counts`` left out)."""
        return {
            "strategy": self.strategy, "per_positive": self.per_positive, "seed": self.seed,
            "positives": self.positives, "drawn": self.drawn, "rejected": self.rejected,
            "duplicates": self.duplicates, "short_positives": self.short_positives, "missing": self.missing,
            "rounds": self.rounds, "enumerated": self.enumerated,
        }  # fmt: skip


def draw_negatives(
    positives: torch.Tensor,
    known: torch.Tensor | Sequence[torch.Tensor],
    num_entities: int,
    *,
    per_positive: int = 1,
    strategy: NegativeStrategy = "uniform",
    type_constraints: Any = None,
    seed: int = 0,
    max_rounds: int = MAX_ROUNDS,
) -> tuple[torch.Tensor, DrawnNegativesReport]:
    """K corrupted triples per positive, none of them a known triple nor the positive, drawn with a seeded CPU
    generator (the same negatives on any machine; the global random state is neither read nor advanced).

    Parameters
    ----------
    positives : LongTensor of shape (n, 3)
        The (head, relation, tail) triples to corrupt.
    known : LongTensor (m, 3) or a sequence of them
        The known triples, of every split (train + valid + test): a draw among them is rejected and redrawn.
    num_entities : int
        Entity ids are 0 .. num_entities - 1.
    per_positive : int, default=1
        K, the negatives per positive, all distinct.
    strategy : {"uniform", "positional", "type-constrained"}, default="uniform"
        ``"uniform"``: the head or the tail is corrupted with probability 1/2 each, the replacement uniform over
        all entities. ``"positional"`` (Socher et al. 2013's constraint): the side is drawn per relation by
        Bernoulli sampling (Wang et al. 2014: the head with probability tph / (tph + hpt), tph the relation's
        triples per distinct head, hpt its triples per distinct tail, counted on the distinct triples of
        ``known`` and ``positives``), the replacement uniform among the entities seen in that position for that
        relation in ``known`` and ``positives``. ``"type-constrained"``: the side with probability 1/2, the
        replacement uniform among ``type_constraints``' heads / tails of the relation (all entities for a side
        the constraints leave open).
    type_constraints : TypeConstraints, optional
        The allowed heads and tails per relation (:class:`kgeval.constraints.TypeConstraints`); required by
        ``"type-constrained"``, refused by the other strategies.
    seed : int, default=0
        The seed of the ``torch.Generator`` (CPU) every draw comes from.
    max_rounds : int, default=100
        Rejected draws are redrawn, up to this many rounds in all; a positive still short of K then gets its
        missing negatives drawn uniformly without replacement from the enumeration of all its possible negatives
        (both sides' candidates, less the known triples, the positive and those it has). One left short of K
        even so has fewer than K possible negatives: counted and warned (:class:`NegativeShortfallWarning`).

    Returns
    -------
    negatives : LongTensor of shape (d, 3)
        Grouped by positive, in the positives' order (``report.counts`` says how many each got; d = K n unless some
        fell short), each group in the order its draws were accepted.
    report : DrawnNegativesReport
        The rejected draws (known triples or the positive; duplicates), the positives left short, the rounds.

    Notes
    -----
    Each round draws, for every slot still empty, a side and then a replacement: a float64 uniform u in [0, 1)
    picks the candidate ``floor(u * size)`` of the sorted candidate set. A draw is rejected when the corrupted
    triple is known, equals its positive (the replacement is the entity it replaces), or is a negative its positive
    already has (accepted earlier, or drawn by an earlier slot of the same positive in the same round). The
    enumeration after the rounds ignores the side's probability: each remaining possible negative alike.
    """
    positives = _checks.check_triples(positives, "positives", num_entities=num_entities).long().cpu()
    known_tensor = known if isinstance(known, torch.Tensor) else torch.cat([torch.as_tensor(k) for k in known])
    known_tensor = _checks.check_triples(known_tensor, "known", num_entities=num_entities).long().cpu()
    k = _checks.check_positive_int(per_positive, "per_positive")
    rounds_allowed = _checks.check_positive_int(max_rounds, "max_rounds")
    if strategy not in NEGATIVE_STRATEGIES:
        raise ValueError(f"strategy must be one of {NEGATIVE_STRATEGIES}, got {strategy!r}")
    if (strategy == "type-constrained") != (type_constraints is not None):
        raise ValueError("type_constraints is required by strategy 'type-constrained' and by no other strategy")
    num_relations = (
        int(max(int(positives[:, 1].max()), int(known_tensor[:, 1].max()) if known_tensor.numel() else -1)) + 1
    )
    if num_entities * num_entities * num_relations >= 2**62:
        raise ValueError(f"{num_entities} entities x {num_relations} relations are too many to key triples as int64")
    n = positives.shape[0]
    seen = torch.unique(torch.cat([known_tensor, positives]), dim=0)
    head_probability, pools = _sides_and_pools(strategy, seen, num_relations, num_entities, type_constraints)
    # the positives are never negatives, whether or not ``known`` holds them
    known_keys = torch.sort(torch.unique(_keys(torch.cat([known_tensor, positives]), num_entities,
                                               num_relations))).values  # fmt: skip
    generator = torch.Generator(device="cpu").manual_seed(int(seed))
    slot_positive = torch.arange(n).repeat_interleave(k)  # slot j belongs to positive j // K
    accepted = torch.full((n * k,), -1, dtype=torch.long)  # the accepted negative's key, -1 while empty
    accepted_rows = torch.zeros((n * k, 3), dtype=torch.long)
    rejected = duplicates = rounds = 0
    while rounds < rounds_allowed:
        pending = (accepted < 0).nonzero().reshape(-1)
        if pending.numel() == 0:
            break
        rounds += 1
        rows = positives[slot_positive[pending]]
        relations = rows[:, 1]
        head = torch.rand(pending.numel(), generator=generator, dtype=torch.float64) < head_probability[relations]
        side = (~head).long()  # 0: the head is replaced, 1: the tail
        start, size = pools.start[relations, side], pools.size[relations, side]
        u = torch.rand(pending.numel(), generator=generator, dtype=torch.float64)
        pick = torch.minimum((u * size.double()).long(), (size - 1).clamp(min=0))
        replacement = pools.flat[start + pick]
        corrupted = rows.clone()
        corrupted[head, 0] = replacement[head]
        corrupted[~head, 2] = replacement[~head]
        keys = _keys(corrupted, num_entities, num_relations)
        place = torch.searchsorted(known_keys, keys).clamp(max=max(known_keys.numel() - 1, 0))
        is_known = known_keys[place] == keys if known_keys.numel() else torch.zeros_like(keys, dtype=torch.bool)
        bad = is_known | (corrupted == rows).all(dim=1) | (size == 0)
        repeated = _repeated(slot_positive, accepted, pending, keys) & ~bad
        rejected += int(bad.sum())
        duplicates += int(repeated.sum())
        good = ~(bad | repeated)
        accepted[pending[good]] = keys[good]
        accepted_rows[pending[good]] = corrupted[good]
    enumerated = _enumerate_rest(positives, accepted, accepted_rows, known_keys, pools, generator, k,
                                 num_entities, num_relations)  # fmt: skip
    filled = accepted >= 0
    counts = filled.reshape(n, k).sum(dim=1)
    short = int((counts < k).sum())
    if short:
        warn_caller(
            f"{short} of {n} positives got fewer than {k} negatives ({n * k - int(filled.sum())} missing; "
            f"strategy {strategy!r}): their candidates, less the known triples and the positive, are fewer than "
            f"{k}", NegativeShortfallWarning,
        )  # fmt: skip
    report = DrawnNegativesReport(
        strategy=strategy, per_positive=k, seed=int(seed), positives=n, drawn=int(filled.sum()), rejected=rejected,
        duplicates=duplicates, short_positives=short, missing=n * k - int(filled.sum()), rounds=rounds,
        enumerated=enumerated, counts=counts,
    )  # fmt: skip
    return accepted_rows[filled], report


def split_with_drawn_negatives(
    dataset: Any,
    split: str,
    *,
    per_positive: int = 1,
    strategy: NegativeStrategy = "uniform",
    type_constraints: Any = None,
    seed: int = 0,
) -> LabelledTriples:
    """A split's triples labelled true beside negatives drawn by :func:`draw_negatives` labelled false, the known
    triples being train + valid + test.

    Parameters
    ----------
    dataset : TriplesDataset
        The dataset (:func:`kgeval.datasets.load_dataset`, :func:`kgeval.datasets.load_shipped_dataset`).
    split : {"valid", "test"}
        The split whose triples are the positives (``"train"`` is accepted too).
    per_positive, strategy, type_constraints, seed
        As :func:`draw_negatives` takes them.

    Returns
    -------
    LabelledTriples
        The positives, then their negatives grouped by positive; ``drawn`` holds the report.
    """
    if split not in ("train", "valid", "test"):
        raise ValueError(f"split must be 'train', 'valid' or 'test', got {split!r}")
    positives = getattr(dataset, split)
    known = torch.cat([dataset.train, dataset.valid, dataset.test])
    negatives, report = draw_negatives(positives, known, dataset.num_entities, per_positive=per_positive,
                                       strategy=strategy, type_constraints=type_constraints, seed=seed)  # fmt: skip
    return LabelledTriples.from_positives_and_negatives(
        positives, negatives, relation_labels=_labels_by_id(dataset.relation_to_id),
        source=f"{split} + {report.drawn} drawn negatives ({strategy}, {report.per_positive} per positive, seed "
        f"{report.seed})", drawn=report,
    )  # fmt: skip


@dataclass(frozen=True)
class _Pools:
    flat: torch.Tensor  # every candidate set, concatenated
    start: torch.Tensor  # (relations, 2): where the set of (relation, side) starts in flat; side 0 head, 1 tail
    size: torch.Tensor  # (relations, 2): its size (0: no candidate)


def _sides_and_pools(strategy: str, seen: torch.Tensor, num_relations: int, num_entities: int,
                     constraints: Any) -> tuple[torch.Tensor, _Pools]:  # fmt: skip
    """(probability of corrupting the head per relation (float64), the candidate sets per relation and side)."""
    everyone = torch.arange(num_entities)
    probability = torch.full((num_relations,), 0.5, dtype=torch.float64)
    if strategy == "uniform":
        start = torch.zeros((num_relations, 2), dtype=torch.long)
        return probability, _Pools(everyone, start, torch.full((num_relations, 2), num_entities, dtype=torch.long))
    sets: list[torch.Tensor] = []
    seen = seen[torch.sort(seen[:, 1], stable=True).indices]
    ends = torch.cumsum(torch.bincount(seen[:, 1], minlength=num_relations), 0).tolist()
    for relation in range(num_relations):
        rows = seen[(ends[relation - 1] if relation else 0) : ends[relation]]
        if strategy == "positional":
            heads, tails = torch.unique(rows[:, 0]), torch.unique(rows[:, 2])
            if rows.shape[0]:
                tph, hpt = rows.shape[0] / heads.numel(), rows.shape[0] / tails.numel()
                probability[relation] = tph / (tph + hpt)
        else:
            allowed = [constraints.allowed(relation, side) for side in ("head", "tail")]
            heads, tails = (everyone if ids is None else torch.unique(torch.as_tensor(ids).long().cpu())
                            for ids in allowed)  # fmt: skip
        sets += [heads, tails]
    sizes = torch.tensor([s.numel() for s in sets], dtype=torch.long)
    starts = torch.cumsum(sizes, 0) - sizes
    flat = torch.cat([*sets, torch.zeros(1, dtype=torch.long)])  # one spare entry: an empty set's index stays valid
    return probability, _Pools(flat, starts.reshape(num_relations, 2), sizes.reshape(num_relations, 2))


def _enumerate_rest(positives: torch.Tensor, accepted: torch.Tensor, accepted_rows: torch.Tensor,
                    known_keys: torch.Tensor, pools: _Pools, generator: torch.Generator, k: int,
                    num_entities: int, num_relations: int) -> int:  # fmt: skip
    """Fill the empty slots of each positive still short, in place, from all its possible negatives (drawn
    uniformly without replacement); returns how many positives were enumerated."""
    empty = (accepted < 0).reshape(-1, k)
    short = empty.any(dim=1).nonzero().reshape(-1).tolist()
    for index in short:
        h, r, t = positives[index].tolist()
        heads = pools.flat[pools.start[r, 0] : pools.start[r, 0] + pools.size[r, 0]]
        tails = pools.flat[pools.start[r, 1] : pools.start[r, 1] + pools.size[r, 1]]
        candidates = torch.cat([
            torch.stack([heads, torch.full_like(heads, r), torch.full_like(heads, t)], 1),
            torch.stack([torch.full_like(tails, h), torch.full_like(tails, r), tails], 1),
        ])  # fmt: skip
        keys = torch.unique(_keys(candidates, num_entities, num_relations))  # sorted
        slots = torch.arange(index * k, (index + 1) * k)
        own = accepted[slots][accepted[slots] >= 0]
        positive = _keys(positives[index : index + 1], num_entities, num_relations)
        place = torch.searchsorted(known_keys, keys).clamp(max=max(known_keys.numel() - 1, 0))
        is_known = known_keys[place] == keys if known_keys.numel() else torch.zeros_like(keys, dtype=torch.bool)
        keys = keys[~is_known & ~torch.isin(keys, own) & (keys != positive)]
        free = slots[accepted[slots] < 0]
        chosen = keys[torch.randperm(keys.numel(), generator=generator)[: free.numel()]]
        accepted[free[: chosen.numel()]] = chosen
        tail = chosen % num_entities
        head = chosen // num_entities // num_relations
        accepted_rows[free[: chosen.numel()]] = torch.stack([head, torch.full_like(head, r), tail], 1)
    return len(short)


def _keys(triples: torch.Tensor, num_entities: int, num_relations: int) -> torch.Tensor:
    """One int64 per triple: (head * relations + relation) * entities + tail."""
    return (triples[:, 0] * num_relations + triples[:, 1]) * num_entities + triples[:, 2]


def _repeated(slot_positive: torch.Tensor, accepted: torch.Tensor, pending: torch.Tensor,
              keys: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """For each pending slot's drawn key: does its positive already have it (accepted, or drawn by an earlier
    pending slot of the same positive)?"""
    done = (accepted >= 0).nonzero().reshape(-1)
    pairs = torch.cat([torch.stack([slot_positive[done], accepted[done]], 1),
                       torch.stack([slot_positive[pending], keys], 1)])  # fmt: skip
    _, inverse = torch.unique(pairs, dim=0, return_inverse=True)
    ids = inverse[done.numel() :]
    repeated = torch.isin(ids, inverse[: done.numel()])
    order = torch.sort(ids, stable=True).indices
    ordered = ids[order]
    later = torch.zeros_like(ids, dtype=torch.bool)
    later[order[1:]] = ordered[1:] == ordered[:-1]
    return repeated | later


def read_labelled_triples(
    path: str | os.PathLike[str],
    entity_to_id: Mapping[str, int],
    relation_to_id: Mapping[str, int],
    *,
    known_triples: torch.Tensor | Sequence[torch.Tensor] | None = None,
    known_negatives: KnownNegatives = "keep",
    sep: str = "\t",
) -> LabelledTriples:
    """Labelled triples from a ``head relation tail label`` file (WN11's and FB13's ``valid.txt`` / ``test.txt``).

    Parameters
    ----------
    path : path
        One ``head<sep>relation<sep>tail<sep>label`` per line, gzipped when the name ends in ``.gz``; the labels of
        a file are ``1`` / ``-1`` (WN11, FB13) or ``1`` / ``0``.
    entity_to_id, relation_to_id : mapping of str to int
        The model's vocabularies.
    known_triples : LongTensor (m, 3) or a sequence of them, optional
        Known (true) triples: a triple labelled false among them is counted and warned about
        (:class:`KnownNegativesWarning`), then kept or dropped as ``known_negatives`` says.
    known_negatives : {"keep", "drop"}, default="keep"
    sep : str, default="\\t"

    Returns
    -------
    LabelledTriples

    Raises
    ------
    ValueError
        For a label other than the file's two classes (``-1`` and ``0`` in one file included), a head, relation or
        tail outside the vocabularies, or a line without four fields: the message names the file and line.
    """
    path = Path(path)
    triples, labels = _read_rows(path, entity_to_id, relation_to_id, with_labels=True, sep=sep)
    assert labels is not None
    if known_triples is not None:
        known = torch.cat(list(known_triples)) if not isinstance(known_triples, torch.Tensor) else known_triples
        (triples, labels), count = _known_negatives(triples, labels, known.long().cpu(), known_negatives, str(path))
    else:
        count = 0
    return LabelledTriples(triples, labels, _labels_by_id(relation_to_id), known_negatives=count, source=str(path))


def score_triples(model: Any, triples: torch.Tensor, *, batch_size: int | None = None) -> torch.Tensor:
    """Each triple's score by the model's own scoring: its ``score_hrt`` / ``forward(h, r, t)``, else its ``score_t``
    row with the tail's column picked.

    Parameters
    ----------
    model : object
        A model kgeval evaluates (the model protocol, a PyKEEN / PyG / TorchKGE model, ...).
    triples : LongTensor of shape (n, 3)
        (head, relation, tail) ids, inside the model's entity and relation counts.
    batch_size : int, optional
        Triples per model call; by default 65,536 for whole-triple scoring, else as many as keep a call's
        (B x entities) score rows at 2**22 entries.

    Returns
    -------
    FloatTensor of shape (n,)
        On the model's device, in its dtype; computed in evaluation mode, under ``torch.inference_mode()``, with the
        caller's reduced-precision settings set aside (as an evaluation is).

    Raises
    ------
    ValueError
        For an id beyond the model's entities or relations (naming the first row) or a NaN score (naming the
        triple).
    """
    checked = check_model_inputs(model, ("tail",))
    view, num_entities, device = checked.model.view, checked.num_entities, checked.model.device
    triples = _checks.check_triples(triples, "triples", num_entities, checked.num_relations).to(device)
    whole = triple_function(view) is not None
    default = TRIPLES_PER_CALL if whole else max(1, ROW_SCORES_PER_CALL // max(1, num_entities))
    size = _checks.check_positive_int(batch_size, "batch_size", allow_none=True) or default
    parts = []
    with evaluation_mode(model), torch.inference_mode(), exact_arithmetic("exact"):
        score = candidate_scorer(view, "tail", num_entities)
        for start in range(0, triples.shape[0], size):
            batch = triples[start : start + size]
            parts.append(score(batch[:, :2], batch[:, 2:]).reshape(-1))
    scores = torch.cat(parts)
    nan = torch.isnan(scores)
    if bool(nan.any()):
        row = int(nan.nonzero()[0, 0])
        raise ValueError(f"the model scored triple {triples[row].tolist()} (row {row}) NaN")
    return scores


@dataclass(frozen=True, eq=False)
class TripleClassificationResults:
    """Triple classification of test triples at thresholds fitted on validation.

    Attributes
    ----------
    convention, objective : str
        How the thresholds were fitted (docs/classification.md).
    thresholds : dict of int to float
        The threshold applied to each relation of the test triples, by relation id.
    global_threshold : float or None
        The threshold fitted on every validation triple (the fallback of ``"kgeval"``; computed and, as CoDEx's
        script does, unused by ``"codex"``; the highest validation negative for ``"torchkge"``).
    fallback : dict of int to str
        The test relations that got no threshold of their own from validation, and why.
    fallback_triples : int
        The test triples of those relations.
    strict : bool
        A triple is predicted true when its score > its threshold (``"torchkge"``), else when score >= threshold.
    micro, macro : dict of str to float
        :data:`CLASSIFICATION_METRICS` over all test triples, and their unweighted mean over the test relations
        where each is defined.
    per_relation : dict of int to dict of str to float
        The metrics of each test relation's triples.
    relation_labels : tuple of str or None
        The label of each relation id, when known.
    scores, labels, predictions, relations : ndarray of shape (n,)
        Each test triple's score (float64), label, prediction and relation id.
    """

    convention: str
    objective: str
    thresholds: dict[int, float]
    global_threshold: float | None
    fallback: dict[int, str]
    fallback_triples: int
    strict: bool
    micro: dict[str, float]
    macro: dict[str, float]
    per_relation: dict[int, dict[str, float]]
    relation_labels: tuple[str, ...] | None = field(default=None, repr=False)
    scores: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)
    labels: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=bool), repr=False)
    predictions: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=bool), repr=False)
    relations: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64), repr=False)

    def relation_name(self, relation: int) -> str:
        """A relation's label, or its id as text."""
        labels = self.relation_labels
        return labels[relation] if labels is not None and relation < len(labels) else str(relation)

    def get_metric(self, key: str) -> float:
        """One number by key: ``"<metric>"`` or ``"micro.<metric>"`` (all test triples), ``"macro.<metric>"``,
        ``"relation.<label or id>.<metric>"``; the metrics are :data:`CLASSIFICATION_METRICS`, case-insensitive, with
        the aliases ``acc``, ``f1_score``, ``auc``, ``ap``, ``matthews_correlation_coefficient``. KeyError otherwise."""
        head, _, name = key.rpartition(".")
        metric = _ALIASES.get(name.lower(), name.lower())
        if metric not in CLASSIFICATION_METRICS:
            raise KeyError(f"unknown metric {name!r} in {key!r}; known: {', '.join(CLASSIFICATION_METRICS)}")
        if head.lower() in ("", "micro"):
            return self.micro[metric]
        if head.lower() == "macro":
            return self.macro[metric]
        scope, _, relation = head.partition(".")
        if scope.lower() == "relation":
            for relation_id, values in self.per_relation.items():
                if relation in (self.relation_name(relation_id), str(relation_id)):
                    return values[metric]
            raise KeyError(f"no test triple of relation {relation!r} in {key!r}")
        raise KeyError(f"{key!r}: a key reads <metric>, micro.<metric>, macro.<metric> or relation.<label>.<metric>")

    def to_dict(self) -> dict[str, Any]:
        """Every number, JSON-ready: the settings, the thresholds, micro, macro and per-relation metrics."""
        relations = {
            self.relation_name(relation): {
                **values,
                "threshold": self.thresholds[relation],
                "positives": int((self.labels & (self.relations == relation)).sum()),
                "negatives": int((~self.labels & (self.relations == relation)).sum()),
                "fallback": self.fallback.get(relation),
            }
            for relation, values in self.per_relation.items()
        }
        return {
            "convention": self.convention, "objective": self.objective, "strict": self.strict,
            "global_threshold": self.global_threshold, "fallback_triples": self.fallback_triples,
            "micro": dict(self.micro), "macro": dict(self.macro), "per_relation": relations,
        }  # fmt: skip

    def to_df(self) -> pd.DataFrame:
        """One row per scope -- ``micro``, ``macro``, then each relation by label -- and a column per metric, with
        each relation's threshold, test positives / negatives and fallback reason."""
        rows = [{"scope": "micro", **self.micro}, {"scope": "macro", **self.macro}]
        rows += [{"scope": name, **values} for name, values in self.to_dict()["per_relation"].items()]
        return pd.DataFrame(rows).set_index("scope")


def classify_triples(
    model: Any,
    valid: LabelledTriples,
    test: LabelledTriples,
    *,
    convention: Convention = "kgeval",
    objective: Objective = "accuracy",
    batch_size: int | None = None,
) -> TripleClassificationResults:
    """Triple classification: thresholds fitted on ``valid``'s scores, applied to ``test``'s.

    Parameters
    ----------
    model : object
        The model, scored by :func:`score_triples`.
    valid, test : LabelledTriples
        Labelled validation triples (the thresholds are fitted on them) and test triples (the metrics are computed
        on them), of n_valid and n_test triples, in the model's ids.
    convention : {"kgeval", "codex", "torchkge", "global", "pykeen"}, default="kgeval"
        ``"kgeval"``: per relation, the sweep below, and the global threshold for a relation validation lacks or has
        one class of only (warned). ``"codex"``: CoDEx's ``scripts/tc.py``: per relation, the sweep; a relation
        absent from validation gets -inf (every test triple of it predicted true), as its code does. ``"torchkge"``:
        per relation the highest validation-negative score, true when score > it; a relation without validation
        negatives gets the highest of them all (TorchKGE's rule for a relation absent from validation). ``"global"``:
        one threshold, the sweep over all validation triples. ``"pykeen"``: PyKEEN's top-P rule
        (:func:`top_p_predictions`): the P highest-scored test triples are called true, P the number of true test
        triples; validation is not used (nor scored), and an :class:`OptimisticThresholdWarning` says the threshold
        is fitted on the evaluated labels. Its ``thresholds`` are the lowest score called true.
    objective : {"accuracy", "f1"}, default="accuracy"
        What the sweep maximises (not used by ``"torchkge"`` and ``"pykeen"``).
    batch_size : int, optional
        Triples per model call (:func:`score_triples`).

    Returns
    -------
    TripleClassificationResults

    Notes
    -----
    The sweep is exact: every distinct validation score s of the relation is a candidate threshold (a triple is
    true when its score >= s), its objective counted exactly; among the maximisers the lowest score is chosen (as
    CoDEx's script chooses). The metrics are computed in float64 from exact counts: ROC-AUC counts ties half
    (Mann-Whitney), average precision is scikit-learn's step rule (``average_precision_score``); an undefined value
    (a zero denominator, one class only) is NaN with an :class:`kgeval.exceptions.UndefinedMetricWarning`.
    """
    if convention == "pykeen":  # fits nothing on validation: its triples are not scored
        valid_scores: Any = np.zeros(len(valid))
    else:
        valid_scores = score_triples(model, valid.triples, batch_size=batch_size)
    test_scores = score_triples(model, test.triples, batch_size=batch_size)
    return classify_scores(valid, valid_scores, test, test_scores, convention=convention, objective=objective)


def classify_scores(
    valid: LabelledTriples,
    valid_scores: Any,
    test: LabelledTriples,
    test_scores: Any,
    *,
    convention: Convention = "kgeval",
    objective: Objective = "accuracy",
) -> TripleClassificationResults:
    """:func:`classify_triples` on precomputed scores: ``valid_scores`` (n_valid,) and ``test_scores`` (n_test,),
    one per labelled triple (higher = more plausible; no NaN)."""
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {CONVENTIONS}, got {convention!r}")
    if objective not in ("accuracy", "f1"):
        raise ValueError(f"objective must be 'accuracy' or 'f1', got {objective!r}")
    if convention == "torchkge" and objective != "accuracy":
        raise ValueError(
            "convention 'torchkge' fits no objective (its thresholds are the highest validation negatives)"
        )
    if convention == "codex" and objective != "accuracy":
        raise ValueError("convention 'codex' fits accuracy, as CoDEx's scripts/tc.py does (use 'kgeval' for F1)")
    if convention == "pykeen" and objective != "accuracy":
        raise ValueError("convention 'pykeen' fits no objective (it calls the top-P test scores true)")
    scores, labels = _as_scores(test_scores, test, "test_scores"), test.labels.numpy()
    relations = test.triples[:, 1].numpy()
    thresholds: dict[int, float]
    global_threshold: float | None
    fallback: dict[int, str]
    if convention == "pykeen":
        predictions = top_p_predictions(scores, labels)
        called = scores[predictions]
        global_threshold = float(called.min()) if called.size else math.inf
        thresholds = dict.fromkeys(np.unique(relations).tolist(), global_threshold)
        fallback, strict = {}, False
        warn_caller(f"convention 'pykeen' calls the {int(labels.sum())} highest-scored test triples true, as many as "
                    "the test labels hold: the threshold is fitted on the evaluated labels, and the binarised metrics "
                    "are optimistic", OptimisticThresholdWarning)  # fmt: skip
    else:
        fitted_on = _as_scores(valid_scores, valid, "valid_scores")
        fitted = _fit(fitted_on, valid.labels.numpy(), valid.triples[:, 1].numpy(), relations, convention, objective)
        thresholds, global_threshold, fallback, strict = fitted
        limits = np.array([thresholds[int(r)] for r in relations], dtype=np.float64)
        predictions = scores > limits if strict else scores >= limits
    undefined: dict[str, list[str]] = {}
    micro = _metrics(labels, predictions, scores, undefined, "micro")
    names = test.relation_labels
    per_relation = {
        int(r): _metrics(labels[relations == r], predictions[relations == r], scores[relations == r], undefined,
                         names[int(r)] if names is not None and int(r) < len(names) else str(int(r)))
        for r in np.unique(relations)
    }  # fmt: skip
    macro = {name: _defined_mean([values[name] for values in per_relation.values()]) for name in CLASSIFICATION_METRICS}
    if undefined:
        listed = "; ".join(f"{name}: {', '.join(scopes[:5])}{' ...' if len(scopes) > 5 else ''} ({len(scopes)})"
                           for name, scopes in undefined.items())  # fmt: skip
        warn_caller(f"undefined (NaN; left out of the macro averages) -- {listed}", UndefinedMetricWarning)
    return TripleClassificationResults(
        convention=convention, objective=objective, thresholds={r: thresholds[r] for r in per_relation},
        global_threshold=global_threshold, fallback={r: why for r, why in fallback.items() if r in per_relation},
        fallback_triples=int(np.isin(relations, list(fallback)).sum()), strict=strict, micro=micro, macro=macro,
        per_relation=per_relation, relation_labels=test.relation_labels, scores=scores, labels=labels,
        predictions=predictions, relations=relations,
    )  # fmt: skip


# -- thresholds ------------------------------------------------------------------------------------------------------


def top_p_predictions(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """PyKEEN's binarisation (``construct_indicator`` in pykeen/metrics/classification.py): the P highest ``scores``
    (n,) called true, P the number of true ``labels`` (n,). Exactly P are called true; among scores tied at the P-th
    score, the ones called true are the last ones of NumPy's default ``np.argsort`` (ascending, not stable) -- the
    order PyKEEN reverses and cuts."""
    count = int(np.sum(labels, dtype=np.int64))
    predictions = np.zeros(scores.shape[0], dtype=bool)
    if count:
        predictions[np.argsort(scores)[-count:]] = True
    return predictions


def best_threshold(scores: np.ndarray, labels: np.ndarray, objective: Objective = "accuracy") -> float:
    """The lowest of the distinct ``scores`` (n,) that maximises ``objective`` when a triple is called true at
    score >= threshold, ``labels`` (n,) bool; counted exactly (accuracy by its integer count, F1 as a fraction).
    ValueError for a NaN score or an empty input."""
    scores, labels = _checked_pairs(scores, labels, "best_threshold", both_classes=False)
    order = np.argsort(scores, kind="stable")
    distinct, first = np.unique(scores[order], return_index=True)  # first: how many scores lie below a candidate
    positives_below = np.concatenate([[0], np.cumsum(labels[order])])[first]
    num_positives, num_negatives = int(labels.sum()), int(labels.size - labels.sum())
    tp = num_positives - positives_below
    fp = num_negatives - (first - positives_below)
    if objective == "accuracy":
        return float(distinct[int(np.argmax(tp - fp))])  # correct = tp + (N - fp); argmax: the first, lowest
    f1 = 2 * tp / (tp + fp + num_positives)  # 2tp / (2tp + fp + fn); tp + fp >= 1 at every candidate
    near = np.nonzero(f1 >= f1.max() * (1 - 1e-9))[0]  # the float maximum's neighbours, decided exactly below
    exact = [Fraction(2 * int(tp[j]), int(tp[j] + fp[j]) + num_positives) for j in near]
    return float(distinct[near[exact.index(max(exact))]])


def _fit(
    scores: np.ndarray,
    labels: np.ndarray,
    relations: np.ndarray,
    test_relations: np.ndarray,
    convention: str,
    objective: Objective,
) -> tuple[dict[int, float], float | None, dict[int, str], bool]:
    """(threshold per relation of validation and test, global threshold, fallback reasons, strict comparison)."""
    wanted = sorted(set(np.unique(relations).tolist()) | set(np.unique(test_relations).tolist()))
    present = set(np.unique(relations).tolist())
    if convention == "torchkge":
        if labels.all():
            raise ValueError("convention 'torchkge' needs validation negatives: valid holds none")
        top = float(scores[~labels].max())
        own = {r: float(scores[(relations == r) & ~labels].max()) for r in np.unique(relations[~labels]).tolist()}
        fallback = {r: "no validation negatives: the highest of all" for r in wanted if r not in own}
        return {r: own.get(r, top) for r in wanted}, top, fallback, True
    one_class = labels.all() or not labels.any()
    if one_class and convention in ("kgeval", "global"):
        raise ValueError(f"the validation triples hold one class only ({'true' if labels.all() else 'false'}): no "
                         "threshold can be fitted on them")  # fmt: skip
    overall = best_threshold(scores, labels, objective)
    if convention == "global":
        return dict.fromkeys(wanted, overall), overall, {}, False
    thresholds, fallback = {}, {}
    for r in wanted:
        mask = relations == r
        if convention == "codex":
            thresholds[r] = best_threshold(scores[mask], labels[mask], objective) if r in present else -math.inf
            if r not in present:
                fallback[r] = "absent from validation: -inf, every triple true (CoDEx's tc.py)"
        elif r not in present:
            thresholds[r], fallback[r] = overall, "absent from validation: the global threshold"
        elif labels[mask].all() or not labels[mask].any():
            thresholds[r], fallback[r] = overall, "one class only in validation: the global threshold"
        else:
            thresholds[r] = best_threshold(scores[mask], labels[mask], objective)
    tested = set(np.unique(test_relations).tolist())
    told = {r: why for r, why in fallback.items() if r in tested}
    if told:
        count = int(np.isin(test_relations, list(told)).sum())
        warn_caller(f"{len(told)} test relation(s) got no threshold of their own from validation ({count} test "
                    f"triples): " + "; ".join(f"relation {r}: {why}" for r, why in told.items()),
                    ThresholdFallbackWarning)  # fmt: skip
    return thresholds, overall, fallback, False


# -- metrics ---------------------------------------------------------------------------------------------------------


def _metrics(labels: np.ndarray, predictions: np.ndarray, scores: np.ndarray, undefined: dict[str, list[str]],
             scope: str) -> dict[str, float]:  # fmt: skip
    """:data:`CLASSIFICATION_METRICS` of one scope's triples; an undefined one is NaN, its scope noted."""
    tp = int((labels & predictions).sum())
    fp = int((~labels & predictions).sum())
    fn = int((labels & ~predictions).sum())
    tn = int((~labels & ~predictions).sum())
    p, n = tp + fn, tn + fp
    denominator = (tp + fp) * p * n * (tn + fn)
    values = {
        "accuracy": _ratio(tp + tn, p + n),
        "precision": _ratio(tp, tp + fp),
        "recall": _ratio(tp, p),
        "f1": _ratio(2 * tp, 2 * tp + fp + fn),
        "mcc": (tp * tn - fp * fn) / math.sqrt(denominator) if denominator else math.nan,
        "balanced_accuracy": (_ratio(tp, p) + _ratio(tn, n)) / 2 if p and n else math.nan,
        "roc_auc": roc_auc(scores, labels) if p and n else math.nan,
        "average_precision": average_precision(scores, labels) if p else math.nan,
    }
    for name, value in values.items():
        if math.isnan(value):
            undefined.setdefault(name, []).append(scope)
    return values


def _ratio(numerator: int, denominator: int) -> float:
    return numerator / denominator if denominator else math.nan


def _defined_mean(values: list[float]) -> float:
    defined = [v for v in values if not math.isnan(v)]
    return math.fsum(defined) / len(defined) if defined else math.nan


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """The area under the ROC curve, (#(pos, neg) pairs ordered right + half the tied ones) / (P N), from the
    positives' mid-ranks summed exactly (Mann-Whitney); both classes must be present (else a ValueError, as for a
    NaN score)."""
    scores, labels = _checked_pairs(scores, labels, "roc_auc")
    order = np.argsort(scores, kind="stable")
    ranked, positive = scores[order], labels[order]
    _, start = np.unique(ranked, return_index=True)
    end = np.append(start[1:], ranked.size)  # group g spans sorted positions [start, end): mid-rank (start+end+1)/2
    positives_per_group = np.add.reduceat(positive.astype(np.int64), start)
    twice_rank_sum = int(np.sum(positives_per_group * (start + end + 1)))
    p = int(labels.sum())
    n = labels.size - p
    return (twice_rank_sum - p * (p + 1)) / (2 * p * n)


def average_precision(scores: np.ndarray, labels: np.ndarray) -> float:
    """Σ_k (R_k - R_{k-1}) P_k over the distinct scores, descending, as scikit-learn's ``average_precision_score``:
    P_k and R_k the precision and recall of calling true the triples scoring >= the k-th score; a true label must be
    present (else a ValueError, as for a NaN score)."""
    scores, labels = _checked_pairs(scores, labels, "average_precision", both_classes=False, positives=True)
    order = np.argsort(-scores, kind="stable")
    ranked, positive = scores[order], labels[order].astype(np.int64)
    # the last position of each distinct score (compared, not subtracted: -inf - -inf is NaN)
    last = np.append(np.nonzero(ranked[1:] != ranked[:-1])[0], ranked.size - 1)
    tp = np.cumsum(positive)[last]
    predicted = last + 1
    gained = np.diff(np.concatenate([[0], tp]))
    return float(np.sum(gained / tp[-1] * (tp / predicted)))


def _checked_pairs(scores: Any, labels: Any, name: str, both_classes: bool = True,
                   positives: bool = False) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``scores`` as float64 and ``labels`` as bool arrays of one length (n,); ValueError, naming ``name``, for other
    shapes, an empty input, a NaN score, labels of one class only (``both_classes``) or no true label
    (``positives``)."""
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels).astype(bool)
    if scores.ndim != 1 or scores.shape != labels.shape or scores.size == 0:
        raise ValueError(f"{name} takes scores and labels of one length (n,) > 0, got {scores.shape} and "
                         f"{labels.shape}")  # fmt: skip
    if np.isnan(scores).any():
        raise ValueError(f"{name}: score {int(np.flatnonzero(np.isnan(scores))[0])} is NaN")
    if both_classes and (labels.all() or not labels.any()):
        raise ValueError(f"{name} needs both classes among the labels, got only {'true' if labels.all() else 'false'}")
    if positives and not labels.any():
        raise ValueError(f"{name} needs a true label, got only false ones")
    return scores, labels


# -- reading ---------------------------------------------------------------------------------------------------------


def _as_scores(scores: Any, triples: LabelledTriples, name: str) -> np.ndarray:
    """Scores as a float64 array (n,) (exact: every float dtype widens exactly), checked: one per triple, no NaN."""
    if isinstance(scores, torch.Tensor):
        scores = scores.detach().cpu().double().numpy()
    values = np.asarray(scores, dtype=np.float64).reshape(-1)
    if values.shape[0] != len(triples):
        raise ValueError(f"{name} must hold one score per labelled triple: {values.shape[0]} for {len(triples)}")
    if np.isnan(values).any():
        row = int(np.nonzero(np.isnan(values))[0][0])
        raise ValueError(f"{name} row {row} (triple {triples.triples[row].tolist()}) is NaN")
    return values


def _negatives_beside(dataset: Any, split: str) -> Path:
    source = getattr(dataset, "sources", {}).get(split)
    if not source:
        raise ValueError(f"the dataset knows no file for its {split} split (built in memory?): pass negatives=<path>")
    folder = Path(source).parent
    names = [f"{split}_negatives.txt", f"{split}_negatives.txt.gz"]
    found = [folder / name for name in names if (folder / name).is_file()]
    if len(found) != 1:
        what = "no" if not found else "more than one"
        raise ValueError(f"{what} negatives file for {split} in {str(folder)!r}; tried {', '.join(names)}")
    return found[0]


def _read_rows(path: Path, entity_to_id: Mapping[str, int], relation_to_id: Mapping[str, int], *, with_labels: bool,
               sep: str = "\t") -> tuple[torch.Tensor, torch.Tensor | None]:  # fmt: skip
    """(triples (n, 3), labels (n,) or None) of a file of ``head relation tail [label]`` lines, mapped."""
    if not path.is_file():
        raise ValueError(f"no file {str(path)!r}")
    width, rows, labels, seen = 4 if with_labels else 3, [], [], set()
    for line_number, line in iter_data_lines(path.parent, path.name, str(path)):
        fields = [part.strip() for part in line.split(sep)]
        where = f"{path} line {line_number}"
        if len(fields) != width:
            named = "head, relation, tail, label" if with_labels else "head, relation, tail"
            raise ValueError(f"{where}: expected {width} fields ({named}), got {len(fields)}")
        ids = []
        for kind, label, vocabulary in zip(("head", "relation", "tail"), fields[:3],
                                           (entity_to_id, relation_to_id, entity_to_id), strict=True):  # fmt: skip
            if label not in vocabulary:
                raise ValueError(f"{where}: unknown {kind} {label!r} (not in the model's vocabulary)")
            ids.append(int(vocabulary[label]))
        rows.append(ids)
        if with_labels:
            if fields[3] not in ("1", "+1", "-1", "0"):
                raise ValueError(f"{where}: label {fields[3]!r} is none of 1 (true), -1 or 0 (false)")
            seen.add(fields[3].lstrip("+"))
            if {"-1", "0"} <= seen:
                raise ValueError(f"{where}: the file labels false triples both -1 and 0; its two classes must be "
                                 "1 / -1 or 1 / 0")  # fmt: skip
            labels.append(fields[3].lstrip("+") == "1")
    if not rows:
        raise ValueError(f"{path} holds no triple")
    return torch.tensor(rows, dtype=torch.long), torch.tensor(labels, dtype=torch.bool) if with_labels else None


def _known_negatives(triples: torch.Tensor, labels: torch.Tensor, known: torch.Tensor, keep: KnownNegatives,
                     where: str) -> tuple[tuple[torch.Tensor, torch.Tensor], int]:  # fmt: skip
    """((triples, labels) with the false-labelled known triples kept or dropped, how many there were), warned."""
    if keep not in ("keep", "drop"):
        raise ValueError(f"known_negatives must be 'keep' or 'drop', got {keep!r}")
    _, inverse = torch.unique(torch.cat([triples, known]), dim=0, return_inverse=True)
    is_known = torch.isin(inverse[: len(triples)], inverse[len(triples) :]) & ~labels
    count = int(is_known.sum())
    if count:
        done = "kept, labelled false" if keep == "keep" else "dropped"
        warn_caller(f"{count} of {int((~labels).sum())} negatives of {where} are known triples ({done})",
                    KnownNegativesWarning)  # fmt: skip
        if keep == "drop":
            triples, labels = triples[~is_known], labels[~is_known]
    return (triples, labels), count


def _labels_by_id(label_to_id: Mapping[str, int]) -> tuple[str, ...]:
    labels = [""] * (max(label_to_id.values(), default=-1) + 1)
    for label, index in label_to_id.items():
        labels[index] = labels[index] or label
    return tuple(labels)
