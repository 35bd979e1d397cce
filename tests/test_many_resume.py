"""Resumable many-graph runs (kgeval.many.evaluate_many's results_dir, kgeval evaluate-many --results-dir): a run
stopped after graph k resumes without evaluating graphs 1..k again (the model's calls counted) and ends with the
uninterrupted run's table and results; a graph whose file was made with other inputs is evaluated again with a
warning naming what differs, the others are taken as they are."""

from __future__ import annotations

import json
import shutil
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval._fingerprints import dataset_content_fingerprint
from kgeval.datasets import load_dataset
from kgeval.exceptions import ResumeWarning
from kgeval.graphs import Graph
from kgeval.many import evaluate_many
from kgeval.models.graph_baseline import NeighbourhoodBaseline
from tests.support.many_graphs import expected_table, make_folders


@pytest.fixture
def folders(tmp_path: Path) -> list[Path]:
    return make_folders(tmp_path / "data")


class Stop(RuntimeError):
    """The interruption of a run (as a killed process would leave it)."""


class CountingBaseline(NeighbourhoodBaseline):
    """The baseline, counting its score calls per graph in ``calls`` and raising :class:`Stop` on graph ``stop``."""

    def __init__(self, name: str, calls: Counter[str], stop: str | None = None) -> None:
        super().__init__()
        self.name, self.calls, self.stop = name, calls, stop

    def score_t(self, hr_batch: torch.Tensor, *, graph: Graph) -> torch.Tensor:
        self.count()
        return super().score_t(hr_batch, graph=graph)

    def score_h(self, rt_batch: torch.Tensor, *, graph: Graph) -> torch.Tensor:
        self.count()
        return super().score_h(rt_batch, graph=graph)

    def count(self) -> None:
        self.calls[self.name] += 1
        if self.name == self.stop:
            raise Stop(f"stopped on {self.name}")


def counting(calls: Counter[str], stop: str | None = None) -> Any:
    return lambda dataset: CountingBaseline(dataset.name, calls, stop)


#: the model calls of the probe kgeval scores every graph's model with before taking or evaluating the graph (what
#: the model scores identifies it: kgeval._fingerprints.ScoreSignature): one score_t and one score_h of two queries
PROBE_CALLS = 2


def evaluated(calls: Counter[str]) -> set[str]:
    """The graphs whose model was called for more than the probe: the graphs evaluated."""
    return {name for name, count in calls.items() if count > PROBE_CALLS}


def probed_only(calls: Counter[str], names: list[str]) -> bool:
    """Whether the model of each of ``names`` was called for the probe only."""
    return all(calls[name] == PROBE_CALLS for name in names)


def without_seconds(table: pd.DataFrame) -> pd.DataFrame:
    return table.drop(columns="seconds")


@pytest.mark.parametrize("done", [1, 3])
def test_an_interrupted_run_resumes_where_it_stopped(folders: list[Path], tmp_path: Path, done: int) -> None:
    names = [folder.name for folder in folders]
    uninterrupted = evaluate_many(counting(Counter()), folders, use_tqdm=False)
    results_dir = tmp_path / "results"
    first: Counter[str] = Counter()
    with pytest.raises(Stop):
        evaluate_many(counting(first, stop=names[done]), folders, use_tqdm=False, results_dir=results_dir,
                      model_id="counting baseline")  # fmt: skip
    assert set(first) == set(names[: done + 1])  # graphs 1..done finished, done + 1 started
    assert len(list(results_dir.glob("*.json"))) == done and not list(results_dir.glob(".*"))  # no temporary left

    second: Counter[str] = Counter()
    resumed = evaluate_many(counting(second), folders, use_tqdm=False, results_dir=results_dir,
                            model_id="counting baseline")  # fmt: skip
    assert evaluated(second) == set(names[done:])  # the finished graphs are not evaluated again, only probed
    assert probed_only(second, names[:done])
    assert resumed.resumed == tuple(names[:done])
    pd.testing.assert_frame_equal(without_seconds(resumed.table), without_seconds(uninterrupted.table))
    pd.testing.assert_frame_equal(resumed.averages, uninterrupted.averages)
    for name in names:
        assert resumed.results[name] == uninterrupted.results[name]
        records, expected = resumed.results[name].records, uninterrupted.results[name].records
        assert records is not None and expected is not None and records.equals(expected)
    expected = expected_table(folders, "test")  # each graph's own single-graph evaluation
    for column in ("tasks", "mrr_pessimistic", "mrr_realistic", "hits@10_pessimistic", "tied"):
        assert list(resumed.table[column]) == list(expected[column]), column

    third: Counter[str] = Counter()  # everything is done: nothing evaluated, nothing warned
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = evaluate_many(counting(third), folders, use_tqdm=False, results_dir=results_dir,
                              model_id="counting baseline")  # fmt: skip
    assert evaluated(third) == set() and probed_only(third, names) and again.resumed == tuple(names)
    pd.testing.assert_frame_equal(again.table, resumed.table)  # the seconds too: read back


