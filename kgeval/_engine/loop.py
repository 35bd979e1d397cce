"""The loop of one ranking side: plan the batches, score and count each one, put the counts in task order.

It strings the engine's stages together (plan, sizes, pairs, counting) and moves nothing to the host inside the
loop: the plan is read once before it, and the counts stay on the device until the evaluator needs them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import torch

from kgeval._engine import sizes as batching
from kgeval._engine.counting import BatchWork, SideCounts, count_batch, runs_fused, slice_bounds
from kgeval._engine.distributed import checksum
from kgeval._engine.filter_index import FilterIndexCache, SideIndex
from kgeval._engine.kernels import COMPARE, SIGN, Kernel
from kgeval._engine.kernels.choice import KernelChooser
from kgeval._engine.pairs import BatchPairs, expand_pairs, pair_tiles, query_groups
from kgeval._engine.plan import PlannedBatch, SidePlan
from kgeval._engine.resume import SideProgress
from kgeval._engine.scoring import CandidateScorer, Workspace
from kgeval._engine.threads import LoadSample

#: a query shared by several tasks whose known answers add up to this many pairs is filtered as one block
GROUP_MIN_PAIRS = 2048


#: with fewer tasks per candidate slice, batches mix slices (one extra pass for the true scores) instead of
#: grouping tasks by the slice of their answer: tiny groups would read every candidate for a handful of tasks
MIN_TASKS_PER_SLICE = 64


@dataclass(frozen=True)
class LoopSettings:
    """The loop's thresholds (tests force every code path through them)."""

    layout: str | None = None  #: pair layout; None: "sorted" on CPU, "masked" elsewhere (kgeval._engine.pairs)
    #: run the path an accelerator takes on any device (:func:`as_on_a_device`): what a GPU's evaluation costs the
    #: host can then be counted on CPU tensors (kgeval._engine.dispatch_count)
    device_path: bool = False
    group_min_pairs: int = GROUP_MIN_PAIRS
    min_tasks_per_slice: int = MIN_TASKS_PER_SLICE


@dataclass
class EngineState:
    """What one evaluator carries from call to call: its kernel chooser (with the ski-rental tally), the batch
    sizes that worked after an out-of-memory retry, the filter indices it built (cached by content), the loop's
    settings, its last sample of the machine's load (kgeval._engine.threads), and the memory per query it measured
    of graph-conditioned models (kgeval._engine.sizes.MemoryProbes)."""

    kernels: KernelChooser = field(default_factory=KernelChooser)
    settings: LoopSettings = field(default_factory=LoopSettings)
    batch_sizes: dict[Hashable, int] = field(default_factory=dict)
    filter_indices: FilterIndexCache = field(default_factory=FilterIndexCache)
    load_sample: LoadSample = field(default_factory=LoadSample)
    #: the memory measured of models scored through their own methods, and the sizes derived (sizes.measured_sizes)
    memory_probes: batching.MemoryProbes = field(default_factory=batching.MemoryProbes)


def default_layout(device: torch.device) -> str:
    """The pair layout for a device: "sorted" on CPU, "masked" elsewhere (kgeval._engine.pairs)."""
    return "sorted" if device.type == "cpu" else "masked"


@dataclass(frozen=True)
class SideTasks:
    """The ranking tasks of one side, in the evaluator's order."""

    queries: torch.Tensor  #: LongTensor (n, 2): each task's query, as passed to score_t / score_h
    true_positions: torch.Tensor  #: LongTensor (n,): candidate position of each task's true answer
    side_index: SideIndex | None = None  #: the filter index of this side; None: unfiltered
    #: LongTensor (num_entities,): candidate position of each entity (-1: not a candidate); None: every entity
    position_of: torch.Tensor | None = None
    #: FloatTensor (n,): given when the true answers are not among these candidates (a shard of them: every
    #: ``true_positions`` is then -1, kgeval._engine.sharding); the tasks are counted against every candidate here
    true_scores: torch.Tensor | None = None
    #: a second, finer filter counted from the same pass (needs ``side_index``): every task's run in it is a
    #: subset of its run in ``side_index`` that holds the true answer too (the time-aware filter inside the
    #: static one); its counts come back as ``SideCounts.fine``
    fine_index: SideIndex | None = None


