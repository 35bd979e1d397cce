"""Tests of kgeval.records: reading exported rank tables and converting them to record columns."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kgeval.records import RankRecords, read_ranks


def _table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "head": [0, 0, 3],
            "relation": [1, 1, 0],
            "tail": [2, 2, 1],
            "side": ["head", "tail", "Tail"],
            "optimistic": [1, 2, 5],
            "pessimistic": [1, 4, 5],
            "realistic": [1.0, 3.0, 5.0],
            "num_candidates": [9, 9, 9],
        }
    )


def test_records_from_a_ranks_df_table() -> None:
    records = RankRecords.from_frame(_table())
    assert records["side"].dtype == np.int8
    assert records["side"].tolist() == [0, 1, 1]
    assert records["task_index"].tolist() == [-1, -1, -1]
    assert records["pessimistic"].tolist() == [1, 4, 5]
    assert records["head"].dtype == np.int64


def test_records_keep_integer_sides_and_task_index() -> None:
    table = _table().assign(side=[0, 1, 1], task_index=[4, 4, 7])
    records = RankRecords.from_frame(table)
    assert records["side"].tolist() == [0, 1, 1]
    assert records["task_index"].tolist() == [4, 4, 7]


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".tsv"])
def test_csv_round_trip(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"ranks{suffix}"
    _table().to_csv(path, index=False, sep="\t" if suffix == ".tsv" else ",")
    pd.testing.assert_frame_equal(read_ranks(path), _table())


@pytest.mark.skipif(
    importlib.util.find_spec("pyarrow") is None and importlib.util.find_spec("fastparquet") is None,
    reason="no Parquet engine installed",
)
def test_parquet_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "ranks.parquet"
    _table().to_parquet(path)
    pd.testing.assert_frame_equal(read_ranks(path), _table())


def test_error_on_unknown_suffix(tmp_path: Path) -> None:
    message = "rank file must end in .csv, .tsv (either maybe compressed: .csv.gz, ...) or .parquet, got 'ranks.json'"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        read_ranks(tmp_path / "ranks.json")


def test_the_last_suffixes_say_the_format_and_unreadable_files_are_named(tmp_path: Path) -> None:
    """ "x.tsv_old.csv" is a CSV (it was read with tabs: one column); a truncated .csv.gz is a one-line ValueError
    naming the file (it was an EOFError traceback)."""
    from kgeval.records import write_ranks

    path = write_ranks(_table(), tmp_path / "ranks.tsv_old.csv")
    assert "," in path.read_text().splitlines()[0]
    pd.testing.assert_frame_equal(read_ranks(path), _table())
    zipped = write_ranks(_table(), tmp_path / "ranks.csv.gz")
    zipped.write_bytes(zipped.read_bytes()[:30])
    with pytest.raises(ValueError, match=r"^cannot read the rank table .*ranks\.csv\.gz: "):
        read_ranks(zipped)
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(ValueError, match=r"^cannot read the rank table .*empty\.csv: No columns to parse"):
        read_ranks(tmp_path / "empty.csv")


def test_error_on_missing_columns() -> None:
    message = (
        "a rank table needs the columns ['head', 'relation', 'tail', 'side', 'optimistic', 'pessimistic'], "
        "missing ['side', 'optimistic']"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        RankRecords.from_frame(_table().drop(columns=["side", "optimistic"]))


@pytest.mark.parametrize(("side", "bad"), [(["head", "both", "tail"], "'both'"), ([0, 3, 1], "3")])
def test_error_on_bad_side(side: list, bad: str) -> None:
    message = f"rank table: column 'side' row 1 = {bad} must be 'head' / 'tail' / 'relation' (or 0 / 1 / 2)"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        RankRecords.from_frame(_table().assign(side=side))


# every untrusted value the table may hold is refused, naming the column and the first bad row
UNTRUSTED = [
    ("tail", [2, -2, 1], "column 'tail' row 1 = -2 is not an integer >= -1"),  # -1: unknown (no triples)
    ("optimistic", [1, np.nan, 5], "column 'optimistic' row 1 = nan is not an integer >= 1"),  # an empty cell
    ("optimistic", [1, 0, 5], "column 'optimistic' row 1 = 0 is not an integer >= 1"),
    ("pessimistic", [1, -1, 5], "column 'pessimistic' row 1 = -1 is not an integer >= 1"),
    ("optimistic", [1, 2.5, 5], "column 'optimistic' row 1 = 2.5 is not an integer >= 1"),
    ("head", ["0", "x", "3"], "column 'head' row 1 = 'x' is not an integer >= -1"),
    ("num_candidates", [9, 3, 9], "row 1 {'head': 0, 'relation': 1, 'tail': 2, 'optimistic': 2, 'pessimistic': 4, "
     "'side': 1, 'num_candidates': 3}: pessimistic must be <= num_candidates"),
    ("pessimistic", [1, 1, 5], "row 1 {'head': 0, 'relation': 1, 'tail': 2, 'optimistic': 2, 'pessimistic': 1, "
     "'side': 1, 'num_candidates': 9}: optimistic must be <= pessimistic"),
    ("realistic", [1.0, 2.0, 5.0], "row 1 {'head': 0, 'relation': 1, 'tail': 2, 'optimistic': 2, 'pessimistic': 4, "
     "'side': 1, 'num_candidates': 9}: realistic must be the mean rank"),
    ("task_index", [0, -2, 1], "column 'task_index' row 1 = -2 is not an integer >= -1"),
]  # fmt: skip


@pytest.mark.parametrize(("column", "values", "message"), UNTRUSTED, ids=[m[:40] for _c, _v, m in UNTRUSTED])
def test_untrusted_cells_are_refused(column: str, values: list, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape('rank table: ' + message)}$"):
        RankRecords.from_frame(_table().assign(**{column: values}))


def test_a_blank_optimistic_cell_read_from_csv_is_refused(tmp_path: Path) -> None:
    """The reported case: one empty optimistic cell used to become -2**63 and count as a hit@1."""
    path = tmp_path / "ranks.csv"
    _table().to_csv(path, index=False)
    lines = path.read_text().splitlines()
    cells = lines[2].split(",")
    cells[4] = ""  # optimistic of row 1
    lines[2] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"column 'optimistic' row 1 = nan is not an integer >= 1"):
        RankRecords.from_frame(read_ranks(path))


def test_a_rank_path_is_checked_before_anything_is_ranked(tmp_path, monkeypatch) -> None:
    import importlib.util

    from kgeval.records import check_rank_path

    assert check_rank_path(tmp_path / "r.csv.gz") == tmp_path / "r.csv.gz"
    (tmp_path / "folder.csv").mkdir()
    with pytest.raises(ValueError, match="is a folder"):
        check_rank_path(tmp_path / "folder.csv")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        check_rank_path(tmp_path / "absent" / "r.csv")
    with pytest.raises(ValueError, match=r"must end in .csv, .tsv \(either maybe compressed"):
        check_rank_path(tmp_path / "r.xlsx")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("pyarrow", "fastparquet") else real(name, *a))  # fmt: skip
    with pytest.raises(ValueError, match=r"\.parquet needs pyarrow"):
        check_rank_path(tmp_path / "r.parquet")


def test_labels_read_back_as_text(tmp_path) -> None:
    """Zero-padded labels (WN18RR's synset ids) keep their zeros through a CSV rank table."""
    import pandas as pd

    from kgeval.records import read_ranks, write_ranks

    frame = pd.DataFrame({"head": [0], "relation": [0], "tail": [1], "side": ["tail"], "optimistic": [1],
                          "pessimistic": [1], "num_candidates": [3], "head_label": ["00012345"],
                          "relation_label": ["007"], "tail_label": ["01"]})  # fmt: skip
    back = read_ranks(write_ranks(frame, tmp_path / "r.csv"))
    assert back[["head_label", "relation_label", "tail_label"]].iloc[0].tolist() == ["00012345", "007", "01"]
    assert back["head"].dtype.kind == "i"


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".csv.gz"])
def test_labels_that_look_missing_are_labels(tmp_path, suffix: str) -> None:
    """ "NA", "None", "null", "nan" and the empty label are labels (pandas read them as missing: a report named the
    relation "nan"), while an empty cell of a number column stays missing and is refused."""
    from kgeval.records import write_ranks

    labels = ["NA", "None", "null", "nan", ""]
    frame = pd.DataFrame({"head": range(5), "relation": range(5), "tail": range(5), "side": ["tail"] * 5,
                          "optimistic": [1] * 5, "pessimistic": [1] * 5, "num_candidates": [3] * 5,
                          "head_label": labels, "relation_label": labels, "tail_label": labels[::-1]})  # fmt: skip
    back = read_ranks(write_ranks(frame, tmp_path / f"r{suffix}"))
    for column in ("head_label", "relation_label", "tail_label"):
        assert back[column].tolist() == frame[column].tolist(), column
    assert RankRecords.from_frame(back).equals(RankRecords.from_frame(frame))


