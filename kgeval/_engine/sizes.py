"""Sizes of one side's loop -- candidates per slice, tasks per batch, rows per tile -- and out-of-memory retries.

With ``batch_size=None`` the sizes come from a memory budget in bytes: the evaluator's ``memory_budget`` when set,
else on CUDA the smaller of 2 GiB and a quarter of the free memory (:func:`default_memory_budget`), and on CPU the
cache-sized constants below (a budget smaller than them shrinks them). A budget is shared between a batch's scores
and the kernel's temporaries (:data:`SCORES_SHARE`), its filtered pairs (:data:`PAIRS_SHARE`) and the answer
slices' scores a mixed-slice batch keeps (:data:`KEEP_SHARE`) -- :func:`budget_shares`. An out-of-memory error
halves the failing batch and retries it, and the size that worked is remembered by the evaluator for later calls
with the same shapes.

A graph-conditioned model (``kgeval_measure_memory``, set by ``on_graphs``) needs far more memory per query than
its row of scores -- message passing over the whole graph for each query -- so its batches come from its measured
memory instead (:func:`measured_sizes`): a probe of a few queries (kgeval._engine.memory_meter) gives its memory
per call and per query, and the batch is what the budget holds (on CPU too, where the budget is then a fraction of
the available memory, :func:`measured_memory_budget`).
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

from kgeval._engine.memory_meter import peak_call_bytes
from kgeval._engine.scoring import SCORE_METHOD, CandidateScorer
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


# -- batch sizes measured from a model's memory per query -----------------------------------------------------------
#: the queries of the probe's larger call (its first calls score one): the memory of 1 and of this many queries
#: separate a call's fixed cost from its cost per query
MEMORY_PROBE_QUERIES = 4

logger = logging.getLogger("kgeval.sizes")


@dataclass(frozen=True)
class MemoryPerQuery:
    """What one call of a model's scoring method allocates (:func:`measure_memory_per_query`), in bytes."""

    fixed: int  #: whatever its number of queries (the peak of one query less its per-query cost; at least 0)
    per_query: int  #: per query scored (its scores included): (peak of k queries - peak of 1) / (k - 1), rounded up


@dataclass(frozen=True)
class MeasuredBatch:
    """A batch size derived from a model's measured memory (:func:`measured_sizes`), as the evaluator reports it
    (``RankBasedEvaluator.measured_batches``)."""

    model: str  #: the model's class
    mode: str | None  #: the inductive mode (the graph) scored
    target: str  #: the side ranked
    device: str
    fixed_bytes: int  #: a call's memory whatever its queries
    per_query_bytes: int  #: a call's memory per query (at least DEVICE_BYTES_PER_SCORE per candidate)
    memory_budget: int  #: the budget in bytes (given, or the default of :func:`measured_memory_budget`)
    #: the queries a call may score within the budget: its share less fixed, over per_query (0: not even one)
    queries_within_budget: int
    batch_size: int  #: the tasks per batch chosen: the usual batch (choose_sizes), lowered to the above, at least 1

    @property
    def within_budget(self) -> bool:
        """Whether one query fits the budget (else the batches hold one query each, beyond it)."""
        return self.queries_within_budget >= 1


@dataclass
class MemoryProbes:
    """The memory measured per (model, mode, side, device, candidates), kept by the evaluator so that each is
    probed once (kgeval._engine.loop.EngineState), and the batch sizes derived from it in the latest evaluations
    by (mode, side, device)."""

    measured: weakref.WeakKeyDictionary[Any, dict[Hashable, MemoryPerQuery]] = dataclasses.field(
        default_factory=weakref.WeakKeyDictionary)  # fmt: skip
    batches: dict[tuple[str | None, str, str], MeasuredBatch] = dataclasses.field(default_factory=dict)


def measures_memory(scorer: CandidateScorer) -> bool:
    """Whether ``scorer``'s batches are sized from the model's measured memory: its model's own scoring methods
    (whole rows or slices, not a GEMM form nor whole triples) on a model that declares
    ``kgeval_measure_memory = True`` -- a graph-conditioned model bound by ``on_graphs``, whose memory per query
    (message passing over the whole graph) is far more than its row of scores."""
    return scorer.sizing in ("full_rows", "sliced") and getattr(scorer.model, "kgeval_measure_memory", False) is True


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


