"""The query/candidate fast path: models whose scores are a similarity between a query vector and a candidate
vector (:class:`kgeval.protocol.QueryCandidateModel`), scored one GEMM per tile (:class:`GemmScorer`; "l2" through
its one-GEMM expansion) or by ``torch.cdist`` ("l1", :class:`L1Scorer`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from kgeval._checks import RANKED_DTYPES
from kgeval._engine.candidate_slices import (
    GatheredSlices,
    InPlaceSlices,
    MappedFileSlices,
    candidate_slices,
    releases_pages,
    streamed_slice_rows,
)
from kgeval._engine.scoring import CandidateScorer, Workspace
from kgeval.typing import Target

#: scores are finite when |q . c| (or ||q - c||_1) is provably below this (float32 overflows at ~2**128)
FINITE_BOUND = 2.0**100

#: copying a score row costs about as much as this many query dimensions of a GEMM row (measured on CPU)
ROW_COPY_COST_IN_DIMS = 16

#: candidate columns per GEMM call on CPU: the BLAS multiplies a wide tile faster as blocks of 512 columns written in
#: place through the tile's row stride than as one call (d = 200, 2 cores, 576-1024 rows: FB15k-237's 14,541 columns
#: 97-110 -> 159-170 GFLOP/s; 1024-column blocks 160-168, 1536 107-154); the values are the same
CPU_GEMM_COLUMNS = 512

#: a tile row's stride on CPU is a multiple of this many scores (64 bytes of float32, 128 of float64: whole cache
#: lines; the allocator aligns the tile itself to 64 bytes)
CACHE_LINE_ELEMENTS = 16

#: vector dtypes a kernel that multiplies the vectors itself (the fused "triton" kernel) accepts
FUSABLE_DTYPES: tuple[torch.dtype, ...] = (torch.float16, torch.bfloat16, torch.float32)


class GemmScorer(CandidateScorer):
    """Query/candidate models with ``"dot"`` or ``"l2"`` similarity: one GEMM per tile, into a reused buffer.

    For ``"l2"`` the distance is expanded, ||q - c||^2 = ||q||^2 + ||c||^2 - 2 q.c, and the per-row constant
    ||q||^2 dropped: the scores 2 q.c - ||c||^2 order the candidates like -||q - c||. They are a GEMM of the
    model's own table followed by one subtraction of the squared norms, computed once (one float per candidate):
    the table is never copied, so a memory-mapped or sharded table stays where it is. (The fused kernel, which has
    no subtraction, multiplies [2q, -1] . [c, ||c||^2] instead, a copy of the table on its device.)
    """

    owns_blocks = True

    def __init__(self, model: Any, target: Target, num_entities: int, candidate_ids: torch.Tensor | None) -> None:
        super().__init__(model, target, num_entities, candidate_ids)
        self.similarity = model.kgeval_similarity
        #: the whitelist's table rows when its slices are gathered from the whole table (a large shared file
        #: mapping: kgeval._engine.candidate_slices.GatheredSlices) instead of copied at once; else None
        self._gathered_rows: torch.Tensor | None = None
        candidates = self._candidate_matrix()
        #: the candidate vectors: (num_candidates, d), or the whole (num_entities, d) table when gathered
        self._candidates = candidates
        self._buffer = torch.empty(0, dtype=candidates.dtype, device=candidates.device)
        #: where slices are read from: in place (pages released for a large shared file mapping), gathered (a
        #: whitelist over such a table), or streamed once :meth:`use_device` names another device
        self._slices = candidate_slices(candidates, candidates.device, self._gathered_rows)
        self._largest_candidate: float | None = None  #: max |c| over the table, read once when first needed
        #: "l2": ||c||^2 of every candidate (N,), in the table's dtype, and its copy on the scoring device
        self._norms: torch.Tensor | None = None
        self._device_norms: torch.Tensor | None = None
        self._fused_candidates: torch.Tensor | None = None  #: the fused kernel's "l2" candidates, once built
        self._largest_norm: float | None = None  #: max ||c||^2, read once when first needed
        if self.similarity == "l2":
            norms = _squared_norms(candidates, self._release_callback())
            if self._gathered_rows is not None:
                norms = norms.index_select(0, self._gathered_rows.to(norms.device))
            self._norms = self._device_norms = norms
            self.model_scores = False  # 2 q.c - ||c||^2, not -||q - c||

    def use_device(self, device: torch.device) -> None:
        """Read the candidate slices in place on ``device``, releasing the pages of a large shared file mapping
        once counted, or stream them from host memory to ``device`` (kgeval._engine.candidate_slices)."""
        if device != self._candidates.device or self._slices.streams or self._gathered_rows is not None:
            self._slices = candidate_slices(self._candidates, device, self._gathered_rows)
        if self._norms is not None:
            self._device_norms = self._norms.to(device)

    def max_slice(self, device: torch.device) -> int | None:
        """At most this many candidates per slice when the table is streamed to ``device`` (else None)."""
        if self._candidates.device == device or device.type == "cpu":
            return None
        return streamed_slice_rows(self._candidates)

    def _candidate_matrix(self) -> torch.Tensor:
        """The (num_candidates, d) candidate vectors: the model's matrix, restricted to ``candidate_ids`` -- or the
        whole matrix, its whitelist rows noted in ``_gathered_rows``, when its pages are released slice by slice
        (a copy of the whitelist's rows could be as large as the table)."""
        matrix = self.model.kgeval_candidates(self.target)
        candidates = _check_vectors(matrix, (self.num_entities, None), "kgeval_candidates")
        if self.candidate_ids is None:
            return candidates
        if releases_pages(candidates):
            self._gathered_rows = self.candidate_ids.cpu()
            return candidates
        return candidates.index_select(0, self.candidate_ids)

    def _query_matrix(self, queries: torch.Tensor) -> torch.Tensor:
        """The (U, d) query vectors of a batch's distinct (U, 2) queries, as the model computes them."""
        return self.model.kgeval_query(queries, self.target)

    def begin(self, queries: torch.Tensor) -> None:
        super().begin(queries)
        width = self._candidates.shape[1]
        vectors = _check_vectors(self._query_matrix(queries), (queries.shape[0], width), "kgeval_query")
        if self.similarity == "l2":
            vectors = 2 * vectors
        self._vectors = vectors.to(self._candidates.dtype)
        if isinstance(self._slices, MappedFileSlices):  # the model's gathers of query rows mapped whole folios
            self._slices.release(0, self._candidates.shape[0])
        self.nan_free = self._bounded()
        self._current: torch.Tensor | None = None  #: the kept scores of the current slice, when it has them

    @property
    def fusable(self) -> bool:
        return self._candidates.dtype in FUSABLE_DTYPES and not self._slices.streams and self._gathered_rows is None

    def fused_operands(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(queries, candidates) whose products are the scores: for "l2", [2q, -1] and [c, ||c||^2] (the
        candidates' extended copy is built on the first call, on the table's device, and kept)."""
        if self._norms is None:
            return self._vectors, self._candidates
        if self._fused_candidates is None:
            self._fused_candidates = torch.cat([self._candidates, self._norms.unsqueeze(1)], dim=1)
        minus_one = self._vectors.new_full((self._vectors.shape[0], 1), -1.0)
        return torch.cat([self._vectors, minus_one], dim=1), self._fused_candidates

    @property
    def counts_in_cache(self) -> bool:
        """Whether the begun batch's GEMM blocks can be counted while in cache
        (kgeval._engine.kernels.block_counting): the vectors and the table in place on the CPU (not a released or
        gathered file mapping), and no score can be NaN or infinite (:meth:`_bounded`)."""
        return (
            type(self._slices) is InPlaceSlices
            and self._vectors.device.type == "cpu"
            and self._candidates.device.type == "cpu"
            and self.nan_free
        )

    @property
    def num_queries(self) -> int:
        """The number of distinct queries of the begun batch."""
        return self._vectors.shape[0]

    #: candidate columns of each block :meth:`product_block` is asked for
    block_columns = CPU_GEMM_COLUMNS

    def product_block(self, query_start: int, query_stop: int, start: int, stop: int, out: torch.Tensor) -> None:
        """Write the scores of the batch's query rows [query_start, query_stop) against candidate positions [start,
        stop) into ``out``, a contiguous (rows, stop - start) CPU tensor: the GEMM of a column block of
        :meth:`_scores` ("l2": the squared norms subtracted)."""
        norms = None if self._device_norms is None else self._device_norms[start:stop]
        _form_scores(self._vectors[query_start:query_stop], self._candidates[start:stop], norms, out)

    def score_bands(self, query_rows: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A band [low, high] per task (shapes (B,), in the scores' dtype) that holds the score the GEMM gives
        query row ``query_rows[i]`` and candidate position ``positions[i]``: an estimate of it (the products in the
        vectors' dtype, summed in float64) widened by the bounds on both computations' rounding in any order of
        summation -- gamma_n times the sum of the absolute terms for each, n = d + 2 for the GEMM (the d products
        and sums, the "l2" norms' subtraction, one more) and d + 1 for the estimate (gamma_n = n u / (1 - n u),
        u = eps / 2) -- plus 2 (d + 2) times the smallest normal number (products flushed to zero), rounded
        outwards. Whether it holds is checked against the GEMM's own score (kgeval._engine.kernels.block_counting)."""
        dtype = self._candidates.dtype
        products = self._vectors.index_select(0, query_rows) * self._candidates.index_select(0, positions)
        estimate = products.sum(dim=1, dtype=torch.float64)
        terms = products.abs_().sum(dim=1, dtype=torch.float64)
        if self._device_norms is not None:  # "l2": 2 q.c - ||c||^2
            norms = self._device_norms.index_select(0, positions).double()
            estimate, terms = estimate - norms, terms + norms.abs()
        dims, unit = self.probe_dims, torch.finfo(dtype).eps / 2
        gemm, estimated = ((n * unit / (1 - n * unit)) for n in (dims + 2, dims + 1))
        error = (gemm + estimated) * terms + 2 * (dims + 2) * torch.finfo(dtype).tiny
        return _round_outwards(estimate - error, dtype, -math.inf), _round_outwards(estimate + error, dtype, math.inf)

    @property
    def vector_dtype(self) -> torch.dtype:
        """The dtype the form's vectors are multiplied in (the candidate table's)."""
        return self._candidates.dtype

    @property
    def probe_dims(self) -> int:
        """The width d of the form's query and candidate vectors."""
        return self._candidates.shape[1]

    def probe_scores(self, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The form's scores of the current batch's queries against candidate positions [start, stop), computed in
        float64 from the vectors (dot: q . c; l2: -||q - c||^2; l1: -||q - c||_1), and a bound on how far a float
        computation of the model's own scores in the vectors' dtype may stray from them: 2 (d + 2) eps times the
        sum of the absolute terms, plus 2 (d + 2) times the smallest normal number (underflow). Both DoubleTensors
        of shape (U, stop - start); for the form check (kgeval._engine.form_check), apart from the tiles the loop
        counts."""
        dims = self.probe_dims
        queries = self._vectors.double()
        candidates = self._candidate_rows(start, stop).to(queries.device, torch.float64)
        info = torch.finfo(self._candidates.dtype)
        scale, underflow = 2 * (dims + 2) * info.eps, 2 * (dims + 2) * info.tiny  # relative, and absolute (subnormals)
        if self.similarity == "dot":
            return queries @ candidates.T, scale * (queries.abs() @ candidates.abs().T) + underflow
        if self.similarity == "l2":
            queries = queries / 2  # the GEMM form holds 2q
            terms = (queries * queries).sum(dim=1, keepdim=True) + 2 * queries.abs() @ candidates.abs().T
            terms = terms + (candidates * candidates).sum(dim=1)
            distances = torch.cdist(queries, candidates, p=2.0, compute_mode="donot_use_mm_for_euclid_dist")
            return -distances.square(), scale * terms + underflow
        terms = queries.abs().sum(dim=1, keepdim=True) + candidates.abs().sum(dim=1)
        return -torch.cdist(queries, candidates, p=1.0), scale * terms + underflow

    def _bounded(self) -> bool:
        """Whether no score of this batch can overflow: |q . c| <= d max|q| max|c|, plus max ||c||^2 for "l2"
        (CPU only, a host check: False on the device's path, ``as_device``)."""
        if self._vectors.device.type != "cpu" or self.as_device:
            return False
        bound = self._vectors.shape[1] * _largest(self._vectors) * self._candidates_largest()
        if self._norms is not None:
            if self._largest_norm is None:  # read once: one float per candidate, however many batches
                self._largest_norm = _largest(self._norms.unsqueeze(1))
            bound += self._largest_norm
        return bound < FINITE_BOUND

    def _candidates_largest(self) -> float:
        """max |c| over the candidate table, read once (a memory-mapped table's pages are let go as it is read)."""
        if self._largest_candidate is None:
            self._largest_candidate = _largest(self._candidates, self._release_callback())
        return self._largest_candidate

    def _candidate_rows(self, start: int, stop: int) -> torch.Tensor:
        """The vectors of candidate positions [start, stop) (gathered from the table for a gathered whitelist)."""
        if isinstance(self._slices, GatheredSlices):
            return self._slices.take(start, stop)
        return self._candidates[start:stop]

    def _release_callback(self) -> Callable[[int, int], None] | None:
        """``release(start, stop)`` of a table whose pages are let go once read (a large shared file mapping)."""
        return self._slices.release if isinstance(self._slices, MappedFileSlices) else None

    def start_slice(self, start: int, stop: int) -> None:
        super().start_slice(start, stop)
        self._slice = self._slices.slice(start, stop)
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
        width = self._stop - self._start
        blocked = vectors.device.type == "cpu" and not self.as_device and width >= 2 * CPU_GEMM_COLUMNS
        # column blocks write through the row stride: rows start on cache lines (FB15k-237's 14,541-wide rows,
        # 576 x 512 blocks: 0.81-0.82 s padded to 14,544 against 0.84-0.88 s)
        stride = -(-width // CACHE_LINE_ELEMENTS) * CACHE_LINE_ELEMENTS if blocked else width
        size = vectors.shape[0] * stride
        if self._buffer.numel() < size or self._buffer.device != vectors.device:
            self._buffer = torch.empty(size, dtype=vectors.dtype, device=vectors.device)
        out = self._buffer[:size].view(vectors.shape[0], stride)[:, :width]
        norms = None if self._device_norms is None else self._device_norms[self._start : self._stop]  # "l2"
        if not blocked:
            return _form_scores(vectors, self._slice, norms, out)
        for start in range(0, width, CPU_GEMM_COLUMNS):  # column blocks, written in place through the row stride
            stop = start + CPU_GEMM_COLUMNS
            block_norms = None if norms is None else norms[start:stop]
            _form_scores(vectors, self._slice[start:stop], block_norms, out[:, start:stop])
        return out


class L1Scorer(GemmScorer):
    """Query/candidate models with ``"l1"`` similarity: -||q - c||_1 per tile by ``torch.cdist``.

    cdist computes the pairwise distances directly, so no (B, E, d) temporary is ever built.
    """

    @property
    def fusable(self) -> bool:
        return False  # distances, not products

    @property
    def counts_in_cache(self) -> bool:
        return False  # distances, not products

    def _bounded(self) -> bool:
        if self._vectors.device.type != "cpu" or self.as_device:
            return False
        return self._vectors.shape[1] * (_largest(self._vectors) + self._candidates_largest()) < FINITE_BOUND

    def _scores(self, vectors: torch.Tensor) -> torch.Tensor:
        return torch.cdist(vectors, self._slice, p=1).neg_()


def _form_scores(
    vectors: torch.Tensor, candidates: torch.Tensor, norms: torch.Tensor | None, out: torch.Tensor
) -> torch.Tensor:
    """The GEMM form's scores of (U, d) query vectors against (W, d) candidate vectors, written into ``out`` (U, W):
    q . c, and for "l2" (``norms``: the candidates' ||c||^2, (W,)) 2 q.c - ||c||^2, the norms subtracted while the
    block is in cache (the vectors hold 2q)."""
    torch.matmul(vectors, candidates.T, out=out)
    return out if norms is None else out.sub_(norms)


def _round_outwards(values: torch.Tensor, dtype: torch.dtype, towards: float) -> torch.Tensor:
    """float64 ``values`` in ``dtype``, rounded towards ``towards`` (-inf: down, inf: up): a band's bounds never
    move inwards."""
    rounded = values.to(dtype)
    moved = rounded.double() > values if towards < 0 else rounded.double() < values
    return torch.where(moved, torch.nextafter(rounded, rounded.new_tensor(towards)), rounded)


#: elements of a matrix read at once by :func:`_largest` and :func:`_squared_norms` (16 MiB of float32)
LARGEST_CHUNK = 2**22


def _squared_norms(table: torch.Tensor, release: Callable[[int, int], None] | None = None) -> torch.Tensor:
    """||c||^2 of every row of a (N, d) table, shape (N,), in its dtype and on its device, read
    :data:`LARGEST_CHUNK` elements at a time (a table larger than memory is never copied whole); ``release(start,
    stop)`` (given) lets go of each chunk's rows once read."""
    norms = torch.empty(table.shape[0], dtype=table.dtype, device=table.device)
    rows = max(1, LARGEST_CHUNK // max(1, table.shape[1]))
    for start in range(0, len(table), rows):
        chunk = table[start : start + rows].detach()
        torch.sum(chunk * chunk, dim=1, out=norms[start : start + rows])
        if release is not None:
            release(start, min(start + rows, len(table)))
    return norms


def _largest(vectors: torch.Tensor, release: Callable[[int, int], None] | None = None) -> float:
    """max |v| over a matrix (inf for NaN / inf entries or on non-CPU devices, where it would synchronise), read
    :data:`LARGEST_CHUNK` elements at a time: a candidate table larger than memory (memory-mapped) is never copied
    whole, and ``release(start, stop)`` (given) lets go of each chunk's rows once read."""
    if vectors.device.type != "cpu" or vectors.numel() == 0:
        return math.inf if vectors.numel() else 0.0
    rows = max(1, LARGEST_CHUNK // max(1, vectors.shape[1]))
    largest = 0.0
    for start in range(0, len(vectors), rows):  # a loop, not a generator: the host reads stay in this function
        chunk_largest = float(vectors[start : start + rows].detach().abs().max())
        if release is not None:
            release(start, min(start + rows, len(vectors)))
        if not math.isfinite(chunk_largest):  # NaN or inf (Python's max would drop a NaN)
            return math.inf
        largest = max(largest, chunk_largest)
    return largest


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