# -- records of an evaluation without triples (-1 ids) -----------------------------------------------------------
def _scores_results(num_tasks: int = 40, seed: int = 0):
    """evaluate_scores over integer scores in 0..3 (heavy ties), with the rank pairs computed here by counting."""
    import torch

    from kgeval import evaluate_scores

    generator = torch.Generator().manual_seed(seed)
    negatives = torch.randint(0, 4, (num_tasks, 12), generator=generator).float()
    true = torch.randint(0, 4, (num_tasks,), generator=generator).float()
    optimistic = 1 + (negatives > true[:, None]).sum(dim=1)
    pessimistic = 1 + (negatives >= true[:, None]).sum(dim=1)
    return evaluate_scores(true, negatives, ks=(1, 3)), optimistic.numpy(), pessimistic.numpy()


def test_the_rank_table_of_an_evaluation_without_triples_reads_back(tmp_path: Path) -> None:
    """evaluate_scores knows no ids and writes -1 for them: its table reads back (it was refused as a bad id), with
    the ranks counted here, and the conventions computed from the table equal those from the results."""
    from kgeval.conventions import convention_metrics

    results, optimistic, pessimistic = _scores_results()
    path = results.save_ranks(tmp_path / "ranks.csv")
    records = RankRecords.from_frame(read_ranks(path))
    assert (records.head == -1).all() and (records.relation == -1).all()
    np.testing.assert_array_equal(records.optimistic, optimistic)
    np.testing.assert_array_equal(records.pessimistic, pessimistic)
    for convention in ("first", "last", "expected-random", "rounded-mean"):
        table = convention_metrics(read_ranks(path), convention, side="tail", ks=(1, 3))
        assert table == convention_metrics(results, convention, side="tail", ks=(1, 3)), convention
    first = convention_metrics(read_ranks(path), "first", side="tail", ks=(1,))
    assert first["mrr"] == pytest.approx(np.mean(1.0 / optimistic), rel=1e-12, abs=0)


