"""Sharded candidates over ``torch.distributed``: each rank holds a contiguous shard of the entity table and ranks
every task against it; the per-task integer counts are summed across the ranks.

A query/candidate model (:class:`kgeval.protocol.ShardedCandidateModel`) says which shard it holds with

    ``kgeval_candidate_shard(target) -> (start, stop)``

the global entity ids whose vectors ``kgeval_candidates(target)`` returns on this rank (a (stop - start, d)
matrix). The ranks' shards, in rank order, must tile [0, num_entities). ``kgeval_query(batch, target)`` is then
called on each rank with only the queries whose entity it holds (the head of (h, r) for "tail", the tail of (r, t)
for "head"; global ids), and the query vectors are shared.

One side and one candidate set (:meth:`ShardedSide.rank`), on every rank:

1. the tasks whose true answer lies in this shard ("owned") are ranked against the shard by the ordinary loop
   (:func:`kgeval._engine.loop.rank_side`), which reads each true score from the tile holding it -- the arithmetic
   the counts use;
2. the true scores are shared bit for bit (each from its owner);
3. the other tasks are counted against the whole shard with those true scores (no candidate here is their answer;
   their known answers here are filtered as usual);
4. the per-task integer counts above / below the true score are summed across the ranks (one all-reduce); the
   number of candidates and of filtered candidates are those of the whole candidate set.

So every rank compares against the same float, each candidate is counted once, by the rank holding it, and the
ranks are those of a single process. Collectives run only between :class:`CollectiveCheck` blocks: a rank that
fails raises on every rank instead of leaving the others waiting.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import torch
from torch import distributed as dist

from kgeval._engine import sizes as batching
from kgeval._engine.counting import BatchCounts, SideCounts
from kgeval._engine.distributed import CollectiveCheck, communication_device
from kgeval._engine.filter_index import SideIndex
from kgeval._engine.gemm_scoring import GemmScorer, L1Scorer, _check_vectors
from kgeval._engine.loop import EngineState, Observer, SideTasks, rank_side
from kgeval._engine.pairs import expand_pairs
from kgeval._inputs import RequestedSizes
from kgeval.protocol import SHARD_METHOD
from kgeval.typing import Target

#: the column of a (B, 2) query batch holding the query's entity, per target
ENTITY_COLUMN: dict[Target, int] = {"tail": 0, "head": 1}

#: query rows per call of ``kgeval_query`` while the query vectors are computed
QUERY_CHUNK = 2**16

#: filtered pairs expanded at once while the filtered candidates of the whole candidate set are counted
PAIR_CHUNK = 2**22


@dataclass(frozen=True)
class CandidateShard:
    """The global entity ids [start, stop) whose candidate vectors this rank holds, for one target."""

    start: int
    stop: int
    rank: int
    world_size: int

    def holds(self, entities: torch.Tensor) -> torch.Tensor:
        """BoolTensor: whether each entity id lies in this shard."""
        return (entities >= self.start) & (entities < self.stop)


def declares_shard(form: Any) -> bool:
    """Whether a query/candidate form has the shard method (:data:`SHARD_METHOD`)."""
    return callable(getattr(form, SHARD_METHOD, None))


def declared_shard(form: Any, target: Target, num_entities: int) -> tuple[int, int] | None:
    """The (start, stop) a model's form declares for ``target`` (checked), or None when it declares none."""
    method = getattr(form, SHARD_METHOD, None)
    if method is None:
        return None
    if not callable(method):
        raise TypeError(f"model.{SHARD_METHOD} must be a method (target) -> (start, stop), got {type(method).__name__}")
    declared = method(target)
    if (
        not isinstance(declared, tuple | list)
        or len(declared) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in declared)
    ):
        raise TypeError(f"model.{SHARD_METHOD}({target!r}) must return two ints (start, stop), got {declared!r}")
    start, stop = declared
    if not 0 <= start <= stop <= num_entities:
        raise ValueError(
            f"model.{SHARD_METHOD}({target!r}) returned ({start}, {stop}), expected 0 <= start <= stop <= "
            f"num_entities = {num_entities}"
        )
    return start, stop


