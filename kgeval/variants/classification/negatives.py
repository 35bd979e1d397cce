"""Negatives drawn with a seed for triple classification: K corrupted triples per positive, none of them a known
triple nor the positive (:func:`draw_negatives`), drawn uniformly, by position or within type constraints
(:data:`NEGATIVE_STRATEGIES`), with the counts of how the drawing went (:class:`DrawnNegativesReport`); tensors in,
tensors out (:mod:`kgeval.variants.classification.labelled` labels them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from kgeval import _checks
from kgeval.exceptions import NegativeShortfallWarning, warn_caller

__all__ = ["NEGATIVE_STRATEGIES", "DrawnNegativesReport", "draw_negatives"]

NegativeStrategy = Literal["uniform", "positional", "type-constrained"]
#: the strategies of :func:`draw_negatives` (docs/classification.md)
NEGATIVE_STRATEGIES: tuple[str, ...] = ("uniform", "positional", "type-constrained")
#: rounds of redrawing the rejected draws before a positive is left with fewer than K negatives
MAX_ROUNDS = 100


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
