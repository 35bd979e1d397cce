"""Every (query, candidate) score tile of a set of queries, handed to visitors (the engine's third front door,
:func:`visit_tiles`): for evaluations that need more of a row than a rank or a top k -- the all-pairs classification
protocol counts every pair's score against its positives. The tiles are scored by the engine's scorers (the fast
paths, verified as for ranking) within the memory budget, so no (queries x entities) matrix is ever held; each visitor
sees every tile once, all visitors the same tiles (one scorer, one set of sizes), so a second visitor sees the bits
the first saw.

A job may name each query row's true answer (``TileJob.answers``): then every tile comes with its rows' true scores,
read as the engine's counting reads them (kgeval._engine.counting: from the one slice when it holds every answer,
else from a first pass over just the tiles holding the answers), so a visitor ranks a row in the same pass that shows
it every candidate -- :meth:`ScoreTile.rank_counts` counts by the rank rule (docs/design.md) and
:meth:`ScoreTile.merged_top_k` keeps a running filtered top k (ties by ascending position, as ``top_k``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kgeval._engine.counting import (
    BatchWork,
    RowBlock,
    _read,
    _slice_order,
    _true_scores,
    comparison_codes,
    slice_bounds,
)
from kgeval._engine.form_check import RANDOMNESS, FormChecks, caller_rng_restored
from kgeval._engine.kernels import SIGN
from kgeval._engine.precision import exact_arithmetic
from kgeval._engine.predictions import TopKOptions, _first_k, _known_pairs
from kgeval._engine.scorer_choice import make_scorer
from kgeval._engine.scoring import Workspace
from kgeval._engine.sizes import Sizes, sizes_for
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
    #: FloatTensor (b,): each row's true score (a job with ``answers``), known before any tile of its batch; else None
    true_scores: torch.Tensor | None = None
    #: LongTensor (b,): each row's true-answer candidate position (a job with ``answers``; in this tile or not)
    answers: torch.Tensor | None = None

    def others_marked(self, index: int = 0) -> torch.Tensor:
        """BoolTensor (b, s): the marked pairs of job index ``index`` other than each row's true answer (the known
        answers a filtered rank and a filtered top k leave out)."""
        out = torch.zeros(self.scores.shape, dtype=torch.bool, device=self.scores.device)
        rows, columns = self.marked[index]
        if self.answers is not None:
            others = columns != self.answers[rows] - self.column_start
            rows, columns = rows[others], columns[others]
        out[rows, columns] = True
        return out

    def rank_counts(self, removed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(#above, #equal, #counted) per row (LongTensors (b,)): the tile's candidates, less ``removed`` (b, s) and
        the row's true answer, scoring above / equal to the row's true score, and how many there are -- this
        tile's share of the rank rule's counts (docs/design.md); only for a job with ``answers``."""
        if self.true_scores is None or self.answers is None:
            raise ValueError("rank counts need true scores: give the TileJob its answers")
        counted = ~removed
        own = self.answers - self.column_start
        inside = (own >= 0) & (own < self.scores.shape[1])
        rows = torch.arange(self.scores.shape[0], device=own.device)
        counted[rows[inside], own[inside]] = False
        codes = comparison_codes(self.scores, self.true_scores)
        return (((codes > 0) & counted).sum(dim=1), ((codes == 0) & counted).sum(dim=1), counted.sum(dim=1))

    def merged_top_k(
        self, best: tuple[torch.Tensor, torch.Tensor], k: int, removed: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The running top k of this tile's rows, ``best`` = (positions, scores) of shape (b, k') with -1 where
        empty, merged with the tile's candidates less ``removed`` (b, s): (positions (b, k), scores (b, k)), best
        first, ties by ascending position (as :func:`~kgeval._engine.predictions.top_k`), -1 / -inf where empty."""
        positions, values = best
        size, width = self.scores.shape
        columns = torch.arange(self.column_start, self.column_start + width, device=positions.device)
        candidates = torch.cat([positions, columns.expand(size, -1)], dim=1)
        merged = torch.cat([values.to(self.scores.dtype), self.scores], dim=1)
        return _first_k(candidates, merged, torch.cat([positions >= 0, ~removed], dim=1), k)


Visitor = Callable[[EntityTarget, ScoreTile], None]


@dataclass(frozen=True)
class TileJob:
    """The queries (n, 2) of one side and the side indices (:class:`FilterIndex` sides of ``target``, or None) whose
    known answers each tile locates; optionally each query row's true answer (LongTensor (n,) of entity ids), whose
    score then comes with every tile of its row (:attr:`ScoreTile.true_scores`)."""

    queries: torch.Tensor
    target: EntityTarget
    marks: tuple[Any, ...]
    answers: torch.Tensor | None = None


def visit_tiles(
    model: ResolvedModel, jobs: Sequence[TileJob], num_entities: int, options: TopKOptions, visitors: Sequence[Visitor]
) -> None:
    """Hand every score tile of every job (its queries against every entity) to each of ``visitors`` in turn: a
    full pass over all jobs per visitor, the same tiles in the same order, so a visitor may rely on what the
    previous ones saw of every job.

    A NaN score outside the marked answers is a ValueError naming the query; in a job with ``answers``, a NaN
    anywhere in a row's scores (the rank rule: its true and filtered candidates' included). A job with ``answers``
    scores each batch's tiles once when one slice holds every candidate, and else first the tiles holding the
    batch's answers (to read the true scores), then every tile -- the slice read last in the first pass first, so
    that a scorer holding its scores need not score it again. Runs in the model's eval mode, without
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
    # a model scored through its own methods: sized from its measured memory (a PyKEEN DistMult's score_t holds a
    # (queries x entities x d) product, far more than its scores)
    sizes = sizes_for(scorer, job.queries, requested.batch_size, requested.slice_size, requested.memory_budget,
                      owner=model.model)  # fmt: skip
    return job, scorer, sizes


