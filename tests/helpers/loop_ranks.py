"""Brute-force ranks from a model's own per-query score rows: one query at a time, the filter as a Python set, the
ranks as METRICS.md defines them (optimistic: 1 + candidates scored strictly higher; pessimistic: 1 + candidates
scored higher or equal; the true answer never removed). For graphs too large for a dense (E, R, E) table."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import torch

#: (the query's (head, relation) or (relation, tail) ids, side) -> the query's scores of every candidate
RowScorer = Callable[[tuple[int, int], str], np.ndarray]


def loop_ranks(row_scores: RowScorer, triples: torch.Tensor,
               filter_triples: Iterable[torch.Tensor] = ()) -> dict[str, dict[str, np.ndarray]]:  # fmt: skip
    """``out[side][field]`` (side "head" / "tail", field "optimistic", "pessimistic", "num_candidates") of every
    row of ``triples``, each task scored by its own call of ``row_scores`` and filtered by the evaluated triples and
    ``filter_triples``."""
    rows = [tuple(row) for row in triples.tolist()]
    known = set(rows) | {tuple(row) for table in filter_triples for row in table.tolist()}
    out: dict[str, dict[str, list[int]]] = {side: {"optimistic": [], "pessimistic": [], "num_candidates": []}
                                            for side in ("head", "tail")}  # fmt: skip
    for h, r, t in rows:
        for side, query, true in (("tail", (h, r), t), ("head", (r, t), h)):
            scores = row_scores(query, side)
            true_score = scores[true]
            optimistic = pessimistic = 1
            candidates = 1
            for entity, score in enumerate(scores.tolist()):
                triple = (h, r, entity) if side == "tail" else (entity, r, t)
                if entity == true or triple in known:
                    continue
                candidates += 1
                optimistic += score > true_score
                pessimistic += score >= true_score
            out[side]["optimistic"].append(optimistic)
            out[side]["pessimistic"].append(pessimistic)
            out[side]["num_candidates"].append(candidates)
    return {side: {name: np.asarray(values, dtype=np.int64) for name, values in fields.items()}
            for side, fields in out.items()}  # fmt: skip