@dataclass(frozen=True)
class Observer:
    """What a side's loop reports to and is asked for besides its tasks: ``progress`` (tqdm-like, or None) receives
    ``update(number of tasks)`` after each batch; ``raw_too``: count raw ranks besides the filtered ones; ``resume``
    (kgeval._engine.resume) holds the batches an earlier call did, which are not ranked again, and records every
    batch done here."""

    progress: object | None = None
    raw_too: bool = False
    resume: SideProgress | None = None

    def on(self, resume: SideProgress | None) -> Observer:
        """The same observer recording into ``resume``."""
        return Observer(self.progress, self.raw_too, resume)


def rank_side(
    scorer: CandidateScorer,
    tasks: SideTasks,
    sizes: batching.Sizes,
    state: EngineState,
    observer: Observer | None = None,
) -> SideCounts:
    """The counts of every task of one side, in the order of ``tasks``: filtered (raw without a side index), and
    raw as well when ``observer.raw_too``. ``state`` is the evaluator's (kernel chooser, remembered batch sizes,
    settings); ``observer`` the progress bar and the resumable progress (:class:`Observer`)."""
    observer = observer if observer is not None else Observer()
    progress, raw_too, resume = observer.progress, observer.raw_too, observer.resume
    queries, true_positions = tasks.queries, tasks.true_positions
    side_index, position_of = tasks.side_index, tasks.position_of
    device = queries.device
    scorer.use_device(device)
    starts = lengths = fine = None
    if side_index is not None:
        starts, lengths = side_index.lookup(queries[:, 0], queries[:, 1])
    if tasks.fine_index is not None:
        if side_index is None:
            raise ValueError("a finer filter is counted within a filter: the tasks need a side index")
        fine = (tasks.fine_index, *tasks.fine_index.lookup(queries[:, 0], queries[:, 1]))
    kernel = state.kernels.choose(device, queries.shape[0] * scorer.num_candidates)
    layout = state.settings.layout or default_layout(device)
    if state.settings.device_path:
        kernel, sizes, device_layout = as_on_a_device(kernel, sizes, scorer)
        layout = state.settings.layout or device_layout
    elif kernel.reads_rows_in_place or scorer.sizing == "gemm":
        sizes = batching.with_tall_tiles(sizes, device)
    if runs_fused(kernel, scorer):
        layout = "masked"  # a fused kernel scores the filtered pairs as a list: no query groups, no tile segments
    # query groups share one run of pairs per query; a finer filter marks pairs one by one
    group_min_pairs = state.settings.group_min_pairs if layout == "sorted" and fine is None else None
    bounds = slice_bounds(scorer.num_candidates, sizes.slice_size)
    by_true_slice = len(bounds) == 1 or queries.shape[0] >= len(bounds) * state.settings.min_tasks_per_slice
    given = tasks.true_scores
    if given is not None:
        by_true_slice = True  # every answer at position -1: one "slice group", no first pass
    if not by_true_slice and scorer.sizing != "gemm":  # the model's calls: batches small enough to keep their
        sizes = batching.for_mixed_slices(sizes, device, scorer.num_candidates)  # answer slices' scores for counting
    plan = SidePlan(queries, true_positions, sizes.slice_size, lengths, starts, group_min_pairs, by_true_slice,
                    scorer.query_order)  # fmt: skip
    workspace = Workspace()
    # scores a mixed-slice batch may keep between its passes
    scorer.keep_budget = batching.keep_budget(device, sizes.memory_budget)
    # a kernel that reads repeated queries' score rows in place gets batches and tiles of distinct queries, so
    # every model call and GEMM has its full size however many tasks share a query
    by_queries = kernel.reads_rows_in_place

    done = resume.start(checksum(plan.order), device) if resume is not None else 0
    if progress is not None and done:
        progress.update(done)  # type: ignore[attr-defined]

    def run(begin: int, end: int) -> SideCounts:
        batch = plan.batch(begin, end, sizes.tile_rows, by_queries)
        batch_true = true_positions[batch.tasks]
        tiles = num_filtered = None
        if side_index is not None:
            pairs = _pairs(side_index, batch, starts, batch_true, position_of, fine)  # type: ignore[arg-type]
            groups = query_groups(side_index, batch.groups, position_of, scorer.num_candidates)
            row_starts: Sequence[int] = [block.row_start for block in batch.blocks] + [end - begin]
            offsets: Sequence[int] = batch.pair_offsets
            if given is not None and layout == "sorted":  # answers elsewhere: drop the pairs at position -1 (the
                pairs, offsets = pairs.candidates_only(row_starts)  # masked layout skips them, never synchronising)
            tiles = pair_tiles(pairs, row_starts, offsets, bounds, layout, groups)
            num_filtered = pairs.num_filtered
            if groups is not None:
                num_filtered[groups.rows] = groups.num_filtered
        true_slice = None if given is not None else batch.true_slice
        truth = given[batch.tasks] if given is not None else None
        work = BatchWork(batch.queries, batch_true, true_slice, bounds, batch.blocks, tiles, num_filtered, truth)
        counts = count_batch(scorer, work, kernel, workspace, raw_too)
        if resume is not None:
            resume.record(end, counts)
        if progress is not None:
            progress.update(end - begin)  # type: ignore[attr-defined]
        return counts

    key = batching.shape_key(scorer, sizes, device)
    ranges = _from(plan.ranges(sizes.batch_size, sizes.max_pairs, by_queries), done)
    parts = batching.run_with_retry(ranges, run, key, sizes.automatic, device, state.batch_sizes)
    if resume is not None:
        parts = resume.parts  # the earlier calls' batches and this call's, in plan order
    restore = torch.empty_like(plan.order)
    restore[plan.order] = torch.arange(plan.num_tasks, device=device)
    return SideCounts.cat(parts, restore)