def _visit(job: TileJob, scorer: Any, sizes: Sizes, visit: Visitor) -> None:
    """One pass over the job's tiles."""
    queries = job.queries
    bounds = slice_bounds(scorer.num_candidates, sizes.slice_size)
    for batch_start in range(0, queries.shape[0], sizes.batch_size):
        batch = queries[batch_start : batch_start + sizes.batch_size]
        answers = None if job.answers is None else job.answers[batch_start : batch_start + sizes.batch_size]
        known = [_known_pairs(batch, index, None) for index in job.marks]
        scorer.begin(batch)
        truth, first = None, None
        if answers is not None and len(bounds) > 1:
            truth, first = _first_pass(scorer, batch, answers, bounds, sizes.tile_rows)
        for j in _slice_order(first, len(bounds)):
            start, stop = bounds[j]
            scorer.start_slice(start, stop)
            for row_start in range(0, batch.shape[0], sizes.tile_rows):
                row_stop = min(row_start + sizes.tile_rows, batch.shape[0])
                scores = scorer.query_tile(row_start, row_stop)
                row_answers = None if answers is None else answers[row_start:row_stop]
                row_truth = None if truth is None else truth[row_start:row_stop]
                if row_answers is not None and row_truth is None:  # one slice: the tile holds every answer
                    row_truth = _read(scores, None, row_answers - start)
                tile = ScoreTile(batch_start + row_start, start, scores,
                                 tuple(_inside(rows, columns, row_start, row_stop, start, stop)
                                       for rows, columns in known), row_truth, row_answers)  # fmt: skip
                _check_nan(tile, queries)
                visit(job.target, tile)


def _first_pass(
    scorer: Any, batch: torch.Tensor, answers: torch.Tensor, bounds: Sequence[tuple[int, int]], tile_rows: int
) -> tuple[torch.Tensor, int | None]:
    """The true scores of a begun batch whose candidates lie in several slices, read by the engine's counting from
    the tiles (of ``tile_rows`` rows) holding the answers only; and the slice read last."""
    width = bounds[0][1] - bounds[0][0]
    answer_slices = (answers // width).tolist()  # one read per batch
    blocks = [RowBlock(start, min(start + tile_rows, len(answer_slices)), start,
                       min(start + tile_rows, len(answer_slices)),
                       true_slices=tuple(sorted(set(answer_slices[start : start + tile_rows]))))
              for start in range(0, len(answer_slices), tile_rows)]  # fmt: skip
    work = BatchWork(batch, answers, None, bounds, blocks)
    return _true_scores(scorer, work, SIGN, Workspace())


def _inside(
    rows: torch.Tensor, columns: torch.Tensor, row_start: int, row_stop: int, start: int, stop: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The (row, column) pairs inside the tile, relative to its corner."""
    inside = (rows >= row_start) & (rows < row_stop) & (columns >= start) & (columns < stop)
    return rows[inside] - row_start, columns[inside] - start


def _check_nan(tile: ScoreTile, queries: torch.Tensor) -> None:
    """ValueError for a NaN score at an unmarked pair of the tile, or at any pair of a tile with true scores (then
    the rank rule's: every score of the row counts) (``queries``: all of the pass's)."""
    if not bool(torch.isnan(tile.scores).any()):
        return
    nan = torch.isnan(tile.scores)
    if tile.true_scores is None:
        for rows, columns in tile.marked:
            nan[rows, columns] = False
    if bool(nan.any()):
        row = int(nan.any(dim=1).nonzero()[0, 0])
        raise ValueError(f"the model produced NaN scores for query {queries[tile.row_start + row].tolist()}")
