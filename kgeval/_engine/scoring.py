"""Scorers: the scores of one (rows x candidate slice) tile for one side, from any model kgeval can score
(query/candidate GEMM, ``score_t`` / ``score_h`` with or without candidate ids, or whole triples), and the model
protocols they read. Candidates are addressed by position among all entities or the whitelist.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any, Literal, Protocol, runtime_checkable

import torch

from kgeval._checks import RANKED_DTYPES, accepts_keyword, check_scores
from kgeval.integrations import scoring_view
from kgeval.typing import Target

SCORE_METHOD: dict[Target, str] = {"tail": "score_t", "head": "score_h", "relation": "score_r"}
CANDIDATE_KEYWORD: dict[Target, str] = {"tail": "tails", "head": "heads", "relation": "relations"}

#: similarities of the query/candidate form: "dot" scores q . c; "l2" and "l1" rank as -||q - c||_2 / -||q - c||_1
SIMILARITIES: tuple[str, ...] = ("dot", "l2", "l1")

#: scores are finite when |q . c| (or ||q - c||_1) is provably below this (float32 overflows at ~2**128)
FINITE_BOUND = 2.0**100

#: copying a score row costs about as much as this many query dimensions of a GEMM row (measured on CPU)
ROW_COPY_COST_IN_DIMS = 16

#: vector dtypes a kernel that multiplies the vectors itself (the fused "triton" kernel) accepts
FUSABLE_DTYPES: tuple[torch.dtype, ...] = (torch.float16, torch.bfloat16, torch.float32)


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


@runtime_checkable
class QueryCandidateModel(Protocol):
    """A model whose scores are a similarity between a query vector and a candidate vector.

    ``kgeval_query(batch, target)`` maps a (B, 2) batch ((h, r) for target "tail", (r, t) for "head") to
    queries of shape (B, d); ``kgeval_candidates(target)`` is the (num_entities, d) candidate matrix;
    ``kgeval_similarity`` names the similarity: ``"dot"`` (score = query @ candidates.T), ``"l2"`` (the model's
    scores are a decreasing function of the Euclidean distance, e.g. -||q - c||), ``"l1"`` (likewise for the
    Manhattan distance). Only the order of the scores matters for ranks. An optional ``kgeval_targets`` (default
    ("head", "tail")) names the targets the form serves; with "relation", ``kgeval_query`` maps (h, t) pairs and
    ``kgeval_candidates("relation")`` is the (num_relations, d) relation matrix.
    """

    kgeval_similarity: str

    def kgeval_query(self, batch: torch.Tensor, target: Target) -> torch.Tensor: ...

    def kgeval_candidates(self, target: Target) -> torch.Tensor: ...


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

    def __init__(self, model: Any, target: Target, num_entities: int, candidate_ids: torch.Tensor | None) -> None:
        self.model = model
        self.target = target
        self.num_entities = num_entities
        self.candidate_ids = candidate_ids  #: None means all entities, in id order
        self.num_candidates = num_entities if candidate_ids is None else int(candidate_ids.numel())
        self._queries: torch.Tensor | None = None
        self._start, self._stop = 0, self.num_candidates

    def begin(self, queries: torch.Tensor) -> None:
        """Start a batch of (U, 2) queries (the layout of score_t / score_h)."""
        self._queries = queries
        self._kept: dict[tuple[int, int], torch.Tensor] = {}  #: scores of answer slices kept by keep_slice

    @property
    def fusable(self) -> bool:
        """Whether a kernel may multiply this scorer's query and candidate vectors itself (:meth:`fused_operands`)."""
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
        scores = check_scores(getattr(self.model, method)(queries), (queries.shape[0], self.num_entities), method)
        if self.candidate_ids is not None:
            scores = scores.index_select(1, self.candidate_ids)
        self._hold(scores)

    def _query_block(self, query_start: int, query_stop: int) -> torch.Tensor:
        return self._held[query_start:query_stop, self._start : self._stop]


class SlicedScorer(HeldScoresScorer):
    """For models accepting ``tails=`` / ``heads=``: one call per slice with that slice's candidate ids."""

    sizing = "sliced"

    def start_slice(self, start: int, stop: int) -> None:
        super().start_slice(start, stop)
        self._release()
        if self._reuse(start, stop):
            return
        method = SCORE_METHOD[self.target]
        ids = self._ids(start, stop)
        queries = self._queries
        if ids is None:
            raw = getattr(self.model, method)(queries)
        else:
            raw = getattr(self.model, method)(queries, **{CANDIDATE_KEYWORD[self.target]: ids})
        self._hold(check_scores(raw, (queries.shape[0], stop - start), method))  # type: ignore[union-attr]

    def _query_block(self, query_start: int, query_stop: int) -> torch.Tensor:
        return self._held[query_start:query_stop]


