"""The per-relation candidate table (:class:`kgeval.protocol.RelationTableModel`): scores are a similarity between a
query vector and a candidate vector transformed by the query's relation only (TransR's M_r t, TransH's hyperplane
projection, PairRE's t * r_t). :class:`RelationTableScorer` builds each relation's table of a candidate slice once
and scores the tile's queries of that relation against it: one GEMM ("dot", "l2") or cdist ("l1") per relation
present in the tile, instead of the model transforming every candidate again for every query.

Sizing: a GEMM scorer's ("gemm": tiles of a GEMM), with the slice also bounded (:meth:`RelationTableScorer.max_slice`)
so that on CPU a batch of :data:`kgeval._engine.sizes.CPU_GEMM_BATCH` tasks is one tall tile per slice (each
relation's table of a slice is then built once per batch) and one table fits the scorer's table budget; the tables
of the current slice are kept for the slice's other tiles (the first pass over the answer slices of a mixed-slice
batch, a CPU batch in several tiles) within ``keep_budget`` score elements -- the share of the memory budget a
scorer keeps scores in between passes; this one keeps tables instead -- the oldest let go first, rebuilt when
needed again. A tile whose rows are not sorted by relation is scored in relation order into a second tile-sized
buffer and put back in row order with one ``index_copy_``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from kgeval._engine.gemm_scoring import _check_vectors
from kgeval._engine.scoring import CandidateScorer
from kgeval._engine.sizes import CPU_GEMM_BATCH, CPU_TALL_TILE_ELEMENTS, keep_budget
from kgeval.typing import Target

#: the relation column of a query, by target ((h, r) for tails, (r, t) for heads)
RELATION_COLUMN: dict[str, int] = {"tail": 1, "head": 0}
#: the method by which a model gives its per-relation candidate table
TABLE_METHOD = "kgeval_relation_candidates"


class RelationTableScorer(CandidateScorer):
    """Relation-table models (:class:`kgeval.protocol.RelationTableModel`): per tile, the rows grouped by relation
    (index ops, one loop step per distinct relation of the tile), each group scored against its relation's table
    of the current slice, written into one tile.

    ``"l2"`` is the GEMM form's expansion, as :class:`kgeval._engine.gemm_scoring.GemmScorer`'s: 2 q.c - ||c||^2
    (a candidate bias b folded into the norms: 2 q.c - (||c||^2 - b)), which orders the candidates like
    -||q - c|| (-||q - c||^2 + b with a bias), so its tiles are not the model's scores (``model_scores`` False);
    the probe's rounding bound is the GEMM form's (:meth:`probe_scores`). ``"l1"``: -||q - c||_1 (+ b) by
    ``torch.cdist``. ``"dot"``: q . c (+ b).
    """

    owns_blocks = True

    def __init__(self, model: Any, target: Target, num_entities: int, candidate_ids: torch.Tensor | None) -> None:
        super().__init__(model, target, num_entities, candidate_ids)
        self.similarity: str = model.kgeval_similarity
        self.bias: bool = getattr(model, "kgeval_candidate_bias", False) is True
        device = candidate_ids.device if candidate_ids is not None else _model_device(model)
        first = candidate_ids[:1] if candidate_ids is not None else torch.zeros(1, dtype=torch.int64, device=device)
        # one candidate of relation 0: the table's width and dtype, checked before the first batch
        sample = self._checked_table(self.model.kgeval_relation_candidates(0, target, first), first.numel())
        self._dims = sample.shape[1] - self.bias
        self._dtype = sample.dtype
        self._columns = torch.empty(0, dtype=self._dtype, device=sample.device)  #: the tile buffer
        self._sorted = torch.empty(0, dtype=self._dtype, device=sample.device)  #: relation-ordered tile buffer
        self._vectors = torch.empty(0, self._dims, dtype=self._dtype, device=sample.device)
        self._relations = np.zeros(0, dtype=np.int64)  #: each distinct query's relation, on the host
        #: the tables of the current slice, by relation: (candidates (W, d), the "l2" norms less the bias, or the
        #: bias, or None), the oldest first
        self._tables: dict[int, tuple[torch.Tensor, torch.Tensor | None]] = {}
        self._table_slice: tuple[int, int] | None = None
        self._slice_ids: torch.Tensor | None = None
        # the tasks of a relation meet in a batch, which then builds its tables for as few batches as may be: a tail
        # query (h, r) is ordered by its relation first (a head query (r, t) is already)
        self.query_order = (1, 0) if target == "tail" else (0, 1)
        if self.similarity == "l2":
            self.model_scores = False  # 2 q.c - ||c||^2, not -||q - c||
        elif self.bias:
            self.model_scores = False  # the query's own constant (a head bias) is left out

    @property
    def vector_dtype(self) -> torch.dtype:
        """The dtype the tables' vectors are multiplied in."""
        return self._dtype

    @property
    def probe_dims(self) -> int:
        """The width d of the query and candidate vectors (a bias column not counted)."""
        return self._dims

    def max_slice(self, device: torch.device) -> int | None:
        """At most as many candidates as one table may hold within the table budget (``keep_budget`` of the
        device's default memory budget), and on CPU at most as many as a tall tile of :data:`CPU_GEMM_BATCH` rows
        allows, so that a batch is one tile per slice and each relation's table is built once per batch and
        slice."""
        most = max(1, keep_budget(device) // max(1, self._dims + self.bias))
        if device.type == "cpu":
            most = min(most, max(1, CPU_TALL_TILE_ELEMENTS // CPU_GEMM_BATCH))
        return most

    def _checked_table(self, table: Any, rows: int) -> torch.Tensor:
        width = None if not hasattr(self, "_dims") else self._dims + self.bias
        return _check_vectors(table, (rows, width), TABLE_METHOD)

    def _query_matrix(self, queries: torch.Tensor) -> torch.Tensor:
        """The (U, d) query vectors of a batch's distinct (U, 2) queries, as the model computes them."""
        return self.model.kgeval_query(queries, self.target)

    def begin(self, queries: torch.Tensor) -> None:
        super().begin(queries)
        vectors = _check_vectors(self._query_matrix(queries), (queries.shape[0], self._dims), "kgeval_query")
        if self.similarity == "l2":
            vectors = 2 * vectors
        self._vectors = vectors.to(self._dtype)
        # the batch's one host read: each distinct query's relation, to group a tile's rows by relation
        self._relations = queries[:, RELATION_COLUMN[self.target]].cpu().numpy()
        self._tables = {}
        self._table_slice = None

    def start_slice(self, start: int, stop: int) -> None:
        super().start_slice(start, stop)
        if self._table_slice != (start, stop):
            self._tables = {}
            self._table_slice = (start, stop)
            ids = self._ids(start, stop)
            self._slice_ids = torch.arange(start, stop, device=self._vectors.device) if ids is None else ids

    def _table(self, relation: int, cache: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Relation ``relation``'s table of the current slice and what the tile adds per candidate (the "l2"
        norms less the bias, else the bias, else None); kept for the slice's other tiles within the budget."""
        found = self._tables.get(relation)
        if found is not None:
            return found
        ids = self._slice_ids
        assert ids is not None
        raw = self.model.kgeval_relation_candidates(relation, self.target, ids)
        table = self._checked_table(raw, ids.numel()).to(self._dtype)
        bias = None
        if self.bias:
            table, bias = table[:, : self._dims], table[:, self._dims]
        extra = bias
        if self.similarity == "l2":
            norms = (table * table).sum(dim=1)
            extra = norms if bias is None else norms - bias
        entry = (table.contiguous() if self.similarity == "l1" else table, extra)
        if cache:
            self._keep(relation, entry)
        return entry

    def _keep(self, relation: int, entry: tuple[torch.Tensor, torch.Tensor | None]) -> None:
        """Keep a table of the current slice within ``keep_budget`` elements, letting go of the oldest first."""
        size = entry[0].numel()
        if size > self.keep_budget:
            return
        held = sum(table.numel() for table, _extra in self._tables.values())
        while self._tables and held + size > self.keep_budget:
            oldest = next(iter(self._tables))
            held -= self._tables.pop(oldest)[0].numel()
        self._tables[relation] = entry

    def _query_block(self, query_start: int, query_stop: int) -> torch.Tensor:
        rows, width = query_stop - query_start, self._stop - self._start
        out = self._buffer("_columns", rows * width).view(rows, width)
        if rows == 0 or width == 0:
            return out
        relations = self._relations[query_start:query_stop]
        order = np.argsort(relations, kind="stable")
        ordered = relations[order]
        cuts = (np.flatnonzero(ordered[1:] != ordered[:-1]) + 1).tolist()
        starts, stops = [0, *cuts], [*cuts, rows]
        vectors = self._vectors[query_start:query_stop]
        in_order = bool((order[1:] > order[:-1]).all()) if rows > 1 else True
        if in_order:  # the rows of each relation are contiguous already (a head side, a single relation)
            for start, stop in zip(starts, stops, strict=True):
                self._score(vectors[start:stop], int(ordered[start]), out[start:stop])
            return out
        positions = torch.from_numpy(order).to(vectors.device)
        gathered = vectors.index_select(0, positions)
        scratch = self._buffer("_sorted", rows * width).view(rows, width)
        for start, stop in zip(starts, stops, strict=True):
            self._score(gathered[start:stop], int(ordered[start]), scratch[start:stop])
        return out.index_copy_(0, positions, scratch)

    def _buffer(self, name: str, size: int) -> torch.Tensor:
        """A reused flat buffer of at least ``size`` elements on the vectors' device."""
        buffer: torch.Tensor = getattr(self, name)
        if buffer.numel() < size or buffer.device != self._vectors.device:
            buffer = torch.empty(size, dtype=self._dtype, device=self._vectors.device)
            setattr(self, name, buffer)
        return buffer[:size]

    def _score(self, vectors: torch.Tensor, relation: int, out: torch.Tensor) -> None:
        """Write the scores of ``vectors`` (k, d), queries of ``relation``, against its table into ``out``."""
        table, extra = self._table(relation)
        if self.similarity == "l1":
            distances = torch.cdist(vectors, table, p=1)
            if extra is None:
                torch.neg(distances, out=out)
            else:
                torch.sub(extra, distances, out=out)
            return
        torch.matmul(vectors, table.T, out=out)
        if extra is not None:
            if self.similarity == "l2":
                out.sub_(extra)
            else:
                out.add_(extra)

    def probe_scores(self, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The table's scores of the current batch's queries against candidate positions [start, stop), computed in
        float64 from the vectors (dot: q . c; l2: -||q - c||^2; l1: -||q - c||_1; a candidate bias added), and a
        bound on how far a float computation of the model's own scores in the vectors' dtype may stray from them,
        as :meth:`kgeval._engine.gemm_scoring.GemmScorer.probe_scores` gives it (|b| added to the terms). Both
        DoubleTensors of shape (U, stop - start); for the form check (kgeval._engine.form_check). The tables are
        built for the probe alone (not kept)."""
        queries = self._vectors.double()
        if self.similarity == "l2":
            queries = queries / 2  # the GEMM form holds 2q
        saved = self._table_slice, self._slice_ids, self._tables
        self.start_slice(start, stop)
        scores = torch.empty(queries.shape[0], stop - start, dtype=torch.float64, device=queries.device)
        bounds = torch.empty_like(scores)
        info = torch.finfo(self._dtype)
        scale, underflow = 2 * (self._dims + 2) * info.eps, 2 * (self._dims + 2) * info.tiny
        try:
            for relation in np.unique(self._relations).tolist():
                rows = torch.from_numpy(np.flatnonzero(self._relations == relation)).to(queries.device)
                raw = self.model.kgeval_relation_candidates(int(relation), self.target, self._slice_ids)
                table = self._checked_table(raw, stop - start).to(self._dtype).double()
                candidates, bias = (table[:, : self._dims], table[:, self._dims]) if self.bias else (table, None)
                form, terms = _probe_form(self.similarity, queries.index_select(0, rows), candidates)
                if bias is not None:
                    form, terms = form + bias, terms + bias.abs()
                scores[rows], bounds[rows] = form, scale * terms + underflow
        finally:
            self._table_slice, self._slice_ids, self._tables = saved
        return scores, bounds


def _probe_form(similarity: str, queries: torch.Tensor, candidates: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(scores, the sum of the absolute terms of their computation) of float64 ``queries`` (k, d) against
    ``candidates`` (W, d): q . c, -||q - c||^2 (its GEMM expansion's terms) or -||q - c||_1."""
    if similarity == "dot":
        return queries @ candidates.T, queries.abs() @ candidates.abs().T
    if similarity == "l2":
        terms = (queries * queries).sum(dim=1, keepdim=True) + 2 * queries.abs() @ candidates.abs().T
        terms = terms + (candidates * candidates).sum(dim=1)
        distances = torch.cdist(queries, candidates, p=2.0, compute_mode="donot_use_mm_for_euclid_dist")
        return -distances.square(), terms
    terms = queries.abs().sum(dim=1, keepdim=True) + candidates.abs().sum(dim=1)
    return -torch.cdist(queries, candidates, p=1.0), terms


def _model_device(model: Any) -> torch.device:
    """The device of the model's first parameter (the view's ``device`` where it names one), else the CPU."""
    device = getattr(model, "device", None)
    if isinstance(device, torch.device):
        return device
    module = model if isinstance(model, torch.nn.Module) else getattr(model, "model", None)
    if isinstance(module, torch.nn.Module):
        parameter = next(module.parameters(), None)
        if parameter is not None:
            return parameter.device
    return torch.device("cpu")