def as_on_a_device(
    kernel: Kernel, sizes: batching.Sizes, scorer: CandidateScorer
) -> tuple[Kernel, batching.Sizes, str]:
    """The choices of an accelerator, whatever the device: the eager kernel that never reads the host
    (:data:`kgeval._engine.kernels.COMPARE` for the CPU's "sign"), one tile per batch and slice and up to a
    quarter as many filtered pairs per batch (a device's budget holds a batch: the batch size then bounds the
    memory), the "masked" pair layout (unless the settings name one), and a scorer without
    its CPU-only choices (``CandidateScorer.as_device``). Returns (kernel, sizes, layout)."""
    scorer.as_device = True
    kernel = COMPARE if kernel is SIGN else kernel
    tile = sizes.batch_size * sizes.slice_size  # a device's pairs per batch: a quarter of its scores (sizes.py)
    sizes = dataclasses.replace(sizes, tile_rows=sizes.batch_size, max_pairs=max(sizes.max_pairs, tile // 4))
    return kernel, sizes, "masked"


def _from(ranges: Iterable[tuple[int, int]], start: int) -> Iterator[tuple[int, int]]:
    """The planned ranges from task ``start`` on (a range holding it begins there instead)."""
    for begin, end in ranges:
        if end > start:
            yield max(begin, start), end


def _pairs(
    side_index: SideIndex,
    batch: PlannedBatch,
    starts: torch.Tensor,
    true_positions: torch.Tensor,
    position_of: torch.Tensor | None,
    fine: tuple[SideIndex, torch.Tensor, torch.Tensor] | None = None,
) -> BatchPairs:
    """The filtered pairs of one batch, except its query groups (kgeval._engine.pairs.expand_pairs on its runs);
    ``fine``: the finer filter and every task's (start, length) in it, to mark its pairs."""
    lengths = batch.pair_counts
    assert lengths is not None  # a batch of a filtered side is planned with its pair counts
    fine_runs = None
    if fine is not None:
        fine_runs = (fine[0], fine[1][batch.tasks], fine[2][batch.tasks])
    return expand_pairs(side_index, starts[batch.tasks], lengths, batch.num_pairs, true_positions, position_of,
                        fine_runs)  # fmt: skip
