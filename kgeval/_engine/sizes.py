"""Sizes of one side's loop -- candidates per slice, tasks per batch, rows per tile -- and out-of-memory retries.

With ``batch_size=None`` the sizes come from a memory budget in bytes: the evaluator's ``memory_budget`` when set,
else on CUDA the smaller of 2 GiB and a quarter of the free memory (:func:`default_memory_budget`), and on CPU the
cache-sized constants below (a budget smaller than them shrinks them). A budget is shared between a batch's scores
and the kernel's temporaries (:data:`SCORES_SHARE`), its filtered pairs (:data:`PAIRS_SHARE`) and the answer
slices' scores a mixed-slice batch keeps (:data:`KEEP_SHARE`) -- :func:`budget_shares`. An out-of-memory error
halves the failing batch and retries it, and the size that worked is remembered by the evaluator for later calls
with the same shapes.

A model scored through its own methods (``score_t`` / ``score_h`` / ``score_r``, whole rows or candidate slices)
may hold far more per call than its scores -- a graph-conditioned model (``kgeval_measure_memory``, set by
``on_graphs``) message passing over the whole graph for each query, PyKEEN's ConvE ranking heads without inverse
triples a convolution for each (query, candidate) pair -- so without a batch size its batches and slices come from
its measured memory (:func:`measured_sizes`): a probe of a few small calls (kgeval._engine.memory_meter) gives its
memory per call, per query, per candidate and per (query, candidate) pair, and the usual sizes are lowered -- never
raised -- to what the budget holds (on CPU too, where the budget is then a fraction of the available memory,
:func:`measured_memory_budget`). A model whose calls cost about its scores keeps the usual sizes.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import weakref
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from kgeval._engine.form_check import model_name
from kgeval._engine.memory_meter import peak_call_bytes
from kgeval._engine.scoring import CANDIDATE_KEYWORD, SCORE_METHOD, CandidateScorer
from kgeval._engine.triple_scoring import TripleScorer
from kgeval.adapters.inductive import ModeBound
from kgeval.exceptions import MemoryBudgetWarning, warn_caller

#: score elements one model call may produce on CPU (16 MiB of float32)
CPU_SCORE_BUDGET = 2**22
#: score elements compared at once on CPU: 8 MiB of float32, a last-level-cache tile (best of 2**18 .. 2**22)
CPU_TILE_ELEMENTS = 2**21
#: score elements per tile on CPU for a kernel that counts a tile in one pass reading its rows in place (numba), and
#: for GEMM scorers with any kernel: taller column-blocked GEMMs run nearer the BLAS's peak, which outweighs the eager
#: kernel's passes leaving the cache (FB15k-237, DistMult d = 200, 2 cores, in-process: eager 2.71 -> 1.63 s, numba
#: 1.51 -> 1.04 s with the blocked GEMM; WN18RR even). The slices are still chosen from CPU_TILE_ELEMENTS.
CPU_TALL_TILE_ELEMENTS = 2**23
#: ranking tasks per batch for GEMM scorers on CPU (tiles bound the memory, batches amortise the planning)
CPU_GEMM_BATCH = 1024
#: tile rows below which a GEMM loses efficiency (d = 200: 51-row tiles ran 1.6x slower than 128-row ones on
#: WN18RR's 40,943 entities): wider candidate sets are sliced instead
MIN_TILE_ROWS = 128
#: filtered pairs per batch on CPU (each costs ~PAIR_BYTES while the batch runs)
MAX_PAIRS = 2**21
#: the default memory budget of a batch on CUDA: the smaller of DEVICE_MEMORY_CAP bytes and DEVICE_MEMORY_FRACTION
#: of the free memory (what a training loop holds for its model and optimizer stays free)
DEVICE_MEMORY_CAP = 2 * 2**30
DEVICE_MEMORY_FRACTION = 0.25
#: bytes budgeted per score element (the score and the counting kernel's temporaries) and per filtered pair
DEVICE_BYTES_PER_SCORE = 16
PAIR_BYTES = 40
#: shares of a memory budget: scores with their counting, filtered pairs, answer slices' scores kept between passes
SCORES_SHARE, PAIRS_SHARE, KEEP_SHARE = 0.5, 0.25, 0.25

T = TypeVar("T")


@dataclass(frozen=True)
class Sizes:
    """The sizes of one side's loop."""

    batch_size: int  #: ranking tasks per batch
    slice_size: int  #: candidates per slice
    tile_rows: int  #: task rows per tile
    max_pairs: int  #: filtered pairs per batch (beyond a batch's first task)
    automatic: bool  #: batch size chosen here (then out-of-memory errors are retried)
    memory_budget: int | None = None  #: the caller's budget in bytes the sizes were chosen within (None: default)


#: score elements a mixed-slice batch may keep between its two passes on CPU (64 MiB of float32)
CPU_KEEP_BUDGET = 2**24


#: fewest tasks per mixed-slice batch (:func:`for_mixed_slices`): below, rescoring the answer slices that do not fit
#: the keep budget costs less than the many small model calls of smaller batches
MIN_MIXED_BATCH = 16