#: scores the triples (heads[i], relations[i], tails[i]) -> FloatTensor of shape (n,) (or (n, 1))
TripleFunction = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


class TripleScorer(SlicedScorer):
    """For models that only score whole triples: per candidate slice, the (queries x slice) block of triples is
    built and scored in one call, so no more than one (batch x slice) block of triples ever exists."""

    #: a triple costs far more than a score while it is scored (three ids, and the model's gathered embeddings):
    #: batches and slices are sized for this many times fewer scores than a score_t call -- on CPU blocks of 4,096
    #: triples, which keep the gathered embeddings in cache (FB15k-237, PyG DistMult d = 200: 0.32 s per 100 tail
    #: queries against 1.75 s with 64x blocks and 0.90 s with 4x smaller ones)
    memory_per_score = 1024

    def __init__(
        self,
        model: Any,
        target: Target,
        num_entities: int,
        candidate_ids: torch.Tensor | None,
        score_triples: TripleFunction,
        name: str,
    ) -> None:
        super().__init__(model, target, num_entities, candidate_ids)
        self._score_triples = score_triples
        self._name = name  #: how the user's function is named in error messages

    def start_slice(self, start: int, stop: int) -> None:
        CandidateScorer.start_slice(self, start, stop)
        self._release()
        if self._reuse(start, stop):
            return
        queries = self._queries
        assert queries is not None
        ids = self._ids(start, stop)
        if ids is None:
            ids = torch.arange(start, stop, device=queries.device)
        candidates = ids.unsqueeze(0).expand(queries.shape[0], -1)
        self._hold(score_triple_block(self._score_triples, self._name, self.target, queries, candidates))


def score_triple_block(
    score_triples: TripleFunction, name: str, target: Target, queries: torch.Tensor, candidates: torch.Tensor
) -> torch.Tensor:
    """Scores (B, C) of the triples completing each query (B, 2) by its own row of candidates (B, C), in one call of
    a whole-triple function; its output, (B * C,) or PyKEEN's (B * C, 1), is checked."""
    rows, width = candidates.shape
    query = queries.repeat_interleave(width, dim=0)
    candidate = candidates.reshape(-1)
    if target == "tail":
        heads, relations, tails = query[:, 0], query[:, 1], candidate
    elif target == "head":
        heads, relations, tails = candidate, query[:, 0], query[:, 1]
    else:  # relation: (h, t) queries
        heads, relations, tails = query[:, 0], candidate, query[:, 1]
    raw = score_triples(heads, relations, tails)
    if isinstance(raw, torch.Tensor) and raw.dim() == 2 and raw.shape[1] == 1:
        raw = raw[:, 0]  # (n, 1), PyKEEN's score_hrt
    if isinstance(raw, torch.Tensor) and raw.dim() == 1 and raw.numel() == rows * width:
        raw = raw.reshape(rows, width)
    return check_scores(raw, (rows, width), name)


def triple_function(model: Any, score_fn: TripleFunction | None = None) -> tuple[TripleFunction, str] | None:
    """How to score whole triples with ``model``: ``score_fn`` when given, else the model's ``score_hrt(hrt)``
    (PyKEEN's name; (n, 3) in, (n,) or (n, 1) out), else its ``forward(h, r, t)`` (PyTorch Geometric's KGE
    models); None when it has none of these. Returns the function and its name for error messages."""
    if score_fn is not None:
        if not callable(score_fn):
            raise TypeError(f"score_fn must be callable as score_fn(heads, relations, tails), got {score_fn!r}")
        return score_fn, "score_fn"
    score_hrt = getattr(model, "score_hrt", None)
    if callable(score_hrt):
        return (lambda h, r, t: score_hrt(torch.stack([h, r, t], dim=1))), "score_hrt"
    if isinstance(model, torch.nn.Module) and _takes_three_positional(model.forward):
        return (lambda h, r, t: model(h, r, t)), "forward"
    return None


def _takes_three_positional(function: Any) -> bool:
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    return len(required) <= 3 <= len(positional) or any(p.kind is p.VAR_POSITIONAL for p in parameters)


