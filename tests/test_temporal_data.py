"""Temporal evaluation on real data (ICEWS14 and ICEWS14s in ../shared/data, skipped without them), and the
quadruple loader: kgeval's ranks of a tie-heavy integer model equal an independent numpy reference built from
Python sets of the known quadruples, under each filter setting, with and without inverse relations."""

from __future__ import annotations

import gzip
import os
import re
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import torch

from kgeval import TemporalRankBasedEvaluator
from kgeval.datasets import load_temporal_tsv, load_tsv_dataset, shared_data_dir
from kgeval.datasets.temporal import time_order
from kgeval.exceptions import UndefinedMetricWarning
from tests.helpers.ranks import assert_same_ranks


def shared(name: str) -> Path:
    folder = shared_data_dir()
    if folder is None or not (folder / name).is_dir():
        pytest.skip(f"{name} is not in the shared data folder")
    return folder / name


class IntegerTNT(torch.nn.Module):
    """score(h, r, t, τ) = sum(e_h * (w_r + w_r,τ) * e_t) with small integer vectors: a time-dependent and a
    time-independent relation part (TNTComplEx's shape, real-valued), exact in any summation order."""

    kgeval_similarity = "dot"

    def __init__(self, entities: int, relations: int, times: int, dim: int = 6, seed: int = 0) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.entity = torch.nn.Parameter(torch.randint(-2, 3, (entities, dim), generator=generator).float())
        self.relation = torch.nn.Parameter(torch.randint(-1, 2, (relations, dim), generator=generator).float())
        self.time = torch.nn.Parameter(torch.randint(-1, 2, (times, dim), generator=generator).float())
        self.num_entities, self.num_relations, self.num_times = entities, relations, times

    def kgeval_query(self, batch: torch.Tensor, target: str) -> torch.Tensor:
        entity, relation = (batch[:, 0], batch[:, 1]) if target == "tail" else (batch[:, 1], batch[:, 0])
        return self.entity[entity] * (self.relation[relation] + self.time[batch[:, 2]])

    def kgeval_candidates(self, target: str) -> torch.Tensor:
        return self.entity

    def score_t(self, hrt: torch.Tensor) -> torch.Tensor:
        return self.kgeval_query(hrt, "tail") @ self.entity.T

    def score_h(self, rtt: torch.Tensor) -> torch.Tensor:
        return self.kgeval_query(rtt, "head") @ self.entity.T


def numpy_reference(model, evaluated: np.ndarray, known: np.ndarray, setting: str, inverse: int | None = None):
    """ranks[side][field] from the model's own score rows and Python sets of the known quadruples."""
    by_query: dict[str, dict] = {"tail": defaultdict(set), "head": defaultdict(set)}
    for h, r, t, tau in known.tolist():
        key = (h, r, tau) if setting == "time-aware" else (h, r)
        by_query["tail"][key].add(t)
        by_query["head"][(r, t, tau) if setting == "time-aware" else (r, t)].add(h)
    out = {side: {"optimistic": [], "pessimistic": [], "num_candidates": []} for side in ("head", "tail")}
    with torch.no_grad():
        tails = model.score_t(torch.as_tensor(evaluated[:, [0, 1, 3]])).double().numpy()
        if inverse is None:
            heads = model.score_h(torch.as_tensor(evaluated[:, [1, 2, 3]])).double().numpy()
        else:
            rows = np.stack([evaluated[:, 2], evaluated[:, 1] + inverse, evaluated[:, 3]], axis=1)
            heads = model.score_t(torch.as_tensor(rows)).double().numpy()
    for i, (h, r, t, tau) in enumerate(evaluated.tolist()):
        for side, scores, true, key in (
            ("tail", tails[i], t, (h, r, tau) if setting == "time-aware" else (h, r)),
            ("head", heads[i], h, (r, t, tau) if setting == "time-aware" else (r, t)),
        ):
            keep = np.ones(len(scores), dtype=bool)
            if setting != "raw":
                keep[list(by_query[side][key] - {true})] = False
            keep[true] = False
            others = scores[keep]
            out[side]["optimistic"].append(1 + int((others > scores[true]).sum()))
            out[side]["pessimistic"].append(1 + int((others >= scores[true]).sum()))
            out[side]["num_candidates"].append(1 + int(keep.sum()))
    return {side: {k: np.asarray(v) for k, v in fields.items()} for side, fields in out.items()}


