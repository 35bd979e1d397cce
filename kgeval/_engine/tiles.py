"""Every (query, candidate) score tile of a set of queries, handed to visitors (the engine's third front door,
:func:`visit_tiles`): for evaluations that need more of a row than a rank or a top k -- the all-pairs classification
protocol counts every pair's score against its positives. The tiles are scored by the engine's scorers (the fast
paths, verified as for ranking) within the memory budget, so no (queries x entities) matrix is ever held; each visitor
sees every tile once, all visitors the same tiles (one scorer, one set of sizes), so a second visitor sees the bits
the first saw.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kgeval._engine.counting import slice_bounds
from kgeval._engine.form_check import RANDOMNESS, FormChecks, caller_rng_restored
from kgeval._engine.precision import exact_arithmetic
from kgeval._engine.predictions import TopKOptions, _known_pairs
from kgeval._engine.scorer_choice import make_scorer
from kgeval._engine.sizes import Sizes, choose_sizes
from kgeval._inputs import ResolvedModel
from kgeval._modes import evaluation_mode
from kgeval.typing import EntityTarget

__all__ = ["ScoreTile", "TileJob", "visit_tiles"]


@dataclass(frozen=True)
class ScoreTile:
    """One tile: the scores of query rows [row_start, row_start + b) against candidates [column_start,
    column_start + s) of a job, and where the marked answers (one entry per index of the job) fall in it."""

    row_start: int
    column_start: int
    scores: torch.Tensor  #: FloatTensor (b, s), the model's scores (read only)
    marked: tuple[tuple[torch.Tensor, torch.Tensor], ...]  #: per job index: (rows, columns) LongTensors in the tile


Visitor = Callable[[EntityTarget, ScoreTile], None]


@dataclass(frozen=True)
class TileJob:
    """The queries (n, 2) of one side and the side indices (:class:`FilterIndex` sides of ``target``, or None) whose
    known answers each tile locates."""

    queries: torch.Tensor
    target: EntityTarget
    marks: tuple[Any, ...]


def visit_tiles(
    model: ResolvedModel, jobs: Sequence[TileJob], num_entities: int, options: TopKOptions, visitors: Sequence[Visitor]
) -> None:
    """Hand every score tile of every job (its queries against every entity) to each of ``visitors`` in turn: a
    full pass over all jobs per visitor, the same tiles in the same order, so a visitor may rely on what the
    previous ones saw of every job.

    A NaN score outside the marked answers is a ValueError naming the query. Runs in the model's eval mode, without
    autograd, in full float32 matmul precision; the caller's random generators are given back where the model
    draws."""
    checks = FormChecks(probe=options.check_fast_path)
    with caller_rng_restored(restore=False) as generators:
        try:
            with evaluation_mode(model.model), torch.inference_mode(), exact_arithmetic("exact"):
                plans = [_plan(model, job, num_entities, options, checks) for job in jobs if job.queries.shape[0]]
                for visit in visitors:
                    for job, scorer, sizes in plans:
                        _visit(job, scorer, sizes, visit)
        finally:
            generators.restore = checks.found(RANDOMNESS)


def _plan(
    model: ResolvedModel, job: TileJob, num_entities: int, options: TopKOptions, checks: FormChecks
) -> tuple[TileJob, Any, Sizes]:
    """The job with its scorer (fast path chosen and verified) and its sizes, fixed for every pass."""
    requested = options.sizes
    scorer = make_scorer(model, job.target, num_entities, None, fast_path=options.fast_path,
                         probe_queries=job.queries, checks=checks,
                         model_scores_only=True,  # the L2 GEMM ranks a transform of the scores
                         batch_size=requested.batch_size, slice_size=requested.slice_size)  # fmt: skip
    sizes = choose_sizes(scorer, job.queries.shape[0], job.queries.device, requested.batch_size,
                         requested.slice_size, requested.memory_budget)  # fmt: skip
    return job, scorer, sizes


def _visit(job: TileJob, scorer: Any, sizes: Sizes, visit: Visitor) -> None:
    """One pass over the job's tiles."""
    queries = job.queries
    bounds = slice_bounds(scorer.num_candidates, sizes.slice_size)
    for batch_start in range(0, queries.shape[0], sizes.batch_size):
        batch = queries[batch_start : batch_start + sizes.batch_size]
        known = [_known_pairs(batch, index, None) for index in job.marks]
        scorer.begin(batch)
        for start, stop in bounds:
            scorer.start_slice(start, stop)
            for row_start in range(0, batch.shape[0], sizes.tile_rows):
                row_stop = min(row_start + sizes.tile_rows, batch.shape[0])
                tile = ScoreTile(batch_start + row_start, start, scorer.query_tile(row_start, row_stop),
                                 tuple(_inside(rows, columns, row_start, row_stop, start, stop)
                                       for rows, columns in known))  # fmt: skip
                _check_nan(tile, queries)
                visit(job.target, tile)


def _inside(
    rows: torch.Tensor, columns: torch.Tensor, row_start: int, row_stop: int, start: int, stop: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The (row, column) pairs inside the tile, relative to its corner."""
    inside = (rows >= row_start) & (rows < row_stop) & (columns >= start) & (columns < stop)
    return rows[inside] - row_start, columns[inside] - start


def _check_nan(tile: ScoreTile, queries: torch.Tensor) -> None:
    """ValueError for a NaN score at an unmarked pair of the tile (``queries``: all of the pass's)."""
    if not bool(torch.isnan(tile.scores).any()):
        return
    nan = torch.isnan(tile.scores)
    for rows, columns in tile.marked:
        nan[rows, columns] = False
    if bool(nan.any()):
        row = int(nan.any(dim=1).nonzero()[0, 0])
        raise ValueError(f"the model produced NaN scores for query {queries[tile.row_start + row].tolist()}")
