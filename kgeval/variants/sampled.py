"""SampledRankBasedEvaluator: each true answer ranked among sampled negatives instead of every entity -- given per
task (the ogbl-wikikg2 / ogbl-biokg ``head_neg`` / ``tail_neg`` layout) or drawn with a seed, uniformly or in
proportion to degree, filtered against the known triples on request (PyKEEN's name and arguments)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import torch

from kgeval import _checks
from kgeval._engine import FilterIndex, candidate_scorer, exact_arithmetic, pack_pairs
from kgeval._inputs import check_model_inputs
from kgeval._modes import evaluation_mode
from kgeval._tasks import ANSWER_COLUMN, QUERY_COLUMNS
from kgeval.accumulator import MetricAccumulator
from kgeval.results import RankBasedMetricResults
from kgeval.typing import ENTITY_TARGETS, EntityTarget, InductiveMode
from kgeval.variants.precomputed import ranks_among

__all__ = ["SampledRankBasedEvaluator"]

Sampling = Literal["uniform", "degree"]
#: rounds of redrawing the negatives that hit a known triple or the true answer, before the tasks still short of
#: negatives draw from their own allowed entities
REDRAWS = 10


class SampledRankBasedEvaluator:
    """Rank the true head and tail of each triple among ``num_negatives`` negatives per task.

    Parameters
    ----------
    evaluation_factory : object with ``mapped_triples``, optional
        PyKEEN's first parameter (a ``TriplesFactory``): the triples the negatives belong to. Negatives (given or
        drawn) are then rows of these triples, and each evaluated triple takes the row of its first occurrence
        there (a triple outside them is an error); without it, row i belongs to row i of ``mapped_triples``.
    num_negatives : int, default=50
        Negatives drawn per task (ignored for a side whose negatives are given).
    head_negatives, tail_negatives : LongTensor of shape (n, K), optional
        Fixed negatives per task, row i for row i of ``mapped_triples`` (or of ``evaluation_factory``'s triples;
        OGB's ``head_neg`` / ``tail_neg``). With ``filtered=True`` a given negative that is the true answer or
        completes the task into a known triple is left out (as PyKEEN does: the task's num_candidates shrinks);
        with ``filtered=False`` they are used as given (OGB's protocol).
    additional_filter_triples : LongTensor (m, 3) or a sequence of them, optional
        Known triples besides the evaluated ones; with ``filtered=True`` drawn negatives never complete a task into
        a known triple.
    sampling : {"uniform", "degree"}, default="uniform"
        Draw negatives uniformly over the entities, or in proportion to their degree in ``degree_triples``.
    degree_triples : LongTensor (m, 3), optional
        The triples degrees are counted on (usually train); required for ``sampling="degree"``.
    filtered : bool, default=True
        Negatives are never the true answer nor complete a known triple (evaluated or additional): drawn ones are
        drawn that way, given ones are filtered.
    seed : int, default=0
        Seeds the draws: the same seed gives the same negatives.
    ks : sequence of int, default=(1, 3, 5, 10)
    keep_records : bool, default=True

    Notes
    -----
    A task's candidates are its true answer and its K negatives: K distinct entities drawn without replacement (as
    PyKEEN's ``random.sample`` draws them), so its num_candidates is K + 1 and the adjusted metrics use that null
    model. Where fewer than K entities are left to draw (few entities, or many known answers), the task ranks among
    those there are (num_candidates below K + 1; PyKEEN repeats its pool instead, whose copies tie with each other);
    a task with none left ranks alone (num_candidates 1). The negatives are drawn once from ``evaluation_factory``'s
    triples (or the evaluated ones) filtered by the constructor's ``additional_filter_triples``, as PyKEEN draws them;
    the filter triples given to :meth:`evaluate` then remove the negatives that complete one of them (the task's
    num_candidates shrinks), as PyKEEN's evaluation loop masks their scores -- so :meth:`evaluate` and PyKEEN's
    streamed loop (:meth:`negatives_of`) rank the same candidates. The true answer and its negatives are scored
    in the same call (by the model's ``score_hrt`` / ``forward(h, r, t)``, else by its full ``score_t`` / ``score_h``
    rows), so their scores come from the same arithmetic; ranks follow METRICS.md's rule (optimistic, pessimistic,
    realistic). Sampled metrics are far more optimistic than full ranking: report which one a number is.
    """

    def __init__(
        self,
        evaluation_factory: Any = None,
        *,
        num_negatives: int | None = 50,
        head_negatives: torch.Tensor | None = None,
        tail_negatives: torch.Tensor | None = None,
        additional_filter_triples: torch.Tensor | Sequence[torch.Tensor] | None = None,
        sampling: Sampling = "uniform",
        degree_triples: torch.Tensor | None = None,
        filtered: bool = True,
        seed: int = 0,
        ks: Sequence[int] = (1, 3, 5, 10),
        keep_records: bool = True,
    ) -> None:
        if isinstance(evaluation_factory, int):
            raise TypeError(
                f"SampledRankBasedEvaluator's first positional parameter is PyKEEN's evaluation_factory (a "
                f"TriplesFactory); pass num_negatives={evaluation_factory!r} by keyword"
            )
        if evaluation_factory is not None and not isinstance(getattr(evaluation_factory, "mapped_triples", None),
                                                             torch.Tensor):  # fmt: skip
            raise TypeError(
                "evaluation_factory must have a mapped_triples tensor (a PyKEEN TriplesFactory), got "
                f"{type(evaluation_factory).__name__}"
            )
        self.evaluation_factory = evaluation_factory
        if sampling not in ("uniform", "degree"):
            raise ValueError(f"sampling must be 'uniform' or 'degree', got {sampling!r}")
        if sampling == "degree" and degree_triples is None:
            raise ValueError("sampling='degree' needs degree_triples (the triples degrees are counted on)")
        self.num_negatives = _checks.check_positive_int(num_negatives, "num_negatives", allow_none=True) or 50
        self.negatives: dict[EntityTarget, torch.Tensor | None] = {"head": head_negatives, "tail": tail_negatives}
        self.additional_filter_triples = additional_filter_triples
        self.sampling: Sampling = sampling
        self.degree_triples = degree_triples
        self.filtered = bool(filtered)
        self.seed = int(seed)
        self.ks = _checks.check_ks(ks)
        self.keep_records = bool(keep_records)
        #: the negatives of evaluation_factory's rows drawn by :meth:`negatives_of`: (num_entities, per side)
        self._factory_negatives: tuple[int, dict[EntityTarget, torch.Tensor]] | None = None

    def __repr__(self) -> str:
        return (
            f"SampledRankBasedEvaluator(num_negatives={self.num_negatives}, sampling={self.sampling!r}, "
            f"filtered={self.filtered}, seed={self.seed}, ks={self.ks})"
        )

    def evaluate(
        self,
        model: Any,
        mapped_triples: torch.Tensor,
        *,
        additional_filter_triples: torch.Tensor | Sequence[torch.Tensor] | None = None,
        targets: Sequence[EntityTarget] = ("head", "tail"),
        num_entities: int | None = None,
        batch_size: int = 256,
        use_tqdm: bool = False,
        device: torch.device | str | None = None,
        mode: InductiveMode | None = None,
    ) -> RankBasedMetricResults:
        """Every metric of the sampled ranking of ``mapped_triples`` (LongTensor (n, 3)); ``additional_filter_triples``
        adds to the evaluator's own. ``use_tqdm`` is accepted for symmetry and ignored (the work is small);
        ``device`` (PyKEEN's argument) must be None or the model's device, and ``mode`` the inductive graph whose
        entities the negatives are drawn from and scored in, as in :meth:`kgeval.RankBasedEvaluator.evaluate`."""
        del use_tqdm
        sides: tuple[EntityTarget, ...] = _checks.check_targets(targets, ENTITY_TARGETS)  # type: ignore[assignment]
        checked = check_model_inputs(model, sides, num_entities, device=device, mode=mode)
        resolved, num_entities, num_relations = checked.model, checked.num_entities, checked.num_relations
        view = resolved.view
        batch_size = _checks.check_positive_int(batch_size, "batch_size")
        device = resolved.device
        triples = _checks.check_triples(mapped_triples, "mapped_triples", num_entities, num_relations).to(device)
        _checks.check_evaluated(triples, "mapped_triples")
        reference, rows = triples, None  # the triples the negatives belong to, and each evaluated triple's row there
        if self.evaluation_factory is not None:
            factory_triples = self.evaluation_factory.mapped_triples
            reference = _checks.check_triples(factory_triples, "evaluation_factory.mapped_triples", num_entities,
                                              num_relations).to(device)  # fmt: skip
            rows = rows_of(triples, reference)
        own = [t.to(device) for t in _checks.check_filter_triples(self.additional_filter_triples, num_entities,
                                                                  num_relations)]  # fmt: skip
        extra = [t.to(device) for t in _checks.check_filter_triples(additional_filter_triples, num_entities,
                                                                    num_relations)]  # fmt: skip
        drawn = self.draw_negatives(reference, num_entities, own, sides)  # the reference holds the evaluated triples
        if self.filtered and extra:  # the call's known triples remove the negatives that complete one of them (the
            index = FilterIndex(torch.cat(extra))  # negatives complete none of the reference's or the constructor's)
            drawn = {target: _masked(index, target, reference, negatives) for target, negatives in drawn.items()}
        accumulators = {}
        with evaluation_mode(model), torch.inference_mode(), exact_arithmetic("exact"):
            for target in sides:
                negatives = drawn[target]
                if rows is not None:
                    negatives = negatives[rows]
                optimistic, pessimistic, counts = _ranks(view, triples, negatives, target, batch_size, num_entities)
                accumulator = MetricAccumulator(ks=self.ks, keep_records=self.keep_records)
                task_index = torch.arange(triples.shape[0], device=device)
                accumulator.update_unchecked(optimistic, pessimistic, counts, triples, task_index)
                accumulators[target] = accumulator
        return RankBasedMetricResults.from_accumulators(accumulators, self.ks)

    def draw_negatives(
        self,
        reference: torch.Tensor,
        num_entities: int,
        known: Sequence[torch.Tensor] = (),
        targets: Sequence[EntityTarget] = ("head", "tail"),
    ) -> dict[EntityTarget, torch.Tensor]:
        """The (n, K) negatives of each side for the tasks of ``reference``'s n rows: the given ones (filtered to -1
        where they complete a known triple, with ``filtered=True``), or drawn with this evaluator's seed, side after
        side in the order of ``targets``, never completing a triple of ``reference`` or ``known`` (LongTensors
        (m, 3); with ``filtered=True``). :meth:`evaluate` draws with ``known`` = the constructor's
        ``additional_filter_triples``, then removes those that complete a triple of its own call's."""
        index = FilterIndex(torch.cat([reference, *known])) if self.filtered else None
        generator = torch.Generator().manual_seed(self.seed)
        return {target: self._negatives(target, reference, num_entities, index, generator) for target in targets}

    def negatives_of(self, triples: torch.Tensor, num_entities: int, target: EntityTarget) -> torch.Tensor:
        """The (n, K) negatives of the ``target`` tasks of ``triples`` (n, 3), each a triple of
        ``evaluation_factory``: those of its first row there, as :meth:`evaluate` uses them (drawn once per entity
        count, filtered against the factory's triples and ``additional_filter_triples``), on the CPU.

        Raises
        ------
        ValueError
            Without ``evaluation_factory``, or for a triple that is not one of its rows.
        """
        if self.evaluation_factory is None:
            raise ValueError("the negatives of given triples need evaluation_factory (the triples the negatives "
                             "belong to)")  # fmt: skip
        reference = self.evaluation_factory.mapped_triples.cpu()
        if self._factory_negatives is None or self._factory_negatives[0] != num_entities:
            known = [t.cpu() for t in _checks.check_filter_triples(self.additional_filter_triples, num_entities)]
            self._factory_negatives = (num_entities, self.draw_negatives(reference, num_entities, known))
        return self._factory_negatives[1][target][rows_of(triples.cpu(), reference)]

    def _negatives(
        self,
        target: EntityTarget,
        triples: torch.Tensor,
        num_entities: int,
        index: FilterIndex | None,
        generator: torch.Generator,
    ) -> torch.Tensor:
        """(n, K) negative entity ids of one side: the given ones, or drawn."""
        given = self.negatives[target]
        if given is not None:
            if not isinstance(given, torch.Tensor) or given.dim() != 2 or given.shape[0] != triples.shape[0]:
                raise ValueError(
                    f"{target}_negatives must have shape ({triples.shape[0]}, K), got {getattr(given, 'shape', given)}"
                )
            if given.dtype.is_floating_point or given.dtype == torch.bool:
                raise TypeError(f"{target}_negatives must hold integer entity ids, got {given.dtype}")
            if given.numel() and (int(given.min()) < 0 or int(given.max()) >= num_entities):
                raise ValueError(f"{target}_negatives holds an id outside [0, {num_entities})")
            given = given.long().to(triples.device)
            if index is None:
                return given
            side = index.sides[target]
            queries = triples[:, QUERY_COLUMNS[target]]
            # the index holds these triples, so a negative equal to the answer is a known triple too
            known = _known(side, queries.cpu(), given.cpu()).to(given.device)
            return torch.where(known, -1, given)  # -1: no candidate (PyKEEN masks such scores as NaN)
        weights = torch.ones(num_entities, dtype=torch.float64, device="cpu")
        if self.sampling == "degree":
            counted = _checks.check_triples(self.degree_triples, "degree_triples", num_entities)
            weights = torch.bincount(counted[:, [0, 2]].reshape(-1), minlength=num_entities).double()
        return _draw(triples, target, weights, self.num_negatives, index, generator).to(triples.device)


def rows_of(triples: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """The row of each triple (n, 3) in ``reference`` (m, 3) -- its first occurrence -- as a LongTensor (n,);
    ValueError naming the first triple that is not there."""
    both = torch.cat([reference, triples])
    keys = pack_pairs(pack_pairs(both[:, 0], both[:, 1]), both[:, 2])
    reference_keys, keys = keys[: reference.shape[0]], keys[reference.shape[0] :]
    order = torch.argsort(reference_keys, stable=True)  # equal keys keep their order: the first occurrence first
    sorted_keys = reference_keys[order]
    found = torch.searchsorted(sorted_keys, keys).clamp(max=max(sorted_keys.numel() - 1, 0))
    missing = (sorted_keys[found] != keys) if sorted_keys.numel() else torch.ones_like(keys, dtype=torch.bool)
    if bool(missing.any()):
        row = int(missing.nonzero()[0, 0])
        raise ValueError(
            f"mapped_triples row {row} = {triples[row].tolist()} is not a triple of evaluation_factory: its "
            "negatives are unknown"
        )
    return order[found]


def _draw(
    triples: torch.Tensor,
    target: EntityTarget,
    weights: torch.Tensor,
    num_negatives: int,
    index: FilterIndex | None,
    generator: torch.Generator,
) -> torch.Tensor:
    """(n, K) distinct entities per task, drawn in proportion to ``weights`` without replacement, never the true
    answer and, with an index, never completing a task into a known triple; -1 fills a task's row where fewer than
    K such entities exist.

    All K are drawn at once with replacement; the draws that are the answer, complete a known triple or repeat an
    earlier draw of their row are redrawn, a few rounds; the tasks still short then draw the rest from their own
    allowed entities without replacement. Uniform weights make every set of K allowed entities equally likely (the
    procedure treats allowed entities alike), as PyKEEN's ``random.sample`` does."""
    triples = triples.cpu()
    n = triples.shape[0]
    answers = triples[:, ANSWER_COLUMN[target]]
    drawn = torch.multinomial(weights, n * num_negatives, replacement=True, generator=generator).view(n, num_negatives)
    queries = triples[:, QUERY_COLUMNS[target]]
    side = index.sides[target] if index is not None else None

    def rejected() -> torch.Tensor:
        bad = (drawn == answers[:, None]) | _repeats(drawn)
        return bad | _known(side, queries, drawn) if side is not None else bad

    for _ in range(REDRAWS):
        bad = rejected()
        if not bool(bad.any()):
            return drawn
        drawn[bad] = torch.multinomial(weights, int(bad.sum()), replacement=True, generator=generator)
    bad = rejected()
    for row in bad.any(dim=1).nonzero().flatten().tolist():
        allowed = weights.clone()
        allowed[answers[row]] = 0
        allowed[drawn[row][~bad[row]]] = 0  # the row's good draws stay; the rest are drawn among the others
        if side is not None:
            allowed[side.known_pairs(queries[row : row + 1, 0], queries[row : row + 1, 1])[1].cpu()] = 0
        missing = bad[row].nonzero().flatten()
        available = int((allowed > 0).sum())
        fill = torch.full((len(missing),), -1, dtype=drawn.dtype, device=drawn.device)
        if available:
            count = min(available, len(missing))
            fill[:count] = torch.multinomial(allowed, count, replacement=False, generator=generator)
        drawn[row, missing] = fill  # -1: fewer allowed entities than K
    return drawn


def _repeats(drawn: torch.Tensor) -> torch.Tensor:
    """(n, K) bool: whether an entry repeats an earlier entry of its row."""
    values, order = torch.sort(drawn, dim=1, stable=True)
    repeat = torch.zeros_like(drawn, dtype=torch.bool)
    repeat.scatter_(1, order[:, 1:], values[:, 1:] == values[:, :-1])
    return repeat


def _masked(index: FilterIndex, target: EntityTarget, reference: torch.Tensor, negatives: torch.Tensor) -> torch.Tensor:
    """``negatives`` (n, K) of the tasks of ``reference``'s rows with -1 where one completes a triple of ``index``."""
    present = negatives >= 0
    known = _known(index.sides[target], reference[:, QUERY_COLUMNS[target]].cpu(), negatives.clamp(min=0).cpu())
    return torch.where(known.to(negatives.device) & present, -1, negatives)


def _known(side: Any, queries: torch.Tensor, entities: torch.Tensor) -> torch.Tensor:
    """(n, K) bool: whether (query i, entities[i, j]) is a known triple."""
    device = side.keys.device
    rows, answers = side.known_pairs(queries[:, 0].to(device), queries[:, 1].to(device))
    task_rows = torch.arange(entities.shape[0], device=entities.device).unsqueeze(1).expand_as(entities).reshape(-1)
    keys = pack_pairs(torch.cat([task_rows, rows.cpu()]), torch.cat([entities.reshape(-1), answers.cpu()]))
    return torch.isin(keys[: task_rows.numel()], keys[task_rows.numel() :]).view(entities.shape)


def _ranks(
    model: Any, triples: torch.Tensor, negatives: torch.Tensor, target: EntityTarget, batch_size: int, num_entities: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(optimistic, pessimistic, num_candidates) of each task among its true answer and its negatives."""
    optimistic, pessimistic = [], []
    score = candidate_scorer(model, target, num_entities)
    for start in range(0, triples.shape[0], batch_size):
        batch, batch_negatives = triples[start : start + batch_size], negatives[start : start + batch_size]
        candidates = torch.cat([batch[:, ANSWER_COLUMN[target], None], batch_negatives.clamp(min=0)], dim=1)
        scores = score(batch[:, QUERY_COLUMNS[target]], candidates)
        nan = torch.isnan(scores) & torch.cat([torch.ones_like(batch_negatives[:, :1], dtype=torch.bool),
                                               batch_negatives >= 0], dim=1)  # fmt: skip
        if bool(nan.any()):
            row = int(nan.any(dim=1).nonzero()[0, 0]) + start
            raise ValueError(f"the model produced NaN scores for the {target} task of triple {triples[row].tolist()}")
        best, worst = ranks_among(scores[:, 0], scores[:, 1:], batch_negatives >= 0)
        optimistic.append(best)
        pessimistic.append(worst)
    return torch.cat(optimistic), torch.cat(pessimistic), 1 + (negatives >= 0).sum(dim=1)
