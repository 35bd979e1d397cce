"""Scorers: the scores of one (rows x candidate slice) tile for one side -- the base every scorer follows, and the
scorers that call the model (``score_t`` / ``score_h`` / ``score_r`` with or without candidate ids, or whole rows).
The query/candidate GEMM lives in :mod:`kgeval._engine.gemm_scoring`, whole triples in
:mod:`kgeval._engine.triple_scoring`, the choice among them in :mod:`kgeval._engine.scorer_choice`. Candidates are
addressed by position among all entities (or relations) or the whitelist.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import torch

from kgeval._checks import check_scores
from kgeval.exceptions import IgnoredCandidatesWarning
from kgeval.typing import Target

SCORE_METHOD: dict[Target, str] = {"tail": "score_t", "head": "score_h", "relation": "score_r"}
CANDIDATE_KEYWORD: dict[Target, str] = {"tail": "tails", "head": "heads", "relation": "relations"}


class Workspace:
    """A reusable scratch buffer for score and code tiles (one per evaluation side)."""

    def __init__(self) -> None:
        self._buffer: torch.Tensor | None = None

    def tile(self, rows: int, width: int, like: torch.Tensor) -> torch.Tensor:
        """A contiguous (rows, width) tensor with the dtype and device of ``like``; reused, never zeroed."""
        size = rows * width
        buffer = self._buffer
        if buffer is None or buffer.numel() < size or buffer.dtype != like.dtype or buffer.device != like.device:
            buffer = self._buffer = torch.empty(size, dtype=like.dtype, device=like.device)
        return buffer[:size].view(rows, width)


class CandidateScorer:
    """Scores of one batch of queries against candidate slices, for one target side.

    A scorer is driven as::

        scorer.begin(queries)                                  # once per batch: its (U, 2) distinct queries
        scorer.start_slice(start, stop)                        # once per candidate slice
        scorer.block(query_start, query_stop, rows, workspace) # one tile: (task rows, stop - start) scores
        scorer.query_tile(query_start, query_stop)             # or: (distinct-query rows, stop - start) scores
    """

    #: how the loop sizes this scorer's work (kgeval._engine.sizes.choose_sizes): "gemm" (tiles of a GEMM),
    #: "sliced" (one model call per candidate slice) or "full_rows" (one call scores every candidate at once)
    sizing: Literal["gemm", "sliced", "full_rows"] = "gemm"
    #: whether :meth:`block` returns a fresh tensor the caller may overwrite
    owns_blocks: bool = False
    #: whether tiles hold the model's scores themselves (False: a transform that orders candidates the same way)
    model_scores: bool = True
    #: score elements :meth:`keep_slice` may keep at most (set by the loop from the memory budget)
    keep_budget: int = 0
    #: whether the current scores are known to hold no NaN (then counting skips its NaN checks)
    nan_free: bool = False
    #: the columns of a (B, 2) query the plan orders each slice group's tasks by, first column first
    #: (kgeval._engine.plan.SidePlan): tasks sharing the first column's id meet in a batch
    query_order: tuple[int, int] = (0, 1)

    def __init__(self, model: Any, target: Target, num_entities: int, candidate_ids: torch.Tensor | None) -> None:
        self.model = model
        self.target = target
        self.num_entities = num_entities
        self.candidate_ids = candidate_ids  #: None means all entities, in id order
        self.num_candidates = num_entities if candidate_ids is None else int(candidate_ids.numel())
        self._queries: torch.Tensor | None = None
        self._start, self._stop = 0, self.num_candidates

    #: score as on an accelerator whatever the device: no CPU-only choice (kgeval._engine.loop.as_on_a_device)
    as_device: bool = False

    def use_device(self, device: torch.device) -> None:
        """Score on ``device`` from now on (called by the loop before its first batch; most scorers need not know)."""

    def max_slice(self, device: torch.device) -> int | None:
        """The most candidates one slice may hold when scoring on ``device`` (None: the loop's budget decides)."""
        return None

    def begin(self, queries: torch.Tensor) -> None:
        """Start a batch of (U, 2) queries (the layout of score_t / score_h)."""
        self._queries = queries
        self._kept: dict[tuple[int, int], torch.Tensor] = {}  #: scores of answer slices kept by keep_slice

    @property
    def fusable(self) -> bool:
        """Whether a kernel may multiply this scorer's query and candidate vectors itself (:meth:`fused_operands`)."""
        return False

    @property
    def counts_in_cache(self) -> bool:
        """Whether the begun batch's score blocks are GEMMs a kernel may count while in cache
        (kgeval._engine.kernels.block_counting)."""
        return False

    def fused_operands(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(queries (U, d), candidates (num_candidates, d)) of the current batch, whose products are the scores
        (only where :attr:`fusable`)."""
        raise TypeError(f"{type(self).__name__} has no query/candidate vectors to multiply")

    def start_slice(self, start: int, stop: int) -> None:
        """Select the candidate positions [start, stop) for the following :meth:`block` calls."""
        self._start, self._stop = start, stop

    def block(
        self, query_start: int, query_stop: int, query_rows: torch.Tensor | None, workspace: Workspace
    ) -> tuple[torch.Tensor, bool]:
        """The scores of a tile of task rows against the current slice, and whether the caller may overwrite it.

        Parameters
        ----------
        query_start, query_stop : int
            The distinct-query rows the tile's tasks use.
        query_rows : LongTensor of shape (rows,), optional
            The query row (minus ``query_start``) of each task row; None when it is the identity.
        workspace : Workspace

        Returns
        -------
        tile : FloatTensor of shape (rows, stop - start)
        owned : bool
        """
        tile = self._query_block(query_start, query_stop)
        if query_rows is None:
            return tile, self.owns_blocks
        copy = workspace.tile(query_rows.numel(), tile.shape[1], tile)
        return torch.index_select(tile, 0, query_rows, out=copy), True

    def query_tile(self, query_start: int, query_stop: int) -> torch.Tensor:
        """Scores of distinct-query rows [query_start, query_stop) against the current slice, shape
        (query_stop - query_start, stop - start); the caller must not overwrite them."""
        return self._query_block(query_start, query_stop)

    def keep_slice(self) -> None:
        """Offer to keep the current slice's scores for the next :meth:`start_slice` of the same slice in this
        batch (a batch that reads its true scores in a first pass scores its answer slices twice otherwise).
        Scorers that can keep them do (within ``keep_budget``); the others ignore the offer."""

    def _can_keep(self, size: int) -> bool:
        """Whether ``size`` more score elements fit the keep budget beside those kept already."""
        return sum(scores.numel() for scores in self._kept.values()) + size <= self.keep_budget

    def _take_kept(self, start: int, stop: int) -> torch.Tensor | None:
        """The kept scores of slice [start, stop), handed over once; None when none were kept."""
        return self._kept.pop((start, stop), None)

    def _query_block(self, query_start: int, query_stop: int) -> torch.Tensor:
        """Scores of distinct-query rows [query_start, query_stop) against the current slice."""
        raise NotImplementedError

    def _ids(self, start: int, stop: int) -> torch.Tensor | None:
        """Entity ids of candidate positions [start, stop), or None when that is every entity."""
        if self.candidate_ids is None:
            if start == 0 and stop == self.num_entities:
                return None
            return torch.arange(start, stop, device=self._queries.device)  # type: ignore[union-attr]
        return self.candidate_ids[start:stop]


class HeldScoresScorer(CandidateScorer):
    """Scorers that hold a block of scores the model returned (``_held``), checked for NaN on first use only:
    the numba kernel checks NaN itself and never asks."""

    _held_nan_free: bool | None = None
    _held: Any = None  #: the score block the model returned last (a FloatTensor), None once let go

    def keep_slice(self) -> None:
        held = self._held
        if held is not None and self._can_keep(held.numel()):
            self._kept[self._start, self._stop] = held

    def _reuse(self, start: int, stop: int) -> bool:
        """Hold the kept scores of slice [start, stop) again, if there are any (then the model is not called)."""
        kept = self._take_kept(start, stop)
        if kept is None:
            return False
        self._hold(kept)
        return True

    def _hold(self, scores: torch.Tensor) -> None:
        """Keep a new score block (its NaN check is pending)."""
        self._held, self._held_nan_free = scores, None

    def _release(self) -> None:
        """Let go of the held block before asking the model for the next one, so that the allocator can hand its
        memory straight back to the model: holding it (two blocks of up to 16 MiB alive at once) made glibc
        return memory to the system and fault it in again at every call, a third of the time of a whole-row
        model's evaluation."""
        self._held = None

    @property
    def nan_free(self) -> bool:  # type: ignore[override]
        if self._held_nan_free is None:
            self._held_nan_free = _nan_free(self._held)
        return self._held_nan_free


class FullRowScorer(HeldScoresScorer):
    """For models that only score all entities at once: one call per batch, tiles are views."""

    sizing = "full_rows"

    def begin(self, queries: torch.Tensor) -> None:
        super().begin(queries)
        self._release()
        method = SCORE_METHOD[self.target]
        scores = check_scores(
            getattr(self.model, method)(queries), (queries.shape[0], self.num_entities), method, queries.device
        )
        if self.candidate_ids is not None:
            scores = scores.index_select(1, self.candidate_ids)
        self._hold(scores)

    def _query_block(self, query_start: int, query_stop: int) -> torch.Tensor:
        return self._held[query_start:query_stop, self._start : self._stop]


class SlicedScorer(HeldScoresScorer):
    """For models accepting candidate ids (``tails=`` / ``heads=``, or positionally where the signature says so):
    one call per slice with that slice's candidate ids.

    A model that takes the ids but returns the scores of every entity (a ``**kwargs`` it never reads) is ranked
    from those whole rows -- they are its scores all the same -- and asked for whole rows from then on (one call
    per batch, as :class:`FullRowScorer`), with one :class:`~kgeval.exceptions.IgnoredCandidatesWarning`.
    """

    sizing = "sliced"
    #: how the model takes candidate ids: "keyword" (``tails=ids``) or "positional" (``score_t(batch, ids)``)
    passing: Literal["keyword", "positional"] = "keyword"

    def __init__(self, model: Any, target: Target, num_entities: int, candidate_ids: torch.Tensor | None) -> None:
        super().__init__(model, target, num_entities, candidate_ids)
        self._ignores_ids = False  #: set once the model returned whole rows for a slice
        self._rows: torch.Tensor | None = None  #: this batch's whole rows, once the model is known to ignore ids
        self._held_slice: tuple[int, int] | None = None  #: the slice whose scores ``_held`` holds, in this batch

    def begin(self, queries: torch.Tensor) -> None:
        super().begin(queries)
        self._rows = None
        self._held_slice = None

    def start_slice(self, start: int, stop: int) -> None:
        held = self._held is not None and self._held_slice == (start, stop)
        super().start_slice(start, stop)
        if held:  # the slice the model scored last (a batch's first pass ends where its counting begins)
            self._take_kept(start, stop)  # kept as well: the same scores
            return
        self._release()
        self._held_slice = (start, stop)
        if self._reuse(start, stop):
            return
        method = SCORE_METHOD[self.target]
        ids = self._ids(start, stop)
        queries = self._queries
        assert queries is not None
        if ids is None:
            raw = getattr(self.model, method)(queries)
        elif self._ignores_ids:
            self._hold(self._columns(self._whole_rows(), start, stop))
            return
        elif self.passing == "positional":
            raw = getattr(self.model, method)(queries, ids)
        else:
            raw = getattr(self.model, method)(queries, **{CANDIDATE_KEYWORD[self.target]: ids})
        expected = (queries.shape[0], stop - start)
        if ids is not None and _shape(raw) == (queries.shape[0], self.num_entities) != expected:
            self._ignores_ids = True
            warnings.warn(
                f"kgeval: {type(self.model).__name__}.{method} returned the scores of all {self.num_entities} "
                f"entities when asked for {stop - start} candidates ({CANDIDATE_KEYWORD[self.target]}=...): it "
                "ignores the candidate ids. kgeval ranks from those whole rows (exact) and asks for whole rows from "
                "now on, so the model's memory per call is not bounded by slice_size",
                IgnoredCandidatesWarning,
                stacklevel=2,
            )
            self._rows = check_scores(raw, (queries.shape[0], self.num_entities), method, queries.device)
            self._hold(self._columns(self._rows, start, stop))
            return
        self._hold(check_scores(raw, expected, method, queries.device))

    def _whole_rows(self) -> torch.Tensor:
        """The scores of every entity for this batch's queries, asked for once per batch."""
        if self._rows is None:
            method, queries = SCORE_METHOD[self.target], self._queries
            assert queries is not None
            self._rows = check_scores(
                getattr(self.model, method)(queries), (queries.shape[0], self.num_entities), method, queries.device
            )
        return self._rows

    def _columns(self, rows: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        """The columns of candidate positions [start, stop) of whole rows (every entity, in id order)."""
        if self.candidate_ids is None:
            return rows[:, start:stop]
        return rows.index_select(1, self.candidate_ids[start:stop])

    def _query_block(self, query_start: int, query_stop: int) -> torch.Tensor:
        return self._held[query_start:query_stop]


def _shape(value: Any) -> tuple[int, ...] | None:
    """The shape of a tensor, else None."""
    return tuple(value.shape) if isinstance(value, torch.Tensor) else None


def candidate_positions(
    candidate_ids: torch.Tensor | None, num_entities: int, device: torch.device
) -> torch.Tensor | None:
    """Candidate position of every entity (-1 when not a candidate); None when every entity is one."""
    if candidate_ids is None:
        return None
    position_of = torch.full((num_entities,), -1, dtype=torch.int64, device=device)
    position_of[candidate_ids] = torch.arange(candidate_ids.numel(), device=device)
    return position_of


def _nan_free(scores: torch.Tensor) -> bool:
    """Whether a CPU score block holds no NaN, by one row-sum pass (+inf and -inf in one row answer "unknown": False).
    Always False on other devices, where the check would synchronise (their counting kernel checks anyway)."""
    return scores.device.type == "cpu" and not bool(torch.isnan(scores.sum(dim=1)).any())