@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("name", ["ICEWS14", "ICEWS14s"])
def test_real_temporal_data_ranks_as_the_numpy_reference(name: str, inverse: bool) -> None:
    data = load_temporal_tsv(shared(name), unseen="keep")
    relations = data.num_relations * (2 if inverse else 1)
    model = IntegerTNT(data.num_entities, relations, data.num_times, seed=1)
    rows = torch.randperm(len(data.test), generator=torch.Generator().manual_seed(2))[:120]
    evaluated = data.test[rows]
    rest = torch.ones(len(data.test), dtype=torch.bool)
    rest[rows] = False
    filters = [data.train, data.valid, data.test[rest]]
    known = torch.cat([evaluated, *filters]).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        results = TemporalRankBasedEvaluator(filtered="all", batch_size=50).evaluate(
            model, evaluated, additional_filter_quadruples=filters, use_tqdm=False,
            inverse_relations=data.num_relations if inverse else None,
        )  # fmt: skip
    for setting, got in (("time-aware", results), ("static", results.static), ("raw", results.raw)):
        expected = numpy_reference(model, evaluated.numpy(), known, setting, data.num_relations if inverse else None)
        assert_same_ranks(got.records, expected)
    assert results.raw["mrr"] < results["mrr"] < results.static["mrr"]


def test_the_loader_reads_quadruples_in_time_order_and_refuses_the_other_kind(tmp_path: Path) -> None:
    folder = tmp_path / "tkg"
    folder.mkdir()
    rows = {"train": [("a", "r", "b", "2014-01-10"), ("b", "r", "c", "2014-01-02")],
            "valid": [("a", "s", "c", "2014-02-01")], "test": [("c", "r", "a", "2014-03-01")]}  # fmt: skip
    for split, lines in rows.items():
        text = "# a comment\nhead\trelation\ttail\ttime\n" + "".join("\t".join(line) + "\n" for line in lines)
        with gzip.open(folder / f"{split}.txt.gz", "wt", encoding="utf-8") as handle:
            handle.write(text)
    data = load_temporal_tsv(folder)
    assert data.time_labels == ["2014-01-02", "2014-01-10", "2014-02-01", "2014-03-01"]
    assert data.train.tolist() == [[0, 0, 1, 1], [1, 0, 2, 0]]
    assert data.test.tolist() == [[2, 0, 0, 3]]
    assert data.evaluation_kwargs("test")["additional_filter_quadruples"][1] is data.valid
    with pytest.raises(ValueError, match=r"got 4: a file of \(head, relation, tail, time\) quadruples is read by"):
        load_tsv_dataset(folder)
    triples = tmp_path / "triples"
    triples.mkdir()
    for split in ("train", "valid", "test"):
        (triples / f"{split}.txt").write_text("a\tr\tb\n")
    with pytest.raises(ValueError, match=r"got 3: a file of \(head, relation, tail\) triples is read by"):
        load_temporal_tsv(triples)


def test_time_order_sorts_numbers_and_iso_times_and_refuses_a_mix() -> None:
    assert time_order(["10", "9", "100"]) == ["9", "10", "100"]
    assert time_order(["2014-01-02T06:00:00", "2014-01-02", "2013-12-31"]) == [
        "2013-12-31", "2014-01-02", "2014-01-02T06:00:00"]  # fmt: skip
    with pytest.raises(ValueError, match="'3' is a number and '2014-01-01' a date"):
        time_order(["2014-01-01", "3"])


def field_sort_ranks(model, evaluated: np.ndarray, known: np.ndarray) -> dict[str, np.ndarray]:
    """Time-aware ranks by the field's procedure (tests/helpers/field_ranking.py): the other answers known at the
    query's time overwritten with -1e7, then torch.sort's position of the answer."""
    from tests.helpers import field_ranking

    answers_of: dict[str, dict] = {"tail": defaultdict(set), "head": defaultdict(set)}
    for h, r, t, tau in known.tolist():
        answers_of["tail"][(h, r, tau)].add(t)
        answers_of["head"][(r, t, tau)].add(h)
    out = {}
    with torch.no_grad():
        rows = torch.as_tensor(evaluated)
        for side, scores, column, key in (("tail", model.score_t(rows[:, [0, 1, 3]]), 2, (0, 1, 3)),
                                          ("head", model.score_h(rows[:, [1, 2, 3]]), 0, (1, 2, 3))):  # fmt: skip
            answers = rows[:, column]
            others = [(i, e) for i, row in enumerate(evaluated.tolist())
                      for e in answers_of[side][tuple(row[k] for k in key)] if e != row[column]]  # fmt: skip
            masked = field_ranking.filtered_scores(scores.float(), answers, torch.tensor(others).view(-1, 2))
            out[side] = field_ranking.sort_rank(masked, answers).numpy()
    return out