def for_mixed_slices(sizes: Sizes, device: torch.device, num_candidates: int) -> Sizes:
    """``sizes`` for batches that mix candidate slices (kgeval._engine.counting: a first pass reads the true scores
    from the answers' slices, counting reads every slice): automatic batches small enough that the scores of every
    answer slice fit the keep budget between the passes, so that each slice is scored once (with 301 tasks over 300k
    entities, batches of 256 scored the model's rows 1.65x over); never below :data:`MIN_MIXED_BATCH` tasks.

    A batch of B tasks has at most B distinct queries and min(B, slices) answer slices of ``slice_size``
    candidates: B fits when B * min(B, slices) * slice_size <= the budget, which holds for B = budget // all
    candidates and for B = sqrt(budget // slice_size) alike. For models' own methods, whose calls cost per row
    scored; a GEMM scorer keeps its tall tiles instead (short GEMMs run far from the BLAS's peak)."""
    if not sizes.automatic:
        return sizes
    budget, width = keep_budget(device, sizes.memory_budget), max(1, sizes.slice_size)
    rows = max(MIN_MIXED_BATCH, budget // max(1, num_candidates), math.isqrt(budget // width))
    if rows >= sizes.batch_size:
        return sizes
    return dataclasses.replace(sizes, batch_size=rows, tile_rows=min(sizes.tile_rows, rows))


def default_memory_budget(device: torch.device) -> int | None:
    """The bytes a batch may use on ``device`` when the caller sets no budget: on CUDA the smaller of
    :data:`DEVICE_MEMORY_CAP` and :data:`DEVICE_MEMORY_FRACTION` of the free memory
    (``torch.cuda.mem_get_info``); None elsewhere (the CPU's cache-sized constants decide)."""
    if device.type != "cuda":
        return None
    free, _total = torch.cuda.mem_get_info(device)
    return _share_of(free)


def _share_of(free: int) -> int:
    """The budget ``free`` bytes allow: the smaller of :data:`DEVICE_MEMORY_CAP` and :data:`DEVICE_MEMORY_FRACTION`
    of them, at least 1."""
    return max(1, min(DEVICE_MEMORY_CAP, int(free * DEVICE_MEMORY_FRACTION)))


@dataclass(frozen=True)
class BudgetShares:
    """What a batch may hold within a memory budget (:func:`budget_shares`)."""

    scores: int  #: score elements (each with its counting temporaries, :data:`DEVICE_BYTES_PER_SCORE`)
    pairs: int  #: filtered pairs (:data:`PAIR_BYTES` each)
    kept: int  #: float32 scores of answer slices kept between a mixed-slice batch's passes


def budget_shares(memory_budget: int) -> BudgetShares:
    """``memory_budget`` bytes shared between a batch's scores, pairs and kept scores (:data:`SCORES_SHARE`,
    :data:`PAIRS_SHARE`, :data:`KEEP_SHARE`), each at least 1."""
    return BudgetShares(
        scores=max(1, int(memory_budget * SCORES_SHARE) // DEVICE_BYTES_PER_SCORE),
        pairs=max(1, int(memory_budget * PAIRS_SHARE) // PAIR_BYTES),
        kept=max(1, int(memory_budget * KEEP_SHARE) // 4),
    )


def _budget(device: torch.device, memory_budget: int | None) -> int | None:
    """The caller's budget, else the device's default (None on CPU: the cache-sized constants)."""
    return memory_budget if memory_budget is not None else default_memory_budget(device)


def keep_budget(device: torch.device, memory_budget: int | None = None) -> int:
    """Score elements a batch may keep to count its answer slices without rescoring them (kgeval._engine.counting):
    on CPU :data:`CPU_KEEP_BUDGET`, or the budget's share where smaller; elsewhere the budget's share."""
    budget = _budget(device, memory_budget)
    if budget is None:
        return CPU_KEEP_BUDGET if device.type == "cpu" else score_budget(device)
    kept = budget_shares(budget).kept
    return min(CPU_KEEP_BUDGET, kept) if device.type == "cpu" else kept


def score_budget(device: torch.device, memory_budget: int | None = None) -> int:
    """Score elements one batch may hold: the budget's share (``memory_budget``, else on CUDA the default of
    :func:`default_memory_budget`), on CPU at most :data:`CPU_SCORE_BUDGET` (its fixed budget without one)."""
    budget = _budget(device, memory_budget)
    if budget is None:
        return CPU_SCORE_BUDGET
    scores = budget_shares(budget).scores
    return min(CPU_SCORE_BUDGET, scores) if device.type == "cpu" else scores


def choose_sizes(
    scorer: CandidateScorer,
    num_tasks: int,
    device: torch.device,
    batch_size: int | None = None,
    slice_size: int | None = None,
    memory_budget: int | None = None,
) -> Sizes:
    """Batch, slice and tile sizes for one side within ``memory_budget`` bytes (None: the device's default, the
    module docstring); the caller's ``batch_size`` / ``slice_size`` win."""
    budget_bytes = _budget(device, memory_budget)
    budget = max(1, score_budget(device, budget_bytes) // getattr(scorer, "memory_per_score", 1))
    on_cpu = device.type == "cpu"
    tile = min(CPU_TILE_ELEMENTS, budget) if on_cpu else budget
    num_candidates = scorer.num_candidates
    if slice_size is None:
        if scorer.sizing == "full_rows":
            slice_size = num_candidates
        elif scorer.sizing == "sliced":
            slice_size = min(num_candidates, max(1, budget // 256))
        else:  # GEMM: one slice if a tile of MIN_TILE_ROWS full rows fits, else slices of that many rows
            fits = num_candidates * MIN_TILE_ROWS <= tile
            slice_size = num_candidates if fits else max(1, tile // MIN_TILE_ROWS)
        limit = scorer.max_slice(device)  # a table streamed from host memory: a slice at a time, never all of it
        if limit is not None:
            slice_size = min(slice_size, limit)
    slice_size = min(slice_size, num_candidates)
    automatic = batch_size is None
    if batch_size is None:  # a CPU GEMM: tiles bound the memory, batches amortise the planning
        batch_size = CPU_GEMM_BATCH if scorer.sizing == "gemm" and on_cpu else max(1, budget // slice_size)
    batch_size = max(1, min(batch_size, num_tasks))
    tile_rows = max(1, min(batch_size, tile // slice_size))
    return Sizes(batch_size, slice_size, tile_rows, _max_pairs(device, budget_bytes), automatic, memory_budget)


def _max_pairs(device: torch.device, memory_budget: int | None) -> int:
    """Filtered pairs per batch: :data:`MAX_PAIRS` on CPU and wherever no budget applies, the budget's share
    elsewhere and where it is smaller."""
    if memory_budget is None:
        return MAX_PAIRS
    pairs = budget_shares(memory_budget).pairs
    return min(MAX_PAIRS, pairs) if device.type == "cpu" else pairs


def with_tall_tiles(sizes: Sizes, device: torch.device) -> Sizes:
    """``sizes`` with tiles of :data:`CPU_TALL_TILE_ELEMENTS` on CPU (or the budget's score share where smaller),
    for a kernel that counts each tile in one pass or a GEMM scorer, whose column-blocked GEMMs
    (kgeval._engine.gemm_scoring.CPU_GEMM_COLUMNS) run nearer the BLAS's peak with more rows; unchanged elsewhere,
    where the budget already sets the tiles. Never shorter than before, never more rows than a batch."""
    if device.type != "cpu":
        return sizes
    tall = CPU_TALL_TILE_ELEMENTS
    if sizes.memory_budget is not None:
        tall = min(tall, score_budget(device, sizes.memory_budget))
    rows = max(sizes.tile_rows, min(sizes.batch_size, tall // sizes.slice_size))
    return dataclasses.replace(sizes, tile_rows=rows)


def shape_key(scorer: CandidateScorer, sizes: Sizes, device: torch.device) -> Hashable:
    """What makes two calls "the same shapes" for the remembered batch sizes of :func:`run_with_retry`."""
    return (str(device), type(scorer).__name__, type(scorer.model).__qualname__, scorer.target,
            scorer.num_candidates, sizes.slice_size, sizes.tile_rows)  # fmt: skip


def run_with_retry(
    ranges: Iterable[tuple[int, int]],
    run: Callable[[int, int], T],
    key: Hashable,
    retry: bool,
    device: torch.device,
    remembered: dict[Hashable, int],
) -> list[T]:
    """``run(begin, end)`` over every range, in order; on out-of-memory halve the range and retry it.

    Parameters
    ----------
    ranges : iterable of (begin, end)
        The planned batches.
    run : callable
        Processes tasks [begin, end) and returns their result; must not keep state from a failed call.
    key : hashable
        Shape key under which a reduced batch size is remembered.
    retry : bool
        False re-raises out-of-memory errors (the caller fixed the batch size).
    device : torch.device
        Its cache is emptied after an out-of-memory error (CUDA).
    remembered : dict
        Batch sizes that worked after a retry, by shape key: read before the first batch, written on a retry
        (the evaluator's own, so a later call with the same shapes starts at the size that worked).

    Returns
    -------
    list
        The results, one per processed range (a retried range yields the results of its parts).
    """
    limit = remembered.get(key) if retry else None
    results: list[T] = []
    for begin, end in ranges:
        pending = [(begin, end)]
        while pending:
            start, stop = pending.pop(0)
            if limit is not None and stop - start > limit:
                pending[:0] = [(start, start + limit), (start + limit, stop)]
                continue
            try:
                results.append(run(start, stop))
            except torch.OutOfMemoryError:
                if not retry or stop - start == 1:
                    raise
                _release(device)
                limit = (stop - start) // 2
                remembered[key] = limit
                pending.insert(0, (start, stop))
    return results


def _release(device: torch.device) -> None:
    """Return cached blocks to the device after an out-of-memory error."""
    if device.type == "cuda":
        torch.cuda.empty_cache()


# -- batch and slice sizes measured from a model's memory per call -----------------------------------------------------
#: the queries of the probe's larger calls (its first calls score one): the memory of 1 and of this many queries
#: separate a call's fixed cost from its cost per query
MEMORY_PROBE_QUERIES = 4
#: candidates of a sliced probe's narrower calls (its wider ones ask for twice as many): few enough that a model
#: paying for every (query, candidate) pair -- PyKEEN's ConvE ranking heads without inverse triples runs its
#: convolution for each -- is probed within a few MiB, as many as the stability probe's window
MEMORY_PROBE_CANDIDATES = 32
#: distinct queries are looked for among this many of the side's first tasks
_PROBE_SCAN = 16 * MEMORY_PROBE_QUERIES

logger = logging.getLogger("kgeval.sizes")


@dataclass(frozen=True)
class MemoryPerQuery:
    """What one call of a model's scoring method allocates (:func:`measure_memory_per_query`,
    :func:`measure_memory_per_pair`), in bytes: a call of q queries against k candidates holds at most

        fixed + q * per_query + k * per_candidate + q * k * per_pair

    (the peak of the call, its result included). For a call of whole rows (no candidate ids) per_query holds the
    whole row and the last two are 0."""

    fixed: int  #: whatever its queries and candidates (at least 0)
    per_query: int  #: per query scored, whatever its candidates (whole rows: its row of scores included)
    per_candidate: int = 0  #: per candidate asked for, whatever its queries (e.g. the candidates' vectors gathered)
    per_pair: int = 0  #: per (query, candidate) pair (its score included; a convolution per pair: its feature maps)
    #: False for a measure of one distinct query (its whole cost counted per query: exact for one, more than enough
    #: for several), which a later side with more queries measures again
    complete: bool = True


@dataclass(frozen=True)
class MeasuredBatch:
    """Batch and slice sizes derived from a model's measured memory (:func:`measured_sizes`), as the evaluator
    reports them (``RankBasedEvaluator.measured_batches``)."""

    model: str  #: the model's class
    mode: str | None  #: the inductive mode (the graph) scored
    target: str  #: the side ranked
    device: str
    fixed_bytes: int  #: a call's memory whatever its queries and candidates
    #: a call's memory per query: for whole rows at least DEVICE_BYTES_PER_SCORE per entity; for slices whatever
    #: its candidates (they add per_candidate_bytes and per_pair_bytes)
    per_query_bytes: int
    memory_budget: int  #: the budget in bytes (given, or the default of :func:`measured_memory_budget`)
    #: the queries a call of ``slice_size`` candidates may score within the budget: its share less the call's
    #: fixed and per-candidate costs, over the cost of a query with its pairs (0: not even one)
    queries_within_budget: int
    batch_size: int  #: the tasks per batch chosen: the usual batch (choose_sizes), lowered to the above, at least 1
    slice_size: int = 0  #: the candidates per call chosen: the usual slice, lowered where one query needs it
    per_candidate_bytes: int = 0  #: a sliced call's memory per candidate, whatever its queries (whole rows: 0)
    per_pair_bytes: int = 0  #: a sliced call's memory per (query, candidate) pair, at least DEVICE_BYTES_PER_SCORE

    @property
    def within_budget(self) -> bool:
        """Whether one query (against one slice) fits the budget (else the batches hold one query each, beyond
        it)."""
        return self.queries_within_budget >= 1


@dataclass
class MemoryProbes:
    """The memory measured per model (the caller's object) and (view, probe, mode, side, device, entities, probe
    width), kept by the evaluator so that each is probed once (kgeval._engine.loop.EngineState), and the sizes
    derived from it in the latest evaluations by (mode, side, device)."""

    measured: weakref.WeakKeyDictionary[Any, dict[Hashable, MemoryPerQuery]] = dataclasses.field(
        default_factory=weakref.WeakKeyDictionary)  # fmt: skip
    batches: dict[tuple[str | None, str, str], MeasuredBatch] = dataclasses.field(default_factory=dict)


def measures_memory(scorer: CandidateScorer) -> bool:
    """Whether ``scorer``'s automatic sizes come from the model's measured memory (:func:`measured_sizes`): every
    scorer that calls the model's own scoring methods -- whole rows ("full_rows") or candidate slices ("sliced") --
    since such a call may hold far more than its scores (a graph-conditioned model's message passing over the whole
    graph for each query; a convolution per (query, candidate) pair); not a GEMM form, whose tiles are its memory,
    nor whole-triple scoring (sized for :attr:`TripleScorer.memory_per_score` bytes per triple) unless the model
    declares ``kgeval_measure_memory = True``."""
    if scorer.sizing not in ("full_rows", "sliced"):
        return False
    return not isinstance(scorer, TripleScorer) or _graph_conditioned(scorer)


def _graph_conditioned(scorer: CandidateScorer) -> bool:
    """Whether the model declares ``kgeval_measure_memory = True`` (a graph-conditioned model bound by
    ``on_graphs``): it computes every candidate's score whatever it is asked, so it is measured and called for whole
    rows."""
    return getattr(scorer.model, "kgeval_measure_memory", False) is True


def _whole_rows(scorer: CandidateScorer) -> bool:
    """Whether the probe and the sizes are those of whole rows (one call scores every candidate) rather than of
    slices (:func:`measure_memory_per_pair`)."""
    return scorer.sizing == "full_rows" or _graph_conditioned(scorer)


def available_host_memory() -> int | None:
    """The bytes of memory available to new allocations on this machine (psutil's ``available``, else the free
    pages of ``os.sysconf``); None where neither says."""
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def measured_memory_budget(device: torch.device, memory_budget: int | None = None) -> int:
    """The bytes a batch of a measured model may use: ``memory_budget`` when given; on CUDA the default of
    :func:`default_memory_budget`; elsewhere the smaller of :data:`DEVICE_MEMORY_CAP` and
    :data:`DEVICE_MEMORY_FRACTION` of the memory available (:func:`available_host_memory`; the cap where unknown)."""
    if memory_budget is not None:
        return memory_budget
    default = default_memory_budget(device)
    if default is not None:
        return default
    available = available_host_memory()
    return DEVICE_MEMORY_CAP if available is None else _share_of(available)


def _distinct_queries(queries: torch.Tensor) -> torch.Tensor:
    """Up to :data:`MEMORY_PROBE_QUERIES` distinct (query) rows among the first of ``queries`` (B, 2)."""
    return torch.unique(queries[:_PROBE_SCAN], dim=0)[:MEMORY_PROBE_QUERIES]


def _scoring_call(scorer: CandidateScorer, queries: torch.Tensor, width: int | None) -> Callable[[], Any]:
    """One call of the model's scoring method for ``scorer``'s side, as the scorer makes it: whole rows (``width``
    None), else the first ``width`` candidates' ids (keyword or positional, kgeval._engine.scoring.SlicedScorer)."""
    method = getattr(scorer.model, SCORE_METHOD[scorer.target])
    if width is None:
        return lambda: method(queries)
    if scorer.candidate_ids is not None:
        ids = scorer.candidate_ids[:width]
    else:
        ids = torch.arange(width, device=queries.device)
    if getattr(scorer, "passing", "keyword") == "positional":
        return lambda: method(queries, ids)
    return lambda: method(queries, **{CANDIDATE_KEYWORD[scorer.target]: ids})


def _up(numerator: int, denominator: int) -> int:
    """numerator / denominator rounded up, at least 0."""
    return max(0, -(-numerator // denominator))


def measure_memory_per_query(
    scorer: CandidateScorer,
    queries: torch.Tensor,
    meter: Callable[[Callable[[], Any], torch.device], int] = peak_call_bytes,
    width: int | None = None,
) -> MemoryPerQuery:
    """The memory of one call of the model's scoring method for ``scorer``'s side asked for whole rows (``width``
    None; else for its first ``width`` candidates' ids, whose cost per query then holds them), measured on
    the evaluation's own ``queries`` (B, 2): three calls, their scores discarded -- one query (what a first call
    builds once, a graph moved to the device or a model's cache, is not a call's cost), one query again, and
    :data:`MEMORY_PROBE_QUERIES` distinct queries -- each measured by ``meter`` (kgeval._engine.memory_meter; on
    CPU it sees the tensors operations return, not the scratch an operation allocates and frees inside its own
    kernel, nor memory outside torch). per_query = (peak of k queries - peak of one) / (k - 1), rounded up; fixed =
    the peak of one less that. With one distinct query, or where the call of k runs out of memory, the peak of one
    is counted per query (fixed 0; ``complete`` False with one query: a later side with more measures again)."""
    device = queries.device
    distinct = _distinct_queries(queries)
    one = distinct[:1]
    meter(_scoring_call(scorer, one, width), device)  # the first call's one-off allocations
    single = meter(_scoring_call(scorer, one, width), device)
    if len(distinct) < 2:
        return MemoryPerQuery(fixed=0, per_query=max(1, single), complete=False)
    several = _several(meter, _scoring_call(scorer, distinct, width), device)
    if several is None:  # out of memory: every byte of one query counted per query
        return MemoryPerQuery(fixed=0, per_query=max(1, single))
    per_query = max(1, _up(several - single, len(distinct) - 1))
    return MemoryPerQuery(fixed=max(0, single - per_query), per_query=per_query)


def measure_memory_per_pair(
    scorer: CandidateScorer,
    queries: torch.Tensor,
    width: int,
    meter: Callable[[Callable[[], Any], torch.device], int] = peak_call_bytes,
) -> MemoryPerQuery:
    """The memory of one call of the model's scoring method for ``scorer``'s side asked for candidate ids (a
    "sliced" scorer), measured on the evaluation's own ``queries`` (B, 2) and the side's first candidates: a first
    call of one query against ``width`` candidates (its one-off allocations are not a call's cost), then four calls
    on the grid of q in (1, Q) queries (Q = :data:`MEMORY_PROBE_QUERIES` distinct ones) by k in (``width``,
    2 ``width``) candidates, their scores discarded, each measured by ``meter`` -- peak(q, k) = fixed + q *
    per_query + k * per_candidate + q * k * per_pair, solved exactly on the four corners (each cost rounded up,
    at least 0). A model paying per pair (a convolution for each (query, candidate)) shows it in per_pair, a model
    gathering the candidates' vectors once per call in per_candidate.

    What the meter cannot see is not counted: on CPU the scratch an operation allocates and frees inside its own
    kernel (a convolution's or a sort's workspace) and memory outside torch (kgeval._engine.memory_meter), so the
    sizes leave the budget's pairs share beside the call. A peak is not exactly additive (an allocator's rounding,
    a model's size-dependent algorithm): the measure is a guide, an out-of-memory error is still halved and retried.

    ``width`` is at least 1 and 2 ``width`` at most the side's candidates; with fewer than two distinct queries the
    several-query corners are left out: one query's cost beside its candidates counted per query, its
    per-candidate and per-pair costs together per pair (exact for one query, more than enough for several;
    ``complete`` False). So where a call of several queries runs out of memory (``complete`` True: not measured
    again)."""
    device = queries.device
    distinct = _distinct_queries(queries)
    one = distinct[:1]
    meter(_scoring_call(scorer, one, width), device)  # the first call's one-off allocations
    narrow = meter(_scoring_call(scorer, one, width), device)
    wide = meter(_scoring_call(scorer, one, 2 * width), device)
    per_pair = _up(wide - narrow, width)  # with one query: its per-candidate and per-pair costs together
    alone = MemoryPerQuery(fixed=0, per_query=max(0, narrow - per_pair * width), per_pair=per_pair, complete=False)
    if len(distinct) < 2:
        return alone
    rows = len(distinct) - 1
    several_narrow = _several(meter, _scoring_call(scorer, distinct, width), device)
    several_wide = None if several_narrow is None else _several(meter, _scoring_call(scorer, distinct, 2 * width),
                                                                   device)  # fmt: skip
    if several_narrow is None or several_wide is None:  # out of memory: one query's costs, each counted per query
        return dataclasses.replace(alone, complete=True)
    per_pair = _up(several_wide - several_narrow - (wide - narrow), rows * width)
    per_candidate = _up(wide - narrow - per_pair * width, width)
    per_query = _up(several_narrow - narrow - per_pair * width * rows, rows)
    fixed = max(0, narrow - per_query - (per_candidate + per_pair) * width)
    return MemoryPerQuery(fixed, per_query, per_candidate, per_pair)


def _several(meter: Callable[[Callable[[], Any], torch.device], int], call: Callable[[], Any],
             device: torch.device) -> int | None:  # fmt: skip
    """``meter(call, device)``, None where the call of several queries runs out of memory (a model whose batches
    the loop's retries will halve; its one-query costs then stand for every query)."""
    try:
        return meter(call, device)
    except torch.OutOfMemoryError:
        _release(device)
        return None


def _probe_key(
    scorer: CandidateScorer, device: torch.device, owner: Any = None, probe: Hashable = None
) -> tuple[Any, Hashable]:
    """(the model the measure belongs to, the key of the measure among its own). ``owner``: the model as the caller
    handed it over (an evaluation's view of it may be made anew for each evaluation); None: the scorer's view, or
    the model an inductive view binds to its mode. ``probe``: which probe measured it (:func:`_probe`)."""
    view = scorer.model
    if owner is None:
        # an inductive view is made anew for each evaluation: the measure belongs to the model it binds to its mode
        # (a graph-conditioned model's binding to its graphs: a model shared between graphs is measured on each)
        owner = view.model if isinstance(view, ModeBound) else view
    kind = type(view).__qualname__
    return owner, (kind, probe, getattr(view, "mode", None), scorer.target, str(device), scorer.num_entities)


def _memory(
    scorer: CandidateScorer,
    queries: torch.Tensor,
    probes: MemoryProbes,
    owner: Any,
    key: Hashable,
    probe: tuple[str, int | None],
) -> MemoryPerQuery | None:
    """The model's memory per call for this side (``owner`` and ``key``: :func:`_probe_key`; ``probe``: which probe
    measures it, :func:`_probe`): measured once, then remembered in ``probes`` (a
    measure from one query only until a side with more queries measures it again). None where a call of one query
    raises (batch norm in training mode refuses a batch of one; an out-of-memory error): nothing is remembered, and
    the evaluation's own calls say what fails, where they do (as the stability probe leaves them,
    kgeval._engine.form_check.probe_instability)."""
    try:
        known = probes.measured.setdefault(owner, {})
    except TypeError:  # a model that takes no weak reference: measured at every evaluation
        known = {}
    if key not in known or (not known[key].complete and len(_distinct_queries(queries)) > 1):
        try:
            kind, width = probe
            if kind == "pairs" and width is not None:
                known[key] = measure_memory_per_pair(scorer, queries, width)
            else:
                known[key] = measure_memory_per_query(scorer, queries, width=width)
        except Exception:  # whatever the model raises, its evaluation's own calls raise where they do
            _release(queries.device)
            return None
    return known[key]


def _queries_within(room: int, memory: MemoryPerQuery, per_query: int, per_pair: int, width: int) -> int:
    """The queries a call of ``width`` candidates may score in ``room`` bytes (negative: not one)."""
    return (room - memory.fixed - memory.per_candidate * width) // (per_query + per_pair * width)


def sizes_for(
    scorer: CandidateScorer,
    queries: torch.Tensor,
    batch_size: int | None,
    slice_size: int | None,
    memory_budget: int | None,
    probes: MemoryProbes | None = None,
    owner: Any = None,
) -> Sizes:
    """The sizes of one side's ``queries`` (B, 2; one per task): without a ``batch_size``, a model scored through its
    own methods gets them from its measured memory (:func:`measured_sizes`, the measure remembered in ``probes`` --
    None: a new one, measured here -- under ``owner``, the caller's model); every other scorer, and a given
    ``batch_size``, from the scores alone (:func:`choose_sizes`)."""
    if batch_size is None and measures_memory(scorer):
        return measured_sizes(scorer, queries, slice_size, memory_budget, probes or MemoryProbes(), owner)
    return choose_sizes(scorer, queries.shape[0], queries.device, batch_size, slice_size, memory_budget)


def measured_sizes(
    scorer: CandidateScorer,
    queries: torch.Tensor,
    requested_slice: int | None,
    memory_budget: int | None,
    probes: MemoryProbes,
    owner: Any = None,
) -> Sizes:
    """The sizes of one side of a model scored through its own methods (:func:`measures_memory`), from its measured
    memory: the usual sizes (:func:`choose_sizes` from the scores alone, with ``requested_slice`` and the caller's
    ``memory_budget``: on CPU cache-sized, where larger batches of a cheap model run no faster), lowered -- never
    raised -- until a model call fits the room the budget leaves it,

        room = budget * (1 - PAIRS_SHARE)

    (the budget, :func:`measured_memory_budget`, less the share of the batch's filtered pairs), each call costing
    what the probe measured (:class:`MemoryPerQuery`, remembered in ``probes`` under ``owner``, the caller's model
    (None: the scorer's view), :func:`_probe_key`):

    - whole rows (a model without candidate ids, or a graph-conditioned one declaring ``kgeval_measure_memory``,
      :func:`measure_memory_per_query`): calls of whole rows (a given ``requested_slice`` wins) in batches of
      ``max(1, (room - fixed) // max(per_query, DEVICE_BYTES_PER_SCORE * num_entities))`` queries at most;
    - candidate slices (:func:`measure_memory_per_pair`): the usual slice S, and batches of at most
      ``(room - fixed - per_candidate * S) // (per_query + max(per_pair, DEVICE_BYTES_PER_SCORE) * S)`` queries;
      where not one query fits, slices of at most ``(room - fixed - per_query) // (per_candidate + per_pair)``
      candidates (never more than the usual, at least 1; a given ``requested_slice`` wins) hold one query each.

    A model whose calls cost about its scores keeps the usual sizes (the room holds them many times over). Where one
    query (against one candidate for slices, against the given slice) exceeds the room, a
    :class:`kgeval.exceptions.MemoryBudgetWarning` says so and the batches hold one query each, beyond the budget
    (slices: as many candidates as the room holds of their own costs, ``room // (per_candidate + per_pair)``, at
    least 1 -- a call's fixed or per-query cost beyond the room is not undone by slices of one candidate).
    ``queries`` (B, 2) holds
    one query per task. Reported in ``probes.batches`` and logged at INFO (logger ``kgeval.sizes``); out-of-memory
    errors are still halved and retried (the sizes are automatic)."""
    device = queries.device
    num_tasks = queries.shape[0]
    budget = measured_memory_budget(device, memory_budget)
    room = int(budget * (1 - PAIRS_SHARE))
    whole = _whole_rows(scorer)
    usual = choose_sizes(scorer, num_tasks, device, None, requested_slice or (scorer.num_candidates if whole else None),
                         memory_budget)  # fmt: skip
    width = usual.slice_size
    probe = _probe(whole, width)
    owner, key = _probe_key(scorer, device, owner, probe)
    memory = _memory(scorer, queries, probes, owner, key, probe)
    if memory is None:  # not measured: the usual sizes
        return usual
    if probe[0] == "rows":  # whole rows, or a slice of one candidate: every call's cost per query
        floor = scorer.num_entities if whole else width
        per_query, per_pair = max(memory.per_query, DEVICE_BYTES_PER_SCORE * floor), 0
    else:
        per_query, per_pair = memory.per_query, max(memory.per_pair, DEVICE_BYTES_PER_SCORE)
    fits = _queries_within(room, memory, per_query, per_pair, width)
    if fits < 1 and per_pair and requested_slice is None:  # one query against fewer candidates
        pair_costs = memory.per_candidate + per_pair
        width = max(1, min(width, (room - memory.fixed - per_query) // pair_costs))
        fits = _queries_within(room, memory, per_query, per_pair, width)
        if fits < 1:  # beyond the budget whatever the slice: the candidates' part within it at least
            width = max(1, min(usual.slice_size, room // pair_costs))
    view = scorer.model
    name = _model_name(view)
    mode = getattr(view, "mode", None)
    if fits < 1:
        _warn_beyond_budget(scorer, name, memory, (per_query, per_pair, width), (budget, room, device), whole)
    batch = max(1, min(fits, usual.batch_size))
    sizes = usual
    if (batch, width) != (usual.batch_size, usual.slice_size):
        sizes = choose_sizes(scorer, num_tasks, device, batch, width, memory_budget)
    # the pairs' share of the budget the calls were sized beside (on CPU without a budget: the measured one's)
    sizes = dataclasses.replace(sizes, max_pairs=min(sizes.max_pairs, _max_pairs(device, budget)), automatic=True)
    probes.batches[mode, scorer.target, str(device)] = MeasuredBatch(
        name, mode, scorer.target, str(device), memory.fixed, per_query, budget, max(0, fits), sizes.batch_size,
        sizes.slice_size, memory.per_candidate, per_pair)  # fmt: skip
    if whole:
        logger.info("kgeval: %s (%s side) uses %s per call and %s per query on %s: batches of %d queries "
                    "within memory_budget=%d", name, _side(scorer.target, mode), _mib(memory.fixed), _mib(per_query),
                    device, sizes.batch_size, budget)  # fmt: skip
    else:
        logger.info("kgeval: %s (%s side) uses %s per call, %s per query, %s per candidate and %s per query "
                    "and candidate on %s: batches of %d queries by slices of %d candidates within memory_budget=%d",
                    name, _side(scorer.target, mode), _mib(memory.fixed), _mib(per_query), _mib(memory.per_candidate),
                    _mib(per_pair), device, sizes.batch_size, sizes.slice_size, budget)  # fmt: skip
    return sizes


def _side(target: str, mode: str | None) -> str:
    """``target``, with the inductive mode where there is one: "tail" or "testing mode, tail"."""
    return target if mode is None else f"{mode} mode, {target}"


def _probe(whole: bool, width: int) -> tuple[str, int | None]:
    """Which probe measures a side whose calls score whole rows (``whole``) or slices of ``width`` candidates:
    ("rows", None) -- :func:`measure_memory_per_query` of whole rows --, ("pairs", k) --
    :func:`measure_memory_per_pair` of k and 2k candidates, k at most :data:`MEMORY_PROBE_CANDIDATES` and 2k at most
    the slice -- or, for slices of one candidate, ("rows", 1): calls of one candidate's id."""
    if whole:
        return "rows", None
    if width < 2:
        return "rows", width
    return "pairs", min(MEMORY_PROBE_CANDIDATES, width // 2)


def _model_name(view: Any) -> str:
    """How messages name the model: a graph-conditioned model's class, not its binding's (nor an inductive view's);
    an adapter's view: the user's model (kgeval._engine.form_check.model_name)."""
    if isinstance(view, ModeBound) or getattr(view, "kgeval_measure_memory", False) is True:
        inner = view.model if isinstance(view, ModeBound) else view
        return type(getattr(inner, "model", inner)).__name__
    return model_name(view)


def _warn_beyond_budget(
    scorer: CandidateScorer,
    name: str,
    memory: MemoryPerQuery,
    costs: tuple[int, int, int],
    limits: tuple[int, int, torch.device],
    whole: bool,
) -> None:
    """The :class:`MemoryBudgetWarning` of a side whose one query (against ``costs``' width of candidates) needs
    more than the room the budget leaves a model call; ``costs``: (per query, per pair, width) as sized;
    ``limits``: (the budget, its room for a call, the device measured on)."""
    per_query, per_pair, width = costs
    budget, room, device = limits
    where = f", measured on {device}"
    if whole:
        need = memory.fixed + per_query
        warn_caller(f"kgeval: one {scorer.target} query of {name} needs {_mib(need)} ({_mib(memory.fixed)} per call "
                    f"and {_mib(per_query)} per query{where}), more than the memory budget's {_mib(room)} for a "
                    f"model call (memory_budget={budget}): it is scored one query at a time. Pass a larger "
                    "memory_budget, or batch_size=1 to choose this yourself", MemoryBudgetWarning)  # fmt: skip
        return
    need = memory.fixed + per_query + (memory.per_candidate + per_pair) * width
    pairs = f", {_mib(memory.per_candidate)} per candidate and {_mib(per_pair)} per query and candidate"
    warn_caller(f"kgeval: one {scorer.target} query of {name} against {width} candidate(s) needs {_mib(need)} "
                f"({_mib(memory.fixed)} per call, {_mib(per_query)} per query{pairs if per_pair else ''}{where}), "
                f"more than the memory budget's {_mib(room)} for a model call (memory_budget={budget}): it is "
                f"scored one query at a time, {width} candidate(s) a call. Pass a larger memory_budget, or "
                "batch_size=1 and a slice_size to choose this yourself", MemoryBudgetWarning)  # fmt: skip


def _mib(size: int) -> str:
    return f"{size / 2**20:.3g} MiB"