def gather_shards(
    declared: dict[Target, tuple[int, int] | None], num_entities: int, group: Any | None
) -> dict[Target, CandidateShard]:
    """The sharded targets, from each rank's declarations (a collective: every rank calls it, same targets).

    A target none of whose ranks declares a shard, or whose every rank declares all entities, is not sharded (the
    tasks are shared out as usual). Otherwise the shards, in rank order, must tile [0, num_entities): a ValueError
    on every rank names them. Without a process group a declared shard must hold every entity."""
    world_size = 1 if group is None else dist.get_world_size(group)
    per_rank: list[Any] = [declared]
    if group is not None:
        per_rank = [None] * world_size
        dist.all_gather_object(per_rank, declared, group=group)
    rank = 0 if group is None else dist.get_rank(group)
    shards = {}
    for target in declared:
        spans = [rank_declared[target] for rank_declared in per_rank]
        if all(span is None or tuple(span) == (0, num_entities) for span in spans):
            continue
        if any(span is None for span in spans):
            raise ValueError(
                f"some ranks declare a shard of the {target} candidates ({SHARD_METHOD}) and some do not: {spans}"
            )
        if group is None:
            raise ValueError(
                f"the model holds only the entities {tuple(spans[0])} of {num_entities} ({SHARD_METHOD}): sharded "
                "candidates need every shard's rank in an initialised torch.distributed process group"
            )
        tiled = spans[0][0] == 0 and spans[-1][1] == num_entities
        tiled = tiled and all(a[1] == b[0] for a, b in itertools.pairwise(spans))
        if not tiled:
            raise ValueError(
                f"the {target} candidate shards of the ranks, in rank order, must tile the entities [0, "
                f"{num_entities}) without gap or overlap; got {[tuple(span) for span in spans]}"
            )
        shards[target] = CandidateShard(int(spans[rank][0]), int(spans[rank][1]), rank, world_size)
    return shards


def share_from_owners(values: torch.Tensor, owned: torch.Tensor, group: Any) -> torch.Tensor:
    """Every row of ``values`` (n, ...) as the rank that owns it has it, bit for bit (a collective).

    Each rank passes its rows where ``owned`` (BoolTensor (n,)) and anything elsewhere; each row must be owned by
    exactly one rank. The floats travel as their bit patterns (summed as integers with zeros), so -0.0, NaN
    payloads and every dtype arrive unchanged."""
    bits = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.int8}[values.element_size()]
    wide = torch.int64 if bits is torch.int64 else torch.int32  # integer sums gloo and NCCL both reduce
    comm = communication_device(group)
    mine = torch.where(owned.view(-1, *[1] * (values.dim() - 1)), values, torch.zeros_like(values))
    total = mine.contiguous().view(bits).to(device=comm, dtype=wide)
    dist.all_reduce(total, group=group)
    return total.to(bits).view(values.dtype).to(values.device)


class QueryVectors:
    """The query vectors of one side's distinct queries, each computed by the rank holding its entity, shared.

    Parameters
    ----------
    form : QueryCandidateModel
    target : "head" or "tail"
    queries : LongTensor of shape (n, 2)
        The queries of the side's tasks (any order, repeats allowed).
    shard : CandidateShard
    group : torch.distributed.ProcessGroup
    """

    def __init__(self, form: Any, target: Target, queries: torch.Tensor, shard: CandidateShard, group: Any) -> None:
        self.target = target
        self.distinct = torch.unique(queries, dim=0)  #: (U, 2), lexicographically sorted
        self._firsts = torch.unique(self.distinct[:, 0])
        self._seconds = torch.unique(self.distinct[:, 1])
        self._keys = self._key(self.distinct)  # sorted, since the order is lexicographic
        owned = shard.holds(self.distinct[:, ENTITY_COLUMN[target]])
        with CollectiveCheck(group):
            own = _own_queries(form, target, self.distinct[owned])
        layouts: list[Any] = [None] * shard.world_size
        dist.all_gather_object(layouts, None if own is None else (own.dtype, own.shape[1]), group=group)
        known = {layout for layout in layouts if layout is not None}
        if len(known) > 1:
            raise ValueError(f"the ranks' kgeval_query vectors differ in dtype or width: {layouts}")
        if not known:  # no query at all (no task): nothing to share
            self.vectors = torch.zeros(0, 0, device=queries.device)
            return
        dtype, width = known.pop()
        values = torch.zeros(self.distinct.shape[0], width, dtype=dtype, device=queries.device)
        if own is not None:
            values[owned] = own
        self.vectors = share_from_owners(values, owned, group)  #: (U, d) in the model's query dtype

    def _key(self, queries: torch.Tensor) -> torch.Tensor:
        """A key per (U', 2) query, increasing lexicographically: the positions of its two ids among the
        distinct values of each column (so no id, however large, overflows)."""
        first = torch.searchsorted(self._firsts, queries[:, 0].contiguous())
        second = torch.searchsorted(self._seconds, queries[:, 1].contiguous())
        return first * self._seconds.numel() + second

    def lookup(self, queries: torch.Tensor) -> torch.Tensor:
        """The (U', d) vectors of (U', 2) queries, which must be among the side's queries."""
        rows = torch.searchsorted(self._keys, self._key(queries)).clamp_(max=max(self._keys.numel() - 1, 0))
        if not torch.equal(self.distinct[rows], queries):
            raise AssertionError("a query outside the side's queries was looked up")  # pragma: no cover
        return self.vectors[rows]