@pytest.mark.parametrize("name", ["ICEWS14", "ICEWS14s"])
def test_the_fields_sort_based_ranking_on_real_data(name: str) -> None:
    """On 300 test quadruples, time-aware: a float TNTComplEx (no ties) gets the same ranks from the field's
    sort-based procedure as from kgeval; an integer model (heavy ties) gets ranks between kgeval's optimistic and
    pessimistic ones -- different from the realistic rank on most tied tasks."""
    from kgeval.models import TNTComplEx

    data = load_temporal_tsv(shared(name), unseen="keep")
    rows = torch.randperm(len(data.test), generator=torch.Generator().manual_seed(3))[:300]
    evaluated = data.test[rows]
    known = torch.cat([data.train, data.valid, data.test]).numpy()
    filters = [data.train, data.valid, data.test]
    untied = TNTComplEx(data.num_entities, data.num_relations, data.num_times, dim=16, seed=4).eval()
    untied.trained_times[:] = True
    tied = IntegerTNT(data.num_entities, data.num_relations, data.num_times, seed=5)
    for model, ties in ((untied, False), (tied, True)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            results = TemporalRankBasedEvaluator(fast_path=False).evaluate(
                model, evaluated, additional_filter_quadruples=filters, use_tqdm=False)  # fmt: skip
        from tests.helpers.ranks import ranks_by_side

        got = ranks_by_side(results.records)
        field = field_sort_ranks(model, evaluated.numpy(), known)
        for side in ("head", "tail"):
            optimistic, pessimistic = got[side]["optimistic"], got[side]["pessimistic"]
            assert np.all((optimistic <= field[side]) & (field[side] <= pessimistic))
            if not ties:
                np.testing.assert_array_equal(field[side], optimistic)
                np.testing.assert_array_equal(optimistic, pessimistic)
            else:
                tied_tasks = pessimistic > optimistic
                assert tied_tasks.sum() > 50
                assert np.mean(field[side][tied_tasks] != (optimistic + pessimistic)[tied_tasks] / 2) > 0.5


def test_completion_on_a_random_split_of_icews14() -> None:
    """Interpolation: ICEWS14's quadruples split at random, so every test time is a training time. The time-aware
    filter then removes training answers of the query's own time (on the forecasting split it never does: no
    training quadruple shares a test time), TNTComplEx scores every test time with its trained time embedding, and
    kgeval's ranks equal the numpy reference in every setting."""
    from kgeval.models import TNTComplEx
    from kgeval.models.training import train_model

    data = load_temporal_tsv(shared("ICEWS14"), unseen="keep")
    every = torch.cat([data.train, data.valid, data.test])
    order = torch.randperm(len(every), generator=torch.Generator().manual_seed(6))
    train, test = every[order[:-200]], every[order[-200:]]
    assert set(test[:, 3].tolist()) <= set(train[:, 3].tolist())
    assert not set(data.test[:, 3].tolist()) & set(data.train[:, 3].tolist())  # the forecasting split
    train_times = {(h, r, tau) for h, r, _, tau in train.tolist()}
    assert sum((h, r, tau) in train_times for h, r, _, tau in test.tolist()) > 20
    model = TNTComplEx(data.num_entities, data.num_relations, data.num_times, dim=8, seed=7)
    train_model(model, train[:20000], num_epochs=1, batch_size=1000, use_tqdm=False)
    model.eval()
    assert bool(model.trained_times[test[:, 3]].all())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        results = TemporalRankBasedEvaluator(filtered="all", fast_path=False).evaluate(
            model, test, additional_filter_quadruples=[train], use_tqdm=False)  # fmt: skip
    known = every[torch.cat([order[:-200], order[-200:]])].numpy()
    for setting, got in (("time-aware", results), ("static", results.static), ("raw", results.raw)):
        assert_same_ranks(got.records, numpy_reference(model, test.numpy(), known, setting))


def write_quadruples(folder: Path, rows: dict[str, list[tuple[str, ...]]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split, lines in rows.items():
        (folder / f"{split}.txt").write_text("".join("\t".join(line) + "\n" for line in lines))
    return folder


@pytest.mark.parametrize(
    ("spellings", "label", "value"),
    [(("2014-01-02", "2014-01-02T00:00:00", "2014-01-02T00:00:00+00:00"), "2014-01-02", 16072.0),
     (("1", "1.0", "1e0"), "1", 1.0)],
)  # fmt: skip
def test_one_instant_written_several_ways_is_one_time(tmp_path: Path, spellings, label, value) -> None:
    """The time-aware filter treats one moment as one: every spelling of an instant maps to its id."""
    first, second, third = spellings
    later = "2014-01-03" if "-" in first else "2"
    data = load_temporal_tsv(write_quadruples(tmp_path / "tkg", {
        "train": [("a", "r", "b", first), ("b", "r", "c", second)], "valid": [("a", "r", "c", third)],
        "test": [("c", "r", "a", later)]}))  # fmt: skip
    assert data.num_times == 2
    assert data.train[:, 3].tolist() == [0, 0] and data.valid[:, 3].tolist() == [0]
    assert {data.time_to_id[spelling] for spelling in spellings} == {0}
    assert data.time_labels == [label, later]
    assert data.time_values.tolist() == [value, value + 1]
    # the filter sees them as one: (a, r, c) at the instant is known through its third spelling
    results = TemporalRankBasedEvaluator(filtered="time-aware").evaluate(
        ConstantScores(data.num_entities), data.train[:1], additional_filter_quadruples=[data.valid],
        use_tqdm=False)  # fmt: skip
    assert results.records.num_candidates[results.records.side == 1].tolist() == [data.num_entities - 1]


class ConstantScores(torch.nn.Module):
    """Every candidate scores 0: only the filter decides the ranks' candidate counts."""

    def __init__(self, num_entities: int) -> None:
        super().__init__()
        self.num_entities = num_entities

    def score_t(self, batch: torch.Tensor) -> torch.Tensor:
        return torch.zeros(len(batch), self.num_entities)

    def score_h(self, batch: torch.Tensor) -> torch.Tensor:
        return torch.zeros(len(batch), self.num_entities)


@pytest.mark.parametrize(
    ("times", "granularity", "steps"),
    [(("1", "2", "3", "10", "40"), 1.0, [0, 1, 2, 9, 39]),
     (("0", "24", "48", "96"), 24.0, [0, 1, 2, 4]),
     (("2014-01-01", "2014-01-02", "2014-01-05"), 1.0, [0, 1, 4]),
     (("2014-01-01T00:00:00", "2014-01-01T06:00:00", "2014-01-01T18:00:00"), 0.25, [0, 1, 3]),
     (("0.5", "1.0", "2.5"), 0.5, [0, 1, 4])],
)  # fmt: skip
def test_time_values_and_steps_keep_the_gaps_the_positions_lose(tmp_path: Path, times, granularity, steps) -> None:
    rows = [("a", "r", "b", time) for time in times]
    data = load_temporal_tsv(write_quadruples(tmp_path / "gaps", {"train": rows, "valid": rows[:1],
                                                                  "test": rows[-1:]}))  # fmt: skip
    assert data.train[:, 3].tolist() == list(range(len(times)))  # positions: the filter's keys
    assert data.times.granularity == granularity
    assert data.time_steps.tolist() == steps


@pytest.mark.parametrize(
    ("times", "offsets", "granularity"),
    [(("9007199254740992", "9007199254740993", "9007199254740995"), [0, 1, 3], 1.0),  # beyond float64's integers
     (("1700000000000000000", "1700000000000000001", "1700000000000000100"), [0, 1, 100], 1.0),  # epoch nanoseconds
     (("0.1", "0.10000000000000001"), [0, 1], 1e-17),  # 17 significant digits: two instants
     (("0.1", "0.2", "0.3"), [0, 1, 2], 0.1),  # float64 would make the steps 1 and 1.0000000000000002
     (("0", "0.5", "1e-9"), [0, 1, 500_000_000], 1e-9),
     (("2014-01-01", "2014-01-01T01:00", "2014-01-03"), [0, 1, 48], 1 / 24),  # whole hours, not 48.0000000007
     (("2014-01-01", "2014-01-01T00:00:00.000001"), [0, 1], 1 / 86_400_000_000)],
)  # fmt: skip
def test_instants_are_exact_and_their_steps_whole(times, offsets, granularity) -> None:
    """Distinct labels that float64 would merge stay distinct times; steps are counted exactly."""
    from kgeval.datasets.temporal import time_axis

    axis, ids = time_axis(times)
    assert sorted(ids.values()) == list(range(len(times)))  # every label its own time
    assert list(axis.offsets) == offsets
    assert axis.steps.tolist() == offsets
    assert axis.granularity == pytest.approx(granularity, rel=1e-15)


def test_eight_digit_dates_are_read_as_dates_and_said_so(tmp_path: Path) -> None:
    """GDELT's and ICEWS's raw YYYYMMDD labels: New Year's Eve is one day before New Year's Day, not 8,870."""
    from kgeval.datasets.temporal import time_axis

    days = ("20141230", "20141231", "20150101", "20150102")
    rows = [("a", "r", "b", day) for day in days]
    data = load_temporal_tsv(write_quadruples(tmp_path / "ymd", {"train": rows, "valid": rows[:1],
                                                                 "test": rows[-1:]}))  # fmt: skip
    assert data.time_steps.tolist() == [0, 1, 2, 3]
    assert data.times.reading == "dates written YYYYMMDD" and "read as dates written YYYYMMDD" in data.summary()
    assert data.time_to_id["20150101"] == data.time_to_id.get("2015-01-01", 2) == 2
    axis, _ = time_axis(["20141230", "20141299"])  # not every label a date: numbers
    assert axis.reading == "numbers" and list(axis.offsets) == [0, 1]
    axis, ids = time_axis(["20140102", "2014-01-02"])  # one instant written two ways
    assert set(ids.values()) == {0}


def test_given_time_ids_find_every_spelling_of_their_instants(tmp_path: Path) -> None:
    """A checkpoint records one label per time; the files may spell a time otherwise (1.0 for 1): matched by the
    instant, and the axis (values, steps) rebuilt from the given labels."""
    from kgeval.datasets.temporal import given_time_ids

    rows = {"train": [("a", "r", "b", "1"), ("b", "r", "c", "1.0"), ("c", "r", "a", "2")],
            "valid": [("a", "r", "c", "10")], "test": [("c", "r", "b", "40.0")]}  # fmt: skip
    folder = write_quadruples(tmp_path / "spell", rows)
    first = load_temporal_tsv(folder)
    given = {label: index for index, label in enumerate(first.time_labels)}
    again = load_temporal_tsv(folder, time_to_id=given)
    assert again.train.tolist() == first.train.tolist() and again.test.tolist() == first.test.tolist()
    assert again.time_steps.tolist() == first.time_steps.tolist() == [0, 1, 9, 39]  # the gaps, not the positions
    assert given_time_ids({"2": 1, "1": 0}, ["2.0"])[0]["2.0"] == 1
    assert given_time_ids({"1": 0, "2": 5}, [])[1] is None  # ids with a gap: no axis (nothing measures the gap)
    with pytest.raises(ValueError, match="'1' and '1.0' name one instant but have the ids 0 and 1"):
        given_time_ids({"1": 0, "1.0": 1}, [])
    with pytest.raises(ValueError, match="'1' and '2' name two instants but share the id 0"):
        given_time_ids({"1": 0, "2": 0, "3": 1}, [])
    with pytest.raises(ValueError, match="do not follow time order: '2' has the id 0 and the earlier '1' the id 1"):
        given_time_ids({"2": 0, "1": 1}, [])


def test_time_ids_out_of_time_order_are_refused_before_a_baseline_sees_the_future(tmp_path: Path) -> None:
    """A hand-made time2id numbered as text ("10" before "9") was accepted, and the recurrency baseline then took
    a fact of time 10 for the past of time 9 (0.9901 where nothing precedes: 0)."""
    from kgeval.models import RecurrencyBaseline

    rows = {"train": [("a", "r", "b", "10"), ("c", "r", "d", "9")], "valid": [("a", "r", "c", "9")],
            "test": [("a", "r", "b", "9")]}  # fmt: skip
    folder = write_quadruples(tmp_path / "order", rows)
    with pytest.raises(ValueError, match="do not follow time order: '10' has the id 0 and the earlier '9' the id 1"):
        load_temporal_tsv(folder, time_to_id={"10": 0, "9": 1})
    dataset = load_temporal_tsv(folder)  # its own ids: 9 -> 0, 10 -> 1
    a, b, r = dataset.entity_to_id["a"], dataset.entity_to_id["b"], dataset.relation_to_id["r"]
    scores = RecurrencyBaseline.before(dataset, "test").score_t(torch.tensor([[a, r, dataset.time_to_id["9"]]]))
    assert scores[0, b] == 0.0  # (a, r, b) holds at 10 only, after the query's time


@pytest.mark.parametrize(
    ("times", "message"),
    [(["x", "1", "2"], "train.txt line 1: the time label 'x' is neither a number nor an ISO date"),
     (["20140101", "2014-01-02", "abc"], "train.txt line 3: the time label 'abc' is neither"),
     (["1", "2", "2014-01-03"], "train.txt line 3: time labels must all be numbers or all ISO dates / timestamps "
                                "(to be put in time order): '1' is a number and '2014-01-03' a date"),
     (["2014-01-02T00:00:00.0000001", "2014-01-02T00:00:00.0000002", "2014-01-03"],
      "train.txt line 1: the time label '2014-01-02T00:00:00.0000001' is finer than a microsecond")],
)  # fmt: skip
def test_a_time_label_off_the_axis_is_named_with_its_file_and_line(tmp_path: Path, times, message) -> None:
    """Before: "'x' and 'x' are not of one kind", the valid labels blamed instead of 'abc', no file or line, and
    two timestamps 100 ns apart silently one instant."""
    rows = {"train": [("a", "r", "b", time) for time in times], "valid": [("a", "r", "b", times[0])],
            "test": [("b", "r", "a", times[0])]}  # fmt: skip
    folder = write_quadruples(tmp_path / "odd", rows)
    with pytest.raises(ValueError, match=re.escape(message)):
        load_temporal_tsv(folder)


def test_nanosecond_timestamps_with_zero_digits_read_exactly(tmp_path: Path) -> None:
    """pandas writes nanoseconds: digits beyond the sixth that are zeros cut nothing."""
    rows = {
        "train": [("a", "r", "b", "2014-01-02 00:00:00.000000000"), ("b", "r", "a", "2014-01-02T00:00:00")],
        "valid": [("a", "r", "b", "2014-01-03 00:00:00.000001000")],
        "test": [("b", "r", "a", "2014-01-04")],
    }
    dataset = load_temporal_tsv(write_quadruples(tmp_path / "ns", rows))  # fmt: skip
    assert dataset.num_times == 3 and dataset.train[:, 3].tolist() == [0, 0]


# -- RE-Net-format folders (YAGO, WIKI, ICEWS18, GDELT as the forecasting field distributes them) --------------------


def write_renet_folder(folder: Path, declared_times: int, step: int = 1, seed: int = 40) -> dict[str, np.ndarray]:
    """A RE-Net-format folder as the field's are: integer ids padded with spaces, a fifth column of zeros, entity
    ids with two more columns (dates), ids declared in stat.txt that no split uses, and times ``0, step, 2 step``."""
    generator = np.random.default_rng(seed)
    entities, relations = 30, 4
    folder.mkdir(parents=True)
    (folder / "stat.txt").write_text(f"{entities + 3}\t{relations}\t{declared_times}")  # 3 entities never used
    (folder / "entity2id.txt").write_text("".join(f"<E{i}>\t{i}\t19{i:02d}-##-##\t####-##-##\n"
                                                  for i in reversed(range(entities + 3))))  # fmt: skip
    (folder / "relation2id.txt").write_text("".join(f"rel {i}\t{i}\n" for i in range(relations)))
    splits = {}
    for split, (first, last, count) in {"train": (0, 8, 300), "valid": (8, 10, 40), "test": (10, 12, 50)}.items():
        rows = np.column_stack([generator.integers(0, entities, count), generator.integers(0, relations, count),
                                generator.integers(0, entities, count),
                                generator.integers(first, last, count) * step])  # fmt: skip
        splits[split] = rows
        (folder / f"{split}.txt").write_text("".join(f"{h:<5}\t{r:<3}\t{t}\t{tau}\t0\n" for h, r, t, tau in rows))
    return splits


@pytest.mark.parametrize(("declared_times", "step"), [(12, 1), (15, 1), (0, 24)])
def test_a_renet_folder_loads_as_distributed_with_its_declared_counts(tmp_path: Path, declared_times, step) -> None:
    from kgeval.datasets import load_any_dataset, load_renet_folder

    written = write_renet_folder(tmp_path / "renet", declared_times, step)
    data = load_renet_folder(tmp_path / "renet")
    assert (data.num_entities, data.num_relations) == (33, 4)  # stat.txt's counts, 3 entities in no split
    assert data.entity_to_id["<E7>"] == 7 and data.relation_to_id["rel 2"] == 2
    for split, rows in written.items():
        expected = rows.copy()
        expected[:, 3] //= step  # ids: the declared times, or the positions of the distinct times
        assert getattr(data, split).tolist() == expected.tolist()
    assert data.times is not None and data.times.granularity == (1 if declared_times else step)
    assert data.num_times == (declared_times or 12)  # declared ids kept where no split uses them (12..14)
    assert data.time_steps.tolist() == list(range(declared_times or 12))
    notes = "\n".join(data.notes)
    assert "entity2id.txt: label, id (2 more column(s) left out)" in notes
    assert "train.txt: head, relation, tail, time ids (1 more column(s) left out)" in notes
    assert type(load_any_dataset(tmp_path / "renet")) is type(data)


def test_a_renet_folders_evaluation_equals_the_fields_definitions(tmp_path: Path) -> None:
    """Time-aware, static and raw ranks of a RE-Net folder's test split equal the numpy reference of the field's
    definitions, every declared entity a candidate."""
    from kgeval.datasets import load_renet_folder

    write_renet_folder(tmp_path / "renet", 12)
    data = load_renet_folder(tmp_path / "renet")
    model = IntegerTNT(data.num_entities, data.num_relations, data.num_times, seed=3)
    known = torch.cat([data.test, data.train, data.valid]).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        results = TemporalRankBasedEvaluator(filtered="all").evaluate(model, use_tqdm=False,
                                                                      **data.evaluation_kwargs("test"))  # fmt: skip
    for setting, got in (("time-aware", results), ("static", results.static), ("raw", results.raw)):
        assert_same_ranks(got.records, numpy_reference(model, data.test.numpy(), known, setting))
    assert set(results.records.num_candidates[results.records.side == 1].tolist()) <= set(range(1, 34))


def test_a_renet_folder_with_uneven_lines_and_other_ids(tmp_path: Path) -> None:
    """A trailing tab on some lines only is read (pandas alone refuses it); ids given to read a RE-Net folder
    with (a checkpoint's) must be the id files' own."""
    from kgeval.datasets import load_any_dataset, load_renet_folder

    written = write_renet_folder(tmp_path / "renet", 12)
    train = (tmp_path / "renet" / "train.txt").read_text().splitlines()
    (tmp_path / "renet" / "train.txt").write_text("".join(line + ("\t" if i % 3 else "") + "\n"
                                                          for i, line in enumerate(train)))  # fmt: skip
    data = load_renet_folder(tmp_path / "renet")
    assert data.train.tolist() == written["train"].tolist()
    entities = dict(data.entity_to_id)
    assert load_any_dataset(tmp_path / "renet", entity_to_id=entities).entity_to_id == entities
    entities["<E1>"], entities["<E2>"] = entities["<E2>"], entities["<E1>"]
    with pytest.raises(ValueError, match="RE-Net folder whose ids are its id files' own; the given entity_to_id "
                                         "differs from them \\(2 of 33 labels"):  # fmt: skip
        load_any_dataset(tmp_path / "renet", entity_to_id=entities)


def test_positions_that_happen_to_number_the_declared_times_are_called_positions(tmp_path: Path) -> None:
    """stat.txt declares 3 times; the splits use the times 100, 200 and 300, three distinct times outside the declared
    ids: their ids are positions, and the note says so (it said "the declared ones", as their count matched)."""
    from kgeval.datasets import load_renet_folder

    folder = tmp_path / "renet"
    write_renet_folder(folder, 3)
    for split, time in (("train", 100), ("valid", 200), ("test", 300)):
        (folder / f"{split}.txt").write_text(f"0\t0\t1\t{time}\n1\t1\t2\t{time}\n")
    data = load_renet_folder(folder)
    assert data.time_labels == ["100", "200", "300"] and data.test[:, 3].tolist() == [2, 2]
    assert "times: 3 ids, the positions of the distinct times (values 100..300, step 100)" in data.notes


@pytest.mark.parametrize(
    ("change", "message"),
    [(lambda f: (f / "stat.txt").write_text("40\t4\t12"), r"entity2id\.txt: 33 entity ids .* stat\.txt declares 40"),
     (lambda f: (f / "test.txt").write_text("1\t2\tx\t3\t0\n"), r"test\.txt line 1: 'x' is not an integer id"),
     (lambda f: (f / "valid.txt").write_text("1\t9\t3\t3\t0\n"), r"valid\.txt line 1: ids \[1, 9, 3\] outside"),
     (lambda f: (f / "test.txt").write_text("0\t0\t1\t0\n\n  \n\n0\t0\t1\tX\n"),
      r"test\.txt line 5: 'X' is not an integer id"),  # pandas skips the blank lines: line 5 is its row 2
     (lambda f: (f / "valid.txt").write_text("\n\n0\t0\t1\t0\n0\t0\t99\t0\n"),
      r"valid\.txt line 4: ids \[0, 0, 99\] outside"),
     (lambda f: (f / "test.txt").write_text("0\t0\t1\t99999999999999999999\n"),
      r"test\.txt line 1: '99999999999999999999' is not an integer id of 64 bits"),  # was a bare OverflowError
     (lambda f: (f / "test.txt").write_text(""), r"test\.txt holds no quadruple"),
     (lambda f: (f / "relation2id.txt").unlink(), r"is not a RE-Net-format folder: no relation2id\.txt"),
     (lambda f: ((f / "stat.txt").unlink(), (f / "relation2id.txt").write_text("a\t0\nb\t2\n")),
      r"relation2id\.txt: 2 relation ids \(2 distinct\), but 2 lines: each id 0\.\.1 must appear once")],
)  # fmt: skip
def test_a_broken_renet_folder_is_refused_naming_the_file(tmp_path: Path, change, message) -> None:
    from kgeval.datasets import load_renet_folder

    write_renet_folder(tmp_path / "renet", 12)
    change(tmp_path / "renet")
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        load_renet_folder(tmp_path / "renet")


#: RE-Net-format folders of the field's datasets, where a machine has them (never shipped: set KGEVAL_RENET_DATA to
#: a folder holding YAGO/, WIKI/, ICEWS18/, GDELT/ as RE-Net and RE-GCN distribute them)
RENET_DATA = os.environ.get("KGEVAL_RENET_DATA")
#: their declared (entities, relations) and training quadruples
RENET_DATASETS = {"YAGO": (10_623, 10, 161_540), "WIKI": (12_554, 24, 539_286), "ICEWS18": (23_033, 256, 373_018),
                  "GDELT": (7_691, 240, 1_734_399)}  # fmt: skip


@pytest.mark.parametrize("name", list(RENET_DATASETS))
def test_the_fields_renet_folders_load_and_rank_as_the_numpy_reference(name: str) -> None:
    from kgeval.datasets import load_renet_folder

    if RENET_DATA is None or not (Path(RENET_DATA) / name).is_dir():
        pytest.skip(f"no {name} RE-Net folder here (KGEVAL_RENET_DATA)")
    data = load_renet_folder(Path(RENET_DATA) / name)
    entities, relations, train = RENET_DATASETS[name]
    assert (data.num_entities, data.num_relations, len(data.train)) == (entities, relations, train)
    model = IntegerTNT(data.num_entities, data.num_relations, data.num_times, seed=5)
    rows = torch.randperm(len(data.test), generator=torch.Generator().manual_seed(6))[:100]
    evaluated = data.test[rows]
    rest = torch.ones(len(data.test), dtype=torch.bool)
    rest[rows] = False
    filters = [data.train, data.valid, data.test[rest]]
    known = torch.cat([evaluated, *filters]).numpy()
    results = TemporalRankBasedEvaluator(filtered="all").evaluate(
        model, evaluated, additional_filter_quadruples=filters, use_tqdm=False
    )
    for setting, got in (("time-aware", results), ("static", results.static), ("raw", results.raw)):
        assert_same_ranks(got.records, numpy_reference(model, evaluated.numpy(), known, setting))


@pytest.mark.parametrize("policy", ["keep", "merge"])
def test_a_duplicate_policy_counts_repeated_rows_in_every_loader(tmp_path: Path, policy: str) -> None:
    """RE-GCN keeps repeated quadruples, the nec-research framework merges them: either, counted per split. Two
    spellings of one instant are one quadruple."""
    from kgeval.datasets import load_renet_folder, load_tsv_dataset
    from kgeval.datasets.labelled import DuplicatesWarning

    rows = {
        "train": [("a", "r", "b", "1"), ("a", "r", "b", "1.0"), ("b", "r", "c", "2")],
        "valid": [("a", "r", "c", "3")],
        "test": [("c", "r", "a", "4"), ("c", "r", "a", "4"), ("a", "r", "b", "4")],
    }
    folder = write_quadruples(tmp_path / "tkg", rows)
    with pytest.warns(DuplicatesWarning, match=r"train\.txt: 1 of 3; .*test\.txt: 1 of 3"):
        data = load_temporal_tsv(folder, duplicates=policy)
    assert (len(data.train), len(data.test)) == ((3, 3) if policy == "keep" else (2, 2))
    assert len({tuple(row) for row in data.test.tolist()}) == 2  # merged or not, two distinct quadruples
    triples = tmp_path / "triples"
    triples.mkdir()
    for split, lines in rows.items():
        (triples / f"{split}.txt").write_text("".join("\t".join(line[:3]) + "\n" for line in lines))
    with pytest.warns(DuplicatesWarning, match=r"triples that repeat .*train\.txt: 1 of 3; .*test\.txt: 1 of 3"):
        static = load_tsv_dataset(triples, duplicates=policy)
    assert len(static.test) == (3 if policy == "keep" else 2)
    renet = tmp_path / "renet"
    write_renet_folder(renet, 12)
    with (renet / "test.txt").open("a") as handle:
        handle.write((renet / "test.txt").read_text().splitlines()[0] + "\n")
    with pytest.warns(DuplicatesWarning, match=r"test\.txt: 1 of 51"):
        assert len(load_renet_folder(renet, duplicates=policy).test) == (51 if policy == "keep" else 50)


def test_no_warning_without_duplicates_and_a_bad_policy_is_named(tmp_path: Path) -> None:
    from kgeval.datasets.labelled import DuplicatesWarning

    folder = write_quadruples(
        tmp_path / "tkg",
        {
            "train": [("a", "r", "b", "1"), ("b", "r", "a", "1")],
            "valid": [("a", "r", "b", "2")],
            "test": [("a", "r", "b", "3")],
        },
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", DuplicatesWarning)
        load_temporal_tsv(folder)
    with pytest.raises(ValueError, match="duplicates must be one of"):
        load_temporal_tsv(folder, duplicates="drop")


def test_a_header_naming_the_columns_in_any_order_is_followed(tmp_path: Path) -> None:
    """TGB-style files: ``ts,head,tail,relation_type`` -- the header names the columns, the loader reads each where
    it is, and the notes say how."""
    folder = tmp_path / "tgb"
    folder.mkdir()
    rows = {"train": [("1", "a", "b", "likes"), ("2", "b", "c", "likes")], "valid": [("3", "a", "c", "hates")],
            "test": [("4", "c", "a", "likes")]}  # fmt: skip
    for split, lines in rows.items():
        (folder / f"{split}.csv").write_text("ts,head,tail,relation_type\n" + "".join(",".join(line) + "\n"
                                                                                    for line in lines))  # fmt: skip
    for split in rows:
        (folder / f"{split}.csv").rename(folder / f"{split}.txt")
    data = load_temporal_tsv(folder, sep=",", unseen="keep")
    assert data.entity_to_id == {"a": 0, "b": 1, "c": 2} and data.relation_to_id == {"hates": 0, "likes": 1}
    assert data.train.tolist() == [[0, 1, 1, 0], [1, 1, 2, 1]] and data.test.tolist() == [[2, 1, 0, 3]]
    named = "columns ts, head, tail, relation_type read as head, relation, tail, time"
    assert any(named in note for note in data.notes)
    two = [("a", "r", "b", "1"), ("b", "r", "a", "2")]
    plain = write_quadruples(tmp_path / "plain", {"train": two, "valid": two, "test": two})
    assert any("fields read as head, relation, tail, time, in that order" in note
               for note in load_temporal_tsv(plain).notes)  # fmt: skip
