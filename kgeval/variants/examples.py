"""Per-example rows (:func:`rank_examples`): for every evaluated triple and side, the true answer's filtered ranks and
the model's filtered top-k predictions -- what SimKGC-style codes dump per example -- from ONE pass over the model's
score tiles (``kgeval._engine.visit_tiles`` with the tasks' true answers), never a (tasks x entities) matrix.

The ranks are the evaluator's (:class:`kgeval.RankBasedEvaluator`, the rank rule of docs/design.md, with the
evaluated triples always part of the filter) and the predictions :func:`kgeval.predict.predict_top_k`'s (the other
known answers left out, the true answer kept as a candidate, ties by ascending id); :func:`write_examples` writes the
rows as JSON lines or CSV.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from kgeval import _checks
from kgeval._engine import FilterIndex, RunSettings, ScoreTile, TileJob, TopKOptions, visit_tiles
from kgeval._inputs import check_evaluation_inputs
from kgeval._tasks import ANSWER_COLUMN, QUERY_COLUMNS
from kgeval.analysis.relations import _labels_of, label_array
from kgeval.typing import TARGETS, EntityTarget

__all__ = ["EXAMPLE_SUFFIXES", "rank_examples", "write_examples"]

#: the file kinds :func:`write_examples` writes, by suffix
EXAMPLE_SUFFIXES: tuple[str, ...] = (".jsonl", ".csv")
#: the columns holding one list per row (written as JSON arrays, in CSV as JSON text)
_LIST_COLUMNS = ("predicted", "predicted_scores", "predicted_labels")


def rank_examples(
    model: Any,
    triples: torch.Tensor,
    *,
    filter_triples: torch.Tensor | Sequence[torch.Tensor] | None = (),
    k: int = 10,
    targets: Sequence[EntityTarget] = ("head", "tail"),
    entity_labels: Mapping[Any, Any] | Sequence[Any] | None = None,
    relation_labels: Mapping[Any, Any] | Sequence[Any] | None = None,
    batch_size: int | None = None,
    slice_size: int | None = None,
    memory_budget: int | None = None,
    fast_path: bool = True,
    check_fast_path: bool = True,
    use_tqdm: bool = True,
    tqdm_kwargs: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """One row per (triple, side): the true answer's filtered ranks and the model's filtered top-k predictions,
    both from one pass over the model's score tiles.

    Each batch's tiles are scored once; where the candidates are split into several slices, the tiles holding the
    batch's true answers are scored first (their true scores are needed before the other tiles can be counted), as
    the evaluator's own counting does.

    Parameters
    ----------
    model : object
        Anything :meth:`kgeval.RankBasedEvaluator.evaluate` scores by ``score_t`` / ``score_h`` (or their
        query/candidate form, or whole triples); evaluated where it lives, in eval mode.
    triples : LongTensor of shape (n, 3)
        The (head, relation, tail) triples; always part of the filter (as the evaluator's ``mapped_triples``).
        Repeated triples give repeated rows.
    filter_triples : LongTensor of shape (m, 3), or a sequence of them, optional
        Further known triples (the evaluator's ``additional_filter_triples``: typically train and valid).
    k : int, default=10
        Predictions per row, at most the number of entities.
    targets : sequence of {"head", "tail"}, default=("head", "tail")
    entity_labels, relation_labels : mapping or sequence, optional
        label -> id (``entity_to_id``), id -> label, or a sequence indexed by id; when given, ``head_label``,
        ``tail_label`` and ``predicted_labels`` (resp. ``relation_label``) columns are added.
    batch_size, slice_size, memory_budget, fast_path, check_fast_path
        As for :class:`kgeval.RankBasedEvaluator` (sizes chosen from the memory budget by default).
    use_tqdm : bool, default=True
        A progress bar over the tasks (on a terminal only).
    tqdm_kwargs : mapping, optional
        Passed to the progress bar, overriding kgeval's settings.

    Returns
    -------
    DataFrame
        One row per side of each triple: the head rows, then the tail rows, each in the order of ``triples``:

        - ``head``, ``relation``, ``tail``, ``side`` (categorical, as ``results.ranks_df()``), ``task_index`` (the
          row of ``triples``);
        - ``optimistic``, ``pessimistic`` (int64), ``realistic`` (float64, their mean) and ``num_candidates`` (the
          filtered candidates, the true answer included): exactly the evaluator's records for the same triples and
          filter;
        - ``predicted`` (a list of entity ids, best first, ties by ascending id: ``predict_top_k``'s with the other
          known answers of the query left out and the true answer kept) and ``predicted_scores`` (their scores);
          a row with fewer than k filtered candidates has shorter lists;
        - ``correct`` (bool): the true answer scores strictly above every other filtered candidate, i.e.
          ``pessimistic == 1``. It does not depend on how ties are ordered: a correct row's ``predicted[0]`` is the
          true answer, and a row whose true answer ties for the top (``optimistic == 1 < pessimistic``) is not
          correct even where the id order lists it first. Its mean is the evaluator's realistic (and pessimistic)
          hits@1 -- a realistic rank is 1 only when both bounds are;
        - with labels: ``head_label``, ``relation_label``, ``tail_label``, ``predicted_labels``.

    Raises
    ------
    ValueError
        For bad triples or ids (as the evaluator), k < 1 or above the number of entities, a target other than
        "head" / "tail", or a NaN among a row's scores (its true answer's and filtered candidates' included).
    """
    sides: tuple[EntityTarget, ...] = _checks.check_targets(targets, ("head", "tail"))  # type: ignore[assignment]
    k = _checks.check_positive_int(k, "k")
    checked = check_evaluation_inputs(model, triples, additional_filter_triples=filter_triples, targets=sides,
                                      batch_size=batch_size, slice_size=slice_size,
                                      memory_budget=memory_budget)  # fmt: skip
    if k > checked.num_entities:
        raise ValueError(f"k={k} is above the number of entities ({checked.num_entities})")
    labels = (None if entity_labels is None else label_array(entity_labels, "entity_labels"),
              None if relation_labels is None else label_array(relation_labels, "relation_labels"))  # fmt: skip
    evaluated = checked.triples
    index = FilterIndex(torch.cat([evaluated, *(t.to(evaluated.device) for t in checked.filter_triples)]))
    jobs = [TileJob(evaluated[:, QUERY_COLUMNS[side]], side, (index.side(side),), evaluated[:, ANSWER_COLUMN[side]])
            for side in sides]  # fmt: skip
    options = TopKOptions(checked.sizes, bool(fast_path), bool(check_fast_path))
    settings = RunSettings.progress_bar(use_tqdm, {"desc": "Ranking examples", **(tqdm_kwargs or {})})
    with tqdm(total=evaluated.shape[0] * len(sides), **settings) as progress:
        rows = _Rows(evaluated.shape[0], k, checked.num_entities, evaluated.device, progress)
        visit_tiles(checked.model, jobs, checked.num_entities, options, [rows.visit])
    return _frame(evaluated.cpu().numpy(), sides, rows, labels)


def write_examples(path: str | os.PathLike[str], examples: pd.DataFrame) -> Path:
    """Write :func:`rank_examples`' rows to ``path`` by its suffix: ``.jsonl`` (one JSON object a row, the lists as
    arrays) or ``.csv`` (the lists as JSON text, e.g. ``[3, 0, 7]``); ±inf scores are written as ``Infinity`` /
    ``-Infinity`` (Python's and pandas' JSON read them). The folder must exist. Returns the path written.

    Raises
    ------
    ValueError
        For another suffix, or a path that cannot be written (a folder, a missing folder).
    """
    path = Path(path)
    if path.suffix.lower() not in EXAMPLE_SUFFIXES:
        raise ValueError(f"cannot write examples to {str(path)!r}: the suffix must be one of {EXAMPLE_SUFFIXES} "
                         "(JSON lines or CSV)")  # fmt: skip
    if not isinstance(examples, pd.DataFrame):
        raise TypeError(f"examples must be the DataFrame of rank_examples, got {type(examples).__name__}")
    _checks.check_writable_file(path, "the examples' path")
    records = [{name: _plain(value) for name, value in row.items()} for row in examples.to_dict(orient="records")]
    if path.suffix.lower() == ".jsonl":
        with path.open("w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(record) + "\n" for record in records)
        return path
    lists = [name for name in examples.columns if name in _LIST_COLUMNS]
    flat = pd.DataFrame(records, columns=list(examples.columns))
    for name in lists:
        flat[name] = [json.dumps(value) for value in flat[name]]
    flat.to_csv(path, index=False)
    return path


@dataclass
class _Rows:
    """The visitor of one pass: per side and task row, its counts against its true score and its running top k."""

    size: int
    k: int
    num_entities: int
    device: torch.device
    progress: Any
    #: per side: [#above, #equal, #counted] (LongTensors (n,)) and the running top k (positions, scores (n, k))
    counts: dict[str, list[torch.Tensor]] = field(default_factory=dict)
    best: dict[str, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)
    seen: dict[tuple[str, int], int] = field(default_factory=dict)  #: candidates seen per (side, tile row start)

    def visit(self, side: EntityTarget, tile: ScoreTile) -> None:
        """Count the tile's rows against their true scores and merge its candidates into their top k."""
        if side not in self.counts:
            self.counts[side] = [torch.zeros(self.size, dtype=torch.int64, device=self.device) for _ in range(3)]
            self.best[side] = (torch.full((self.size, self.k), -1, dtype=torch.int64, device=self.device),
                               torch.full((self.size, self.k), -torch.inf, dtype=tile.scores.dtype,
                                          device=self.device))  # fmt: skip
        rows = slice(tile.row_start, tile.row_start + tile.scores.shape[0])
        removed = tile.others_marked(0)
        for total, part in zip(self.counts[side], tile.rank_counts(removed), strict=True):
            total[rows] += part
        positions, scores = self.best[side]
        positions[rows], scores[rows] = tile.merged_top_k((positions[rows], scores[rows]), self.k, removed)
        key = (side, tile.row_start)
        self.seen[key] = self.seen.get(key, 0) + tile.scores.shape[1]
        if self.seen[key] == self.num_entities:  # every candidate of these rows seen: their tasks are done
            del self.seen[key]
            self.progress.update(tile.scores.shape[0])


def _frame(
    triples: np.ndarray, sides: tuple[EntityTarget, ...], rows: _Rows, labels: tuple[np.ndarray | None, ...]
) -> pd.DataFrame:
    """The rows of every side, in order (see :func:`rank_examples`)."""
    parts = []
    for side in sides:
        above, equal, counted = (values.cpu().numpy() for values in rows.counts[side])
        positions, scores = (values.cpu().numpy() for values in rows.best[side])
        optimistic = 1 + above
        found = positions >= 0
        part = pd.DataFrame({
            "head": triples[:, 0], "relation": triples[:, 1], "tail": triples[:, 2],
            "side": pd.Categorical([side] * len(triples), categories=list(TARGETS)),
            "task_index": np.arange(len(triples), dtype=np.int64),
            "optimistic": optimistic, "pessimistic": optimistic + equal,
            "realistic": optimistic + equal / 2, "num_candidates": 1 + counted,
            "correct": optimistic + equal == 1,
            "predicted": [row[keep].tolist() for row, keep in zip(positions, found, strict=True)],
            "predicted_scores": [row[keep].tolist() for row, keep in zip(scores, found, strict=True)],
        })  # fmt: skip
        parts.append(part)
    frame = pd.concat(parts, ignore_index=True)
    entity_labels, relation_labels = labels
    if entity_labels is not None:
        frame["head_label"] = _labels_of(entity_labels, frame["head"].to_numpy(), "entity_labels")
        frame["tail_label"] = _labels_of(entity_labels, frame["tail"].to_numpy(), "entity_labels")
        flat = np.array([entity for ids in frame["predicted"] for entity in ids], dtype=np.int64)
        named = iter(_labels_of(entity_labels, flat, "entity_labels").tolist())
        frame["predicted_labels"] = [[next(named) for _ in ids] for ids in frame["predicted"]]
    if relation_labels is not None:
        frame["relation_label"] = _labels_of(relation_labels, frame["relation"].to_numpy(), "relation_labels")
    return frame


def _plain(value: Any) -> Any:
    """A cell as JSON writes it: numpy scalars as Python numbers, lists as they are."""
    if isinstance(value, np.generic):
        return value.item()
    return value