def _own_queries(form: Any, target: Target, queries: torch.Tensor) -> torch.Tensor | None:
    """The model's vectors of the (m, 2) queries whose entity this rank holds, or None when there are none."""
    if queries.shape[0] == 0:
        return None
    parts = []
    for start in range(0, queries.shape[0], QUERY_CHUNK):
        batch = queries[start : start + QUERY_CHUNK]
        parts.append(_check_vectors(form.kgeval_query(batch, target), (batch.shape[0], None), "kgeval_query"))
    return torch.cat(parts)


class _ShardForm:
    """A query/candidate scorer over one rank's shard: the candidate vectors are the rows ``local_rows`` of the
    model's shard matrix; the query vectors are looked up in :class:`QueryVectors`."""

    def __init__(
        self,
        model: Any,
        target: Target,
        num_entities: int,
        candidate_ids: torch.Tensor,
        shard: CandidateShard,
        queries: QueryVectors,
    ) -> None:
        self._shard, self._queries_table = shard, queries
        super().__init__(model, target, num_entities, candidate_ids)  # type: ignore[call-arg]

    def _candidate_matrix(self) -> torch.Tensor:
        shard = self._shard
        matrix = self.model.kgeval_candidates(self.target)  # type: ignore[attr-defined]
        candidates = _check_vectors(matrix, (shard.stop - shard.start, None), "kgeval_candidates")
        local_rows = self.candidate_ids - shard.start  # type: ignore[attr-defined]
        if local_rows.numel() == candidates.shape[0]:
            return candidates  # the whole shard (the ids are sorted and unique)
        return candidates.index_select(0, local_rows)

    def _query_matrix(self, queries: torch.Tensor) -> torch.Tensor:
        return self._queries_table.lookup(queries)


class ShardGemmScorer(_ShardForm, GemmScorer):
    """:class:`GemmScorer` ("dot", "l2") over one rank's candidate shard."""


class ShardL1Scorer(_ShardForm, L1Scorer):
    """:class:`L1Scorer` ("l1") over one rank's candidate shard."""