class GemmScorer(CandidateScorer):
    """Query/candidate models with ``"dot"`` or ``"l2"`` similarity: one GEMM per tile, into a reused buffer.

    For ``"l2"`` the distance is expanded, ||q - c||^2 = ||q||^2 + ||c||^2 - 2 q.c, and the per-row constant
    ||q||^2 dropped: the scores 2 q.c - ||c||^2 = [2q, -1] . [c, ||c||^2] order the candidates like -||q - c||
    and are one GEMM with one extra column.
    """

    owns_blocks = True

    def __init__(self, model: Any, target: Target, num_entities: int, candidate_ids: torch.Tensor | None) -> None:
        super().__init__(model, target, num_entities, candidate_ids)
        self.similarity = model.kgeval_similarity
        candidates = _check_vectors(model.kgeval_candidates(target), (num_entities, None), "kgeval_candidates")
        if candidate_ids is not None:
            candidates = candidates.index_select(0, candidate_ids)
        if self.similarity == "l2":
            candidates = torch.cat([candidates, (candidates * candidates).sum(dim=1, keepdim=True)], dim=1)
            self.model_scores = False  # 2 q.c - ||c||^2, not -||q - c||
        self._candidates = candidates
        self._buffer = torch.empty(0, dtype=candidates.dtype, device=candidates.device)
        self._largest = _largest(candidates)

    def begin(self, queries: torch.Tensor) -> None:
        super().begin(queries)
        width = self._candidates.shape[1] - (1 if self.similarity == "l2" else 0)
        vectors = _check_vectors(
            self.model.kgeval_query(queries, self.target), (queries.shape[0], width), "kgeval_query"
        )
        if self.similarity == "l2":
            vectors = torch.cat([2 * vectors, vectors.new_full((vectors.shape[0], 1), -1.0)], dim=1)
        self._vectors = vectors.to(self._candidates.dtype)
        self.nan_free = self._bounded(_largest(self._vectors))
        self._current: torch.Tensor | None = None  #: the kept scores of the current slice, when it has them

    @property
    def fusable(self) -> bool:
        return self._candidates.dtype in FUSABLE_DTYPES

    def fused_operands(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self._vectors, self._candidates

    def _bounded(self, largest_query: float) -> bool:
        """Whether no score of this batch can overflow: |q . c| <= d max|q| max|c| (CPU only: a host check)."""
        bound = self._vectors.shape[1] * largest_query * self._largest
        return self._vectors.device.type == "cpu" and bound < FINITE_BOUND

    def start_slice(self, start: int, stop: int) -> None:
        super().start_slice(start, stop)
        self._slice = self._candidates[start:stop]
        self._current = self._take_kept(start, stop)

    def keep_slice(self) -> None:
        """Score every query of the batch against the slice once and keep the result: the first pass reads its true
        scores from it and counting reads it again, so both see the same values and nothing is computed twice."""
        if self._current is None and self._can_keep(self._vectors.shape[0] * (self._stop - self._start)):
            self._current = self._scores(self._vectors).clone()  # its own memory, not the reused buffer
            self._kept[self._start, self._stop] = self._current

    def block(
        self, query_start: int, query_stop: int, query_rows: torch.Tensor | None, workspace: Workspace
    ) -> tuple[torch.Tensor, bool]:
        """Repeated queries: recompute their rows when that is cheaper than scoring once and copying rows."""
        if self._current is not None:  # kept scores: hand out views (never to be overwritten) or copies
            tile = self._current[query_start:query_stop]
            if query_rows is None:
                return tile, False
            copy = workspace.tile(query_rows.numel(), tile.shape[1], tile)
            return torch.index_select(tile, 0, query_rows, out=copy), True
        if query_rows is not None:
            repeats = query_rows.numel() - (query_stop - query_start)
            if repeats * self._vectors.shape[1] < query_rows.numel() * ROW_COPY_COST_IN_DIMS:
                return self._scores(self._vectors[query_start:query_stop].index_select(0, query_rows)), True
        return super().block(query_start, query_stop, query_rows, workspace)

    def _query_block(self, query_start: int, query_stop: int) -> torch.Tensor:
        if self._current is not None:
            return self._current[query_start:query_stop]
        return self._scores(self._vectors[query_start:query_stop])

    def _scores(self, vectors: torch.Tensor) -> torch.Tensor:
        size = vectors.shape[0] * (self._stop - self._start)
        if self._buffer.numel() < size:
            self._buffer = torch.empty(size, dtype=self._candidates.dtype, device=self._candidates.device)
        out = self._buffer[:size].view(vectors.shape[0], self._stop - self._start)
        return torch.matmul(vectors, self._slice.T, out=out)


class L1Scorer(GemmScorer):
    """Query/candidate models with ``"l1"`` similarity: -||q - c||_1 per tile by ``torch.cdist``.

    cdist computes the pairwise distances directly, so no (B, E, d) temporary is ever built.
    """

    @property
    def fusable(self) -> bool:
        return False  # distances, not products

    def _bounded(self, largest_query: float) -> bool:
        bound = self._vectors.shape[1] * (largest_query + self._largest)
        return self._vectors.device.type == "cpu" and bound < FINITE_BOUND

    def _scores(self, vectors: torch.Tensor) -> torch.Tensor:
        return torch.cdist(vectors, self._slice, p=1).neg_()


def query_candidate_form(model: Any) -> Any | None:
    """The object exposing the query/candidate form for ``model`` (itself or an integration's view), or None."""
    model = scoring_view(model)
    if isinstance(model, QueryCandidateModel):
        similarity = model.kgeval_similarity
        if similarity not in SIMILARITIES:
            raise ValueError(f"model.kgeval_similarity must be one of {SIMILARITIES}, got {similarity!r}")
        return model
    return None


def make_scorer(
    model: Any,
    target: Target,
    num_entities: int,
    candidate_ids: torch.Tensor | None,
    fast_path: bool = True,
    score_fn: TripleFunction | None = None,
) -> CandidateScorer:
    """The fastest scorer the model supports: GEMM (or cdist for L1), then per-slice calls, then whole rows, then
    whole triples (``score_fn``, ``score_hrt`` or ``forward(h, r, t)``; ``score_fn`` wins over everything).

    A model of another library is scored through its integration's view (:func:`kgeval.integrations.scoring_view`).
    """
    if score_fn is not None:
        function, name = triple_function(model, score_fn)  # type: ignore[misc]
        return TripleScorer(model, target, num_entities, candidate_ids, function, name)
    model = scoring_view(model)
    form = query_candidate_form(model) if fast_path else None
    if form is not None and target not in getattr(form, "kgeval_targets", ("head", "tail")):
        form = None  # a form for entity candidates only
    if form is not None:
        scorer = L1Scorer if form.kgeval_similarity == "l1" else GemmScorer
        return scorer(form, target, num_entities, candidate_ids)
    method = getattr(model, SCORE_METHOD[target], None)
    if callable(method):
        if accepts_keyword(method, CANDIDATE_KEYWORD[target]):
            return SlicedScorer(model, target, num_entities, candidate_ids)
        return FullRowScorer(model, target, num_entities, candidate_ids)
    triples = triple_function(model)
    if triples is None:
        raise TypeError(
            f"the model has no {SCORE_METHOD[target]}(batch), score_hrt(hrt_batch) or forward(h, r, t) to rank "
            f"{target}s with; pass score_fn=... (a function of heads, relations, tails) to evaluate"
        )
    return TripleScorer(model, target, num_entities, candidate_ids, *triples)


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


def _largest(vectors: torch.Tensor) -> float:
    """max |v| over a matrix (inf for NaN / inf entries or on non-CPU devices, where it would synchronise)."""
    if vectors.device.type != "cpu" or vectors.numel() == 0:
        return math.inf if vectors.numel() else 0.0
    largest = float(vectors.detach().abs().max())
    return largest if math.isfinite(largest) else math.inf


def _check_vectors(vectors: Any, shape: tuple[int, int | None], method: str) -> torch.Tensor:
    """A query/candidate matrix: a floating tensor of ``shape`` (None: any width)."""
    if not isinstance(vectors, torch.Tensor) or not vectors.dtype.is_floating_point or vectors.dim() != 2:
        got = f"{vectors.dtype} {tuple(vectors.shape)}" if isinstance(vectors, torch.Tensor) else type(vectors)
        raise TypeError(f"model.{method} must return a 2-d floating-point tensor, got {got}")
    if vectors.shape[0] != shape[0] or (shape[1] is not None and vectors.shape[1] != shape[1]):
        expected = (shape[0], "d" if shape[1] is None else shape[1])
        raise ValueError(f"model.{method} returned shape {tuple(vectors.shape)}, expected {expected}")
    if vectors.device.type == "meta":
        raise ValueError(f"model.{method} returned a tensor on the meta device, which holds no values")
    return vectors if vectors.dtype in RANKED_DTYPES else vectors.float()  # float8: widened exactly


def model_device(model: Any) -> torch.device:
    """The device the model's parameters live on (``model.device`` if set; CPU for parameter-free models)."""
    device = getattr(model, "device", None)
    if isinstance(device, torch.device | str):
        return torch.device(device)
    parameters = getattr(model, "parameters", None)
    if callable(parameters):
        for parameter in parameters():
            return parameter.device
    return torch.device("cpu")
