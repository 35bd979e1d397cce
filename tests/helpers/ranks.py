"""Compare the per-task rank records of kgeval results with the brute-force reference ranks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

FIELDS = ("optimistic", "pessimistic", "num_candidates")


def ranks_by_side(records: Mapping[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    """``out[side][field]`` in the order of the evaluated triples (records sorted by task_index)."""
    out = {}
    for side, code in (("head", 0), ("tail", 1)):
        mask = records["side"] == code
        order = np.argsort(records["task_index"][mask], kind="stable")
        out[side] = {name: records[name][mask][order] for name in (*FIELDS, "task_index")}
    return out


def rank_tuples(records: Mapping[str, np.ndarray]) -> dict[str, tuple[np.ndarray, ...]]:
    """``out[side]`` = (optimistic, pessimistic, num_candidates) in the order of the evaluated triples."""
    return {side: tuple(fields[name] for name in FIELDS) for side, fields in ranks_by_side(records).items()}


def assert_same_ranks(
    records: Mapping[str, np.ndarray],
    expected: Mapping[str, Mapping[str, np.ndarray]],
    task_rows: Sequence[int] | None = None,
    sides: Sequence[str] = ("head", "tail"),
) -> None:
    """Every task's optimistic / pessimistic ranks and num_candidates equal the reference ones exactly.

    ``task_rows``: the rows of mapped_triples that were evaluated (default: all, in order).
    """
    got = ranks_by_side(records)
    for side in sides:
        if task_rows is not None:
            np.testing.assert_array_equal(got[side]["task_index"], np.asarray(task_rows))
        for name in FIELDS:
            np.testing.assert_array_equal(got[side][name], expected[side][name], err_msg=f"{side} {name}")