class ShardedSide:
    """One side of a sharded evaluation on this rank: its shard, its shared query vectors and its group.

    Built collectively (every rank, same tasks): the query vectors of all the side's ``queries`` (n, 2) are
    computed and shared here."""

    def __init__(self, form: Any, target: Target, queries: torch.Tensor, shard: CandidateShard, group: Any) -> None:
        self.form, self.target, self.shard, self.group = form, target, shard, group
        self.queries = QueryVectors(form, target, queries, shard, group)

    def rank(
        self,
        tasks: SideTasks,
        candidate_ids: torch.Tensor | None,
        num_entities: int,
        state: EngineState,
        sizes: RequestedSizes,
        observer: Observer,
    ) -> SideCounts:
        """The counts of ``tasks`` (global candidate positions, ``tasks.position_of`` of the whole candidate set
        ``candidate_ids``; None: every entity) over every rank's candidates: those a single process gives.
        ``sizes`` are the caller's. A collective."""
        device = tasks.queries.device
        n = tasks.queries.shape[0]
        ids = candidate_ids if candidate_ids is not None else torch.arange(num_entities, device=device)
        here = self.shard.holds(ids)
        local_positions = here.nonzero()[:, 0]  #: global position of each local candidate
        local_of = torch.full((ids.numel(),), -1, dtype=torch.int64, device=device)  # global -> local position
        local_of[local_positions] = torch.arange(local_positions.numel(), device=device)
        entity_position = tasks.position_of
        if entity_position is None:
            entity_position = torch.arange(num_entities, device=device)
        position_of = torch.where(entity_position >= 0, local_of[entity_position.clamp(min=0)], entity_position)
        true_local = local_of[tasks.true_positions]
        owned = true_local >= 0
        with CollectiveCheck(self.group):
            scorer = (ShardL1Scorer if self.form.kgeval_similarity == "l1" else ShardGemmScorer)(
                self.form, self.target, num_entities, ids[local_positions], self.shard, self.queries
            )
            mine = self._rank_owned(scorer, tasks, owned, true_local, position_of, state, sizes, observer)
        true_scores = self._shared_true_scores(mine, owned)
        with CollectiveCheck(self.group):
            others = self._count_others(scorer, tasks, ~owned, position_of, true_scores, state, sizes, observer)
            parts = [(owned, mine), (~owned, others)]
            layout = _CountRows(tasks.side_index is not None, observer.raw_too, tasks.fine_index is not None)
            local = layout.local(n, device, parts)
            num_filtered = num_fine = None
            if tasks.side_index is not None:
                num_filtered = filtered_candidates(
                    tasks.side_index, tasks.queries, tasks.true_positions, tasks.position_of
                )
            if tasks.fine_index is not None:
                num_fine = filtered_candidates(tasks.fine_index, tasks.queries, tasks.true_positions, tasks.position_of)
        summed = local.to(communication_device(self.group))
        dist.all_reduce(summed, group=self.group)  # (above, below) x (filtered?, raw?, fine?) and NaN flags, per task
        return layout.global_counts(summed.to(device), ids.numel(), num_filtered, num_fine, true_scores)

    def _shared_true_scores(self, mine: SideCounts | None, owned: torch.Tensor) -> torch.Tensor:
        """Every task's true score, as its owner's counting read it (a collective). The dtype is the owners'
        (the tiles', or float32 where a fused kernel accumulates half-precision products in float32)."""
        dtypes: list[Any] = [None] * self.shard.world_size
        dist.all_gather_object(dtypes, None if mine is None else mine.true_scores.dtype, group=self.group)  # type: ignore[union-attr]
        known = {dtype for dtype in dtypes if dtype is not None}
        if len(known) != 1:
            raise ValueError(f"the ranks' true scores differ in dtype: {dtypes}")  # pragma: no cover
        true_scores = torch.zeros(owned.numel(), dtype=known.pop(), device=owned.device)
        if mine is not None and mine.true_scores is not None:
            true_scores[owned] = mine.true_scores
        return share_from_owners(true_scores, owned, self.group)

    def _rank_owned(
        self,
        scorer: Any,
        tasks: SideTasks,
        owned: torch.Tensor,
        true_local: torch.Tensor,
        position_of: torch.Tensor,
        state: EngineState,
        sizes: RequestedSizes,
        observer: Observer,
    ) -> SideCounts | None:
        """The owned tasks ranked against this shard (true scores read from their tiles), or None."""
        count = int(owned.sum())
        if count == 0:
            return None
        owned_tasks = SideTasks(tasks.queries[owned], true_local[owned], tasks.side_index, position_of,
                                fine_index=tasks.fine_index)  # fmt: skip
        chosen = batching.choose_sizes(scorer, count, tasks.queries.device, sizes.batch_size, sizes.slice_size,
                                       sizes.memory_budget)  # fmt: skip
        return rank_side(scorer, owned_tasks, chosen, state, observer)

    def _count_others(
        self,
        scorer: Any,
        tasks: SideTasks,
        others: torch.Tensor,
        position_of: torch.Tensor,
        true_scores: torch.Tensor,
        state: EngineState,
        sizes: RequestedSizes,
        observer: Observer,
    ) -> SideCounts | None:
        """The tasks whose answers lie on other ranks, counted against this whole shard with their shared true
        scores; None when there are none or this shard holds no candidate of the set."""
        count = int(others.sum())
        if count == 0 or scorer.num_candidates == 0:
            if observer.progress is not None and count:
                observer.progress.update(count)  # type: ignore[attr-defined]
            return None
        queries = tasks.queries[others]
        elsewhere = torch.full((count,), -1, dtype=torch.int64, device=queries.device)
        other_tasks = SideTasks(queries, elsewhere, tasks.side_index, position_of, true_scores[others],
                                tasks.fine_index)  # fmt: skip
        chosen = batching.choose_sizes(scorer, count, queries.device, sizes.batch_size, sizes.slice_size,
                                       sizes.memory_budget)  # fmt: skip
        return rank_side(scorer, other_tasks, chosen, state, observer)