def test_a_file_of_other_inputs_is_evaluated_again_with_a_warning(folders: list[Path], tmp_path: Path) -> None:
    results_dir = tmp_path / "results"
    evaluate_many(counting(Counter()), folders, use_tqdm=False, results_dir=results_dir, model_id="a")
    files = {path.name: path.read_text(encoding="utf-8") for path in results_dir.glob("*.json")}

    calls: Counter[str] = Counter()  # another model: every graph again
    with pytest.warns(ResumeWarning) as caught:
        evaluate_many(counting(calls), folders, use_tqdm=False, results_dir=results_dir, model_id="b")
    assert evaluated(calls) == {folder.name for folder in folders}
    assert len(caught) == len(folders) and all("(model differ)" in str(w.message) for w in caught)
    assert {path.name for path in results_dir.glob("*.json")} == set(files)
    assert all(json.loads(path.read_text(encoding="utf-8"))["fingerprint"]["model"] == "b"
               for path in results_dir.glob("*.json"))  # fmt: skip

    changed = folders[3] / "test.txt"  # one graph's data changes: that graph alone again
    changed.write_text("\n".join(changed.read_text(encoding="utf-8").splitlines()[1:]) + "\n", encoding="utf-8")
    calls.clear()
    with pytest.warns(ResumeWarning, match=r"holds full0 evaluated with other inputs \(dataset content differ\)"):
        many = evaluate_many(counting(calls), folders, use_tqdm=False, results_dir=results_dir, model_id="b")
    assert evaluated(calls) == {"full0"} and "full0" not in many.resumed and len(many.resumed) == len(folders) - 1
    fresh = evaluate_many(NeighbourhoodBaseline(), folders, use_tqdm=False)
    pd.testing.assert_frame_equal(without_seconds(many.table), without_seconds(fresh.table))

    calls.clear()  # an evaluator with other ks, another split: every graph again, naming them
    with pytest.warns(ResumeWarning, match=r"\(evaluator differ\)"):
        evaluate_many(counting(calls), folders, use_tqdm=False, results_dir=results_dir, model_id="b",
                      evaluator=RankBasedEvaluator(ks=(1, 10)))  # fmt: skip
    assert len(evaluated(calls)) == len(folders)
    with pytest.warns(ResumeWarning, match=r"\(split differ\)"):
        evaluate_many(counting(calls), folders[:1], use_tqdm=False, results_dir=results_dir, model_id="b",
                      evaluator=RankBasedEvaluator(ks=(1, 10)), split="valid")  # fmt: skip


def test_sizes_and_devices_do_not_count_but_other_keywords_do(folders: list[Path], tmp_path: Path) -> None:
    results_dir, calls = tmp_path / "results", Counter[str]()
    evaluate_many(counting(calls), folders[:2], use_tqdm=False, results_dir=results_dir, model_id="m")
    calls.clear()
    evaluate_many(counting(calls), folders[:2], use_tqdm=False, results_dir=results_dir, model_id="m", batch_size=3,
                  slice_size=5, device="cpu")  # fmt: skip
    assert evaluated(calls) == set() and probed_only(calls, [folder.name for folder in folders[:2]])
    with pytest.warns(ResumeWarning, match=r"\(evaluate keywords differ\)"):
        tails = evaluate_many(counting(calls), folders[:2], use_tqdm=False, results_dir=results_dir, model_id="m",
                              targets=("tail",))  # fmt: skip
    assert evaluated(calls) == {folder.name for folder in folders[:2]}
    assert list(tails.table["tasks"]) == [len(load_dataset(folder).test) for folder in folders[:2]]


