"""How results read on a terminal: a headline block of the numbers papers report, and the full metric table.

Functions of a results object's ``data`` ((side, rank type, key) -> value) and ``ks``; the results class calls them
from ``__str__`` and ``table``. Nothing here computes a metric.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from kgeval.metrics.summary import nan_equal
from kgeval.typing import RANK_TYPES, SIDES

#: side columns of the headline, in this order
HEADLINE_SIDES = ("both", "head", "tail", "relation")


def headline_rows(ks: tuple[int, ...]) -> list[tuple[str, str]]:
    """(label, metric key) of the headline: MRR, Hits@k for every k, MR."""
    hits = [(f"Hits@{k}", f"hits_at_{k}") for k in ks]
    return [("MRR", "inverse_harmonic_mean_rank"), *hits, ("MR", "arithmetic_mean_rank")]


def headline(data: Mapping[Any, float], ks: tuple[int, ...]) -> str:
    """The numbers every paper reports, realistic ranks, both sides pooled with head and tail beside, in at most 80
    columns; optimistic / pessimistic columns for ``both`` only where ties make them differ.

    >>> print(headline({(s, r, k): 0.5 for s in ("both", "head", "tail") for r in RANK_TYPES
    ...                 for k in ("count", "inverse_harmonic_mean_rank", "hits_at_1", "arithmetic_mean_rank")}, (1,)))
    0 ranking tasks (0 head, 0 tail), realistic ranks
                both      head      tail
    MRR       0.5000    0.5000    0.5000
    Hits@1    0.5000    0.5000    0.5000
    MR          0.50      0.50      0.50
    """
    sides = [side for side in HEADLINE_SIDES if (side, "realistic", "count") in data]
    primary = sides[0] if sides else "both"  # "both", or the one side of a relation-only evaluation
    rows = [(label, key) for label, key in headline_rows(ks) if (primary, "realistic", key) in data]
    best = [data.get((primary, "optimistic", key), math.nan) for _label, key in rows]
    worst = [data.get((primary, "pessimistic", key), math.nan) for _label, key in rows]
    ties = not all(map(nan_equal, best, worst))
    columns = [(side, "realistic", side) for side in sides]
    if ties:
        columns += [(primary, "optimistic", "optimistic"), (primary, "pessimistic", "pessimistic")]
    counts = {side: int(data.get((side, "realistic", "count"), 0)) for side in sides}
    parts = [f"{counts[side]:,} {side}" for side in ("head", "tail", "relation") if side in counts]
    total = f"{sum(counts[side] for side in counts if side != 'both') or counts.get('both', 0):,} ranking tasks"
    lines = [f"{total} ({', '.join(parts)}), realistic ranks" if parts else f"{total}, realistic ranks"]
    lines.append(" " * 8 + "".join(f"{title:>{_width(title)}}" for _s, _r, title in columns))
    for label, key in rows:
        cells = "".join(
            f"{_number(data.get((side, rank_type, key), math.nan), key):>{_width(title)}}"
            for side, rank_type, title in columns
        )
        lines.append(f"{label:<8}{cells}")
    if ties:
        pooled = "both sides" if primary == "both" else primary
        lines.append(f"optimistic / pessimistic: {pooled}, ties broken for / against the true answer")
    return "\n".join(lines)


def wide_table(data: Mapping[Any, float], rank_types: str | tuple[str, ...] = "auto") -> pd.DataFrame:
    """Every metric, one row each, one column per (side, rank type).

    Parameters
    ----------
    data : mapping of (side, rank_type, key) to float
    rank_types : "auto", "all" or a tuple of rank types, default="auto"
        "auto": realistic for every side, plus the optimistic and pessimistic columns of a side where some metric
        differs between them (ties); "all": every reported rank type.
    """
    frame = pd.DataFrame(
        [(side, rank_type, key, value) for (side, rank_type, key), value in data.items()],
        columns=["side", "rank_type", "metric", "value"],
    )
    wide = frame.pivot_table(index="metric", columns=["side", "rank_type"], values="value", sort=False, dropna=False)
    order = [(side, rank_type) for side in SIDES for rank_type in RANK_TYPES if (side, rank_type) in wide.columns]
    wide = wide[order]
    if rank_types == "all":
        return wide
    if rank_types == "auto":
        keep = [(side, "realistic") for side in SIDES if (side, "realistic") in wide.columns]
        for side in SIDES:
            if (side, "optimistic") in wide.columns and not _frames_equal(
                wide[(side, "optimistic")], wide[(side, "pessimistic")]
            ):
                keep += [(side, "optimistic"), (side, "pessimistic")]
        return wide[[column for column in order if column in keep]]
    unknown = [rank_type for rank_type in rank_types if rank_type not in RANK_TYPES]
    if unknown or isinstance(rank_types, str):
        raise ValueError(f"rank_types must be 'auto', 'all' or a tuple of {RANK_TYPES}, got {rank_types!r}")
    return wide[[column for column in order if column[1] in rank_types]]


def format_table(wide: pd.DataFrame) -> str:
    """A wide table as text: counts as integers, other values with 4 decimals, no negative zero, NaN as '-'."""
    text = wide.copy().astype(object)
    for metric in text.index:
        text.loc[metric] = [_number(value, str(metric), decimals=4) for value in wide.loc[metric]]
    text.columns = [f"{side}.{rank_type}" for side, rank_type in wide.columns]
    return text.to_string()


def _number(value: float, key: str, decimals: int | None = None) -> str:
    """One value as printed: ``count`` as an integer, mean ranks with 2 decimals in the headline, else 4."""
    if isinstance(value, float) and math.isnan(value):
        return "-"
    if key == "count":
        return f"{int(value):,}"
    if decimals is None:
        decimals = 2 if key == "arithmetic_mean_rank" else 4
    text = f"{value:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text  # no "-0.0000"


def _width(title: str) -> int:
    return max(10, len(title) + 2)


def _frames_equal(a: Any, b: Any) -> bool:
    return all(nan_equal(float(x), float(y)) for x, y in zip(a, b, strict=True))


class Headline(dict[str, float]):
    """The headline dict of :meth:`RankBasedMetricResults.headline`: names spelled as MLflow and every other
    tracker accept them (``val/hits_at_10``, the metric token of kgeval's flat keys). Looking a name up with
    ``[]`` in the spelling of kgeval 0.1 (``val/hits@10``) still finds its value; iteration, ``in`` and
    ``get`` see the one spelling."""

    def __missing__(self, name: str) -> float:
        if "hits@" in name:
            return self[name.replace("hits@", "hits_at_")]
        raise KeyError(name)


def headline_values(data: Mapping[Any, float], ks: tuple[int, ...], rank_type: str, prefix: str | None) -> Headline:
    """The headline as a flat dict for a logger: ``[prefix/][side/]metric`` -> value, ``metric`` one of ``mrr``,
    ``hits_at_k`` per k and ``mr``, the pooled side first and without a side part (``val/mrr``,
    ``val/head/hits_at_10``): names every tracker accepts, MLflow included."""
    sides = [side for side in HEADLINE_SIDES if (side, rank_type, "count") in data]
    labels = {"inverse_harmonic_mean_rank": "mrr", "arithmetic_mean_rank": "mr"}
    out = Headline()
    for index, side in enumerate(sides):
        for _label, key in headline_rows(ks):
            if (side, rank_type, key) in data:
                name = labels.get(key) or key
                parts = [prefix] if prefix else []
                parts += [name] if index == 0 else [side, name]
                out["/".join(parts)] = float(data[(side, rank_type, key)])
    return out


def headline_frame(data: Mapping[Any, float], ks: tuple[int, ...], rank_type: str) -> pd.DataFrame:
    """The headline as a table: one row per metric (MRR, Hits@k, MR), one column per side."""
    sides = [side for side in HEADLINE_SIDES if (side, rank_type, "count") in data]
    rows = {label: [data.get((side, rank_type, key), math.nan) for side in sides] for label, key in headline_rows(ks)}
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=sides)
    frame.index.name = "metric"
    return frame


#: two numbers printed with four decimals that differ by less than this read as equal
EQUAL_AS_PRINTED = 5e-5


def all_or_nothing_note(row: str, mrr: float, hits: Mapping[int, float]) -> str | None:
    """One line explaining a row whose Hits@k do not grow with k (and whose MRR then equals them) -- or, given one k,
    whose MRR equals its Hits@k: its answers are either ranked first or tied with many candidates far below rank
    ``max(k)``, as a model or baseline that scores only some candidates and leaves the rest level does (a realistic
    rank in the middle of the tie). Values closer than :data:`EQUAL_AS_PRINTED` count as equal. None otherwise."""
    values = [hits[k] for k in sorted(hits)]
    if not values or any(math.isnan(value) for value in (*values, mrr)) or values[-1] <= 0:
        return None
    if values[-1] - values[0] >= EQUAL_AS_PRINTED:
        return None
    mrr_equal = abs(mrr - values[-1]) < EQUAL_AS_PRINTED
    if len(values) == 1 and not mrr_equal:
        return None
    k = max(hits)
    same = (f"MRR and Hits@{k}" if len(values) == 1 else "MRR and Hits@k") if mrr_equal else "Hits@k"
    return (f"({row}: equal {same} -- each answer is either ranked first or tied with many candidates below rank "
            f"{k}, where its realistic rank is the middle of the tie: it scores some candidates and leaves the rest "
            "level)")  # fmt: skip


def filter_order_note(valid_mrr: float, test_mrr: float) -> str | None:
    """One line when the test MRR exceeds the validation MRR (a reader may take it for a leak): a test task has the
    validation answers filtered out too, while a validation task still competes with the test answers; and the
    splits hold different triples. None otherwise."""
    if not test_mrr > valid_mrr:
        return None
    return (
        "(test MRR above validation MRR is no leak: a test task also has the validation triples' answers "
        "filtered out, while a validation task still competes with the test triples' answers; and the two splits "
        "hold different triples)"
    )