def test_views_that_need_ids_refuse_unknown_ones() -> None:
    """Per relation, per category, macro averages and stratified metrics need ids: where they are -1 each says so
    (before, the relation "-1" was a group of its own, and -1 entities would have wrapped around to the last one)."""
    import torch

    from kgeval import MetricAccumulator, RankBasedMetricResults

    results, _, _ = _scores_results()
    with pytest.raises(ValueError, match="a per-relation table needs each task's relation, but 40 of 40 tasks"):
        results.per_relation()
    with pytest.raises(ValueError, match="a macro average over relations needs each task's relation"):
        results.macro_average("mrr")
    with pytest.raises(ValueError, match="a per-category table needs each task's relation"):
        results.per_category(torch.tensor([[0, 0, 1]]))
    accumulators = {side: MetricAccumulator(ks=(1,)) for side in ("head", "tail")}
    for accumulator in accumulators.values():
        accumulator.update(torch.tensor([1, 2]), torch.tensor([1, 3]), torch.tensor([5, 5]),
                           task_index=torch.tensor([0, 1]))  # fmt: skip
    paired = RankBasedMetricResults.from_accumulators(accumulators, (1,))
    with pytest.raises(ValueError, match="pairing head and tail tasks by triple needs each task's head"):
        paired.stratified(torch.tensor([[0, 0, 1], [1, 0, 2]]))


def _interval_width(results, key: str) -> float:
    from kgeval.analysis.stats import confidence_interval

    interval = confidence_interval(results, key, n_resamples=300, seed=1)
    return interval.high - interval.low


def test_tasks_without_a_task_index_or_triple_resample_one_by_one() -> None:
    """An accumulator fed ranks alone (no triples, no task_index): each task is its own resampling unit, so the
    interval of a varied MRR has a width (before, every task fell into one unit "-1": a zero-width interval over
    "1 triples"); with both sides and nothing to pair them by, resampling is refused."""
    import torch

    from kgeval import MetricAccumulator, RankBasedMetricResults

    generator = torch.Generator().manual_seed(3)
    optimistic = torch.randint(1, 20, (200,), generator=generator)
    pessimistic = optimistic + torch.randint(0, 3, (200,), generator=generator)
    tail = MetricAccumulator(ks=(1,))
    tail.update(optimistic, pessimistic, torch.full((200,), 30))
    results = RankBasedMetricResults.from_accumulators({"tail": tail}, (1,))
    assert (results.records.task_index == -1).all()
    assert _interval_width(results, "tail.mrr") > 0.01
    indexed = MetricAccumulator(ks=(1,))
    indexed.update(optimistic, pessimistic, torch.full((200,), 30), task_index=torch.arange(200))
    with_index = RankBasedMetricResults.from_accumulators({"tail": indexed}, (1,))
    assert _interval_width(results, "tail.mrr") == _interval_width(with_index, "tail.mrr")  # the same units
    head = MetricAccumulator(ks=(1,))
    head.update(optimistic, pessimistic, torch.full((200,), 30))
    both = RankBasedMetricResults.from_accumulators({"head": head, "tail": tail}, (1,))
    with pytest.raises(ValueError, match="nothing says which tasks rank the same triple"):
        _interval_width(both, "both.mrr")
    assert _interval_width(both, "tail.mrr") == _interval_width(results, "tail.mrr")


def test_a_table_of_several_filter_settings_is_read_one_setting_at_a_time() -> None:
    """A temporal rank table holds each task once per setting: read as one ranking, every task would count three
    times; RankRecords.from_frame refuses it and settings_of splits it."""
    from kgeval.records import settings_of

    one = {"head": [0, 1], "relation": [0, 0], "tail": [1, 0], "side": ["head", "tail"], "optimistic": [1, 2],
           "pessimistic": [1, 3]}  # fmt: skip
    frame = pd.concat([pd.DataFrame(one).assign(setting=name) for name in ("time-aware", "raw")], ignore_index=True)
    with pytest.raises(ValueError, match=r"holds the ranks of several filter settings \(time-aware, raw\)"):
        RankRecords.from_frame(frame)
    parts = settings_of(frame)
    assert list(parts) == ["time-aware", "raw"] and all(len(RankRecords.from_frame(p)) == 2 for p in parts.values())