def test_the_default_identity_follows_the_model(folders: list[Path], tmp_path: Path) -> None:
    """Without model_id: a model object by its weights and settings, a factory by its code and closure."""
    results_dir = tmp_path / "results"
    baseline = NeighbourhoodBaseline()
    evaluate_many(baseline, folders[:2], use_tqdm=False, results_dir=results_dir)
    assert evaluate_many(NeighbourhoodBaseline(), folders[:2], use_tqdm=False,
                         results_dir=results_dir).resumed == (folders[0].name, folders[1].name)  # fmt: skip
    other = NeighbourhoodBaseline()
    other.sparse_products_from = 8  # a plain setting of the model
    with pytest.warns(ResumeWarning, match=r"\(model differ\)"):
        assert evaluate_many(other, folders[:2], use_tqdm=False, results_dir=results_dir).resumed == ()

    calls: Counter[str] = Counter()
    with pytest.warns(ResumeWarning, match=r"\(model differ\)"):  # a factory now: another model
        evaluate_many(counting(calls, stop="nowhere"), folders[:2], use_tqdm=False, results_dir=results_dir)
    calls.clear()
    assert evaluate_many(counting(calls, stop="nowhere"), folders[:2], use_tqdm=False,
                         results_dir=results_dir).resumed == (folders[0].name, folders[1].name)  # fmt: skip
    with pytest.warns(ResumeWarning, match=r"\(model differ\)"):  # the closure holds another value
        evaluate_many(counting(calls, stop="elsewhere"), folders[:2], use_tqdm=False, results_dir=results_dir)
    assert len(calls) == 2


def test_an_unreadable_file_is_evaluated_again_and_a_bad_folder_refused(folders: list[Path], tmp_path: Path) -> None:
    results_dir = tmp_path / "results"
    evaluate_many(NeighbourhoodBaseline(), folders[:1], use_tqdm=False, results_dir=results_dir, model_id="m")
    (path,) = results_dir.glob("*.json")
    path.write_text(path.read_text(encoding="utf-8")[:100], encoding="utf-8")  # cut short
    with pytest.warns(ResumeWarning, match="is no readable result of trans0"):
        many = evaluate_many(NeighbourhoodBaseline(), folders[:1], use_tqdm=False, results_dir=results_dir,
                             model_id="m")  # fmt: skip
    assert many.resumed == () and json.loads(path.read_text(encoding="utf-8"))["row"]["dataset"] == "trans0"
    with pytest.raises(ValueError, match="is a file; give a folder"):
        evaluate_many(NeighbourhoodBaseline(), folders[:1], use_tqdm=False, results_dir=path)
    with pytest.raises(TypeError, match="model_id must be a str"):
        evaluate_many(NeighbourhoodBaseline(), folders[:1], use_tqdm=False, results_dir=results_dir, model_id=3)


def test_the_dataset_content_fingerprint(folders: list[Path], tmp_path: Path) -> None:
    """Equal for the same files read from another folder, different for one changed triple, for every kind."""
    for folder in folders:
        copy = shutil.copytree(folder, tmp_path / "elsewhere" / folder.name)
        assert dataset_content_fingerprint(load_dataset(copy)) == dataset_content_fingerprint(load_dataset(folder))
        test_file = copy / "test.txt" if (copy / "test.txt").is_file() else copy / "inference_test.txt"
        lines = test_file.read_text(encoding="utf-8").splitlines()
        test_file.write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")  # one query fewer
        assert dataset_content_fingerprint(load_dataset(copy)) != dataset_content_fingerprint(load_dataset(folder))
    fingerprints = {dataset_content_fingerprint(load_dataset(folder)) for folder in folders}
    assert len(fingerprints) == len(folders)


def test_the_progress_bar_names_each_graph_read_back(folders: list[Path], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    results_dir = tmp_path / "results"
    evaluate_many(NeighbourhoodBaseline(), folders[:2], use_tqdm=False, results_dir=results_dir, model_id="m")
    capsys.readouterr()
    evaluate_many(NeighbourhoodBaseline(), folders, use_tqdm=True, results_dir=results_dir, model_id="m")
    lines = [line for line in capsys.readouterr().err.splitlines() if "resumed from" in line]
    assert [line.split(":")[0].split()[-1] for line in lines] == [folders[0].name, folders[1].name]