def _above_below(counts: BatchCounts) -> tuple[torch.Tensor, torch.Tensor]:
    """(#candidates above, #below the true score) of some counts, inverting BatchCounts.from_counts."""
    return counts.greater, counts.num_candidates - 1 - counts.greater - counts.equal


@dataclass(frozen=True)
class _CountRows:
    """The rows of the (k, n) int64 tensor of per-task counts the ranks sum: (above, below) of the filtered (or raw)
    counts, then of the raw counts when ``filtered and raw_too``, then of the finer filter's when ``fine``, then the
    NaN flags."""

    filtered: bool
    raw_too: bool
    fine: bool

    @property
    def parts(self) -> list[str]:
        """The SideCounts fields held, in row order (two rows each)."""
        return ["counts"] + (["raw"] if self.filtered and self.raw_too else []) + (["fine"] if self.fine else [])

    def local(self, n: int, device: torch.device, parts: list[tuple[torch.Tensor, SideCounts | None]]) -> torch.Tensor:
        """This rank's counts; tasks of a part missing count 0."""
        names = self.parts
        local = torch.zeros(2 * len(names) + 1, n, dtype=torch.int64, device=device)
        for where, counts in parts:
            if counts is None:
                continue
            for row, name in enumerate(names):
                local[2 * row, where], local[2 * row + 1, where] = _above_below(getattr(counts, name))
            local[-1, where] = counts.counts.has_nan.long()
        return local

    def global_counts(
        self,
        summed: torch.Tensor,
        num_candidates: int,
        num_filtered: torch.Tensor | None,
        num_fine: torch.Tensor | None,
        true_scores: torch.Tensor,
    ) -> SideCounts:
        """The counts of every task from the ranks' summed counts (:meth:`local`)."""
        has_nan = summed[-1] > 0
        everything = torch.full_like(summed[0], num_candidates)
        zero = torch.zeros_like(everything)
        removed = {"counts": num_filtered if num_filtered is not None else zero, "raw": zero,
                   "fine": num_fine if num_fine is not None else zero}  # fmt: skip
        counts = {
            name: BatchCounts.from_counts(summed[2 * row], summed[2 * row + 1], has_nan, everything - removed[name])
            for row, name in enumerate(self.parts)
        }
        return SideCounts(counts["counts"], counts.get("raw"), true_scores, counts.get("fine"))


def filtered_candidates(
    side: SideIndex, queries: torch.Tensor, true_positions: torch.Tensor, position_of: torch.Tensor | None
) -> torch.Tensor:
    """Per task (LongTensor (n,)): the filtered candidates other than its true answer among the whole candidate set
    (``position_of``; None: every entity), as the single-process loop counts them (:func:`expand_pairs`), the
    tasks' runs expanded :data:`PAIR_CHUNK` pairs at a time."""
    starts, lengths = side.lookup(queries[:, 0], queries[:, 1])
    if position_of is None:
        return lengths - 1
    counts = torch.empty_like(lengths)
    ends = torch.cumsum(lengths, 0)
    begin = 0
    while begin < lengths.numel():
        end = max(begin + 1, int(torch.searchsorted(ends, ends[begin] - lengths[begin] + PAIR_CHUNK, right=True)))
        total = int(lengths[begin:end].sum())
        pairs = expand_pairs(side, starts[begin:end], lengths[begin:end], total, true_positions[begin:end], position_of)
        counts[begin:end] = pairs.num_filtered
        begin = end
    return counts