def measure_memory_per_query(
    scorer: CandidateScorer,
    queries: torch.Tensor,
    meter: Callable[[Callable[[], Any], torch.device], int] = peak_call_bytes,
) -> MemoryPerQuery:
    """The memory of one call of the model's scoring method for ``scorer``'s side, measured on the evaluation's own
    ``queries`` (B, 2): three calls, their scores discarded -- one query (what a first call builds once, a graph
    moved to the device or a model's cache, is not a call's cost), one query again, and
    :data:`MEMORY_PROBE_QUERIES` distinct queries -- each measured by ``meter`` (kgeval._engine.memory_meter)."""
    method = getattr(scorer.model, SCORE_METHOD[scorer.target])
    device = queries.device
    distinct = torch.unique(queries[: 16 * MEMORY_PROBE_QUERIES], dim=0)[:MEMORY_PROBE_QUERIES]
    one = distinct[:1]
    meter(lambda: method(one), device)  # the first call's one-off allocations
    single = meter(lambda: method(one), device)
    if len(distinct) < 2:
        return MemoryPerQuery(fixed=0, per_query=max(1, single))
    several = meter(lambda: method(distinct), device)
    per_query = max(1, -(-max(0, several - single) // (len(distinct) - 1)))
    return MemoryPerQuery(fixed=max(0, single - per_query), per_query=per_query)


def _probe_key(scorer: CandidateScorer, device: torch.device) -> tuple[Any, Hashable]:
    """(the model the measure belongs to, the key of the measure among its own)."""
    view = scorer.model
    # an inductive view is made anew for each evaluation: the measure belongs to the model it binds to its mode (a
    # graph-conditioned model's binding to its graphs: a model shared between graphs is measured on each)
    owner = view.model if isinstance(view, ModeBound) else view
    return owner, (getattr(view, "mode", None), scorer.target, str(device), scorer.num_entities)


def _memory(
    scorer: CandidateScorer, queries: torch.Tensor, probes: MemoryProbes, owner: Any, key: Hashable
) -> MemoryPerQuery:
    """The model's memory per query for this side (``owner`` and ``key``: :func:`_probe_key`): measured once, then
    remembered in ``probes``."""
    try:
        known = probes.measured.setdefault(owner, {})
    except TypeError:  # a model that takes no weak reference: measured at every evaluation
        known = {}
    if key not in known:
        known[key] = measure_memory_per_query(scorer, queries)
    return known[key]


def measured_sizes(
    scorer: CandidateScorer,
    queries: torch.Tensor,
    requested_slice: int | None,
    memory_budget: int | None,
    probes: MemoryProbes,
) -> Sizes:
    """The sizes of one side of a model sized by its measured memory (:func:`measures_memory`): whole rows per call
    (the model computes every candidate's score anyway; a given ``requested_slice`` wins) in batches of the usual
    size for such rows (:func:`choose_sizes`, from the scores alone: on CPU cache-sized, where larger batches of a
    cheap model run no faster) lowered to

        max(1, (budget * (1 - PAIRS_SHARE) - fixed) // max(per_query, DEVICE_BYTES_PER_SCORE * num_entities))

    queries: the budget (:func:`measured_memory_budget`) less the share of the batch's filtered pairs holds one model
    call; each query costs what the probe measured (:func:`measure_memory_per_query`, remembered in ``probes``), and
    at least its scores with the counting kernel's temporaries. ``queries`` (B, 2) holds one query per task. A
    budget smaller than one query gives batches of one query with a :class:`kgeval.exceptions.MemoryBudgetWarning`.
    Out-of-memory errors are still halved and retried."""
    device = queries.device
    budget = measured_memory_budget(device, memory_budget)
    owner, key = _probe_key(scorer, device)
    memory = _memory(scorer, queries, probes, owner, key)
    per_query = max(memory.per_query, DEVICE_BYTES_PER_SCORE * scorer.num_entities)
    fits = (int(budget * (1 - PAIRS_SHARE)) - memory.fixed) // per_query
    view = scorer.model
    name = type(getattr(owner, "model", owner)).__name__  # a graph-conditioned model's class, not its binding's
    mode = getattr(view, "mode", None)
    if fits < 1:
        warn_caller(f"kgeval: one {scorer.target} query of {name} needs {_mib(memory.fixed + per_query)} "
                    f"({_mib(memory.fixed)} per call and {_mib(per_query)} per query, measured on {device}), more "
                    f"than the memory budget's {_mib(int(budget * (1 - PAIRS_SHARE)))} for a model call "
                    f"(memory_budget={budget}): it is scored one query at a time. Pass a larger memory_budget, or "
                    "batch_size=1 to choose this yourself", MemoryBudgetWarning)  # fmt: skip
    width = requested_slice or scorer.num_candidates
    usual = choose_sizes(scorer, queries.shape[0], device, None, width, memory_budget).batch_size
    batch = max(1, min(fits, usual))
    sizes = choose_sizes(scorer, queries.shape[0], device, batch, width, budget)
    measured = MeasuredBatch(name, mode, scorer.target, str(device), memory.fixed, per_query, budget, max(0, fits),
                             batch)  # fmt: skip
    probes.batches[mode, scorer.target, str(device)] = measured
    logger.info("kgeval: %s (%s, %s side) uses %s per call and %s per query on %s: batches of %d queries within "
                "memory_budget=%d", name, mode, scorer.target, _mib(memory.fixed), _mib(per_query), device, batch,
                budget)  # fmt: skip
    return dataclasses.replace(sizes, automatic=True)


def _mib(size: int) -> str:
    return f"{size / 2**20:.3g} MiB"
