"""Brute-force reference ranks of temporal link prediction, by explicit loops over the filter definitions of
METRICS.md (Temporal filters) -- the oracle the temporal tests compare kgeval against. It does not import kgeval.

For a tail task of the quadruple (h, r, t, τ) the candidates are every entity e; a candidate e != t is removed

- ``time-aware``: when (h, r, e, τ) is known (evaluated or additional quadruples);
- ``static``: when (h, r, e, τ') is known for any τ';
- ``raw``: never.

Head tasks alike with (e, r, t, τ). Scores come from a dense table ``tail_table[h, r, e, τ]`` (the score of
(h, r, e, τ) asked as a tail query) and ``head_table[e, r, t, τ]`` (asked as a head query; the two differ for a
model that scores heads through inverse relations).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from tests.helpers.reference import _rank_one_task

SETTINGS = ("time-aware", "static", "raw")


def _rows(quadruples: Any) -> list[tuple[int, int, int, int]]:
    if isinstance(quadruples, torch.Tensor):
        quadruples = quadruples.tolist()
    return [tuple(int(v) for v in row) for row in quadruples]  # type: ignore[misc]


def temporal_reference_ranks(
    tail_table: Any, head_table: Any, quadruples: Any, filters: Any = (), setting: str = "time-aware"
) -> dict[str, dict[str, np.ndarray]]:
    """``ranks[side][field]`` (side "head" / "tail"; field optimistic, pessimistic, realistic, num_candidates) of
    every evaluated quadruple, in order.

    tail_table, head_table : array-like of shape (E, R, E, T)
    quadruples : (n, 4) evaluated quadruples; filters : sequence of (m, 4) known quadruples
    """
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {SETTINGS}")
    tails = np.asarray(tail_table, dtype=np.float64).tolist()
    heads = np.asarray(head_table, dtype=np.float64).tolist()
    num_entities = len(tails)
    rows = _rows(quadruples)
    known = set(rows)
    for extra in filters:
        known |= set(_rows(extra))
    static = {(h, r, t) for h, r, t, _ in known}
    fields = ("optimistic", "pessimistic", "realistic", "num_candidates")
    out: dict[str, dict[str, list[float]]] = {side: {f: [] for f in fields} for side in ("head", "tail")}
    for h, r, t, tau in rows:
        tail_scores = [tails[h][r][e][tau] for e in range(num_entities)]
        head_scores = [heads[e][r][t][tau] for e in range(num_entities)]
        tail_others, head_others = [], []
        for e in range(num_entities):
            if e != t and not _removed(setting, (h, r, e, tau), known, static):
                tail_others.append(e)
            if e != h and not _removed(setting, (e, r, t, tau), known, static):
                head_others.append(e)
        tasks = (("tail", tail_scores, t, tail_others), ("head", head_scores, h, head_others))
        for side, scores, true, others in tasks:
            result = _rank_one_task(scores, true, others, side, (h, r, t))
            for name, value in zip(fields, result, strict=True):
                out[side][name].append(value)
    dtypes = {"optimistic": np.int64, "pessimistic": np.int64, "realistic": np.float64, "num_candidates": np.int64}
    ranks = {side: {f: np.asarray(values[f], dtype=dtypes[f]) for f in fields} for side, values in out.items()}
    ranks["both"] = {f: np.concatenate([ranks["head"][f], ranks["tail"][f]]) for f in fields}
    return ranks


def _removed(setting: str, quadruple: tuple[int, int, int, int], known: set, static: set) -> bool:
    if setting == "raw":
        return False
    if setting == "time-aware":
        return quadruple in known
    return quadruple[:3] in static
