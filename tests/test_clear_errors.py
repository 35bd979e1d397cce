"""Inputs that used to fail with raw torch / Python errors or tracebacks now get one clear message."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval.cli import main
from kgeval.models import DistMult
from tests.helpers.graphs import TableModel, quantised_table, random_graph

GRAPH = random_graph(0, num_entities=8, num_relations=2, num_triples=10, num_filter=5)
TABLE = quantised_table(0, 8, 2)


def evaluate(model=None, triples=None, **kwargs):
    model = TableModel(TABLE) if model is None else model
    return RankBasedEvaluator().evaluate(model, GRAPH.triples if triples is None else triples, use_tqdm=False, **kwargs)


def test_meta_device_triples() -> None:
    with pytest.raises(ValueError, match="^mapped_triples is on the meta device: it holds no ids$"):
        evaluate(triples=GRAPH.triples.to("meta"))


def test_a_model_on_the_meta_device() -> None:
    with torch.device("meta"):
        model = DistMult(8, 2, dim=4)
    with pytest.raises(ValueError, match="the model is on the meta device"):
        evaluate(model)


class Float8Model(TableModel):
    def score_t(self, hr_batch, tails=None):
        return super().score_t(hr_batch, tails).to(torch.float8_e4m3fn)

    def score_h(self, rt_batch, heads=None):
        return super().score_h(rt_batch, heads).to(torch.float8_e4m3fn)


def test_float8_scores_rank_like_their_float32_values() -> None:
    """Every float8 value is a float32 value, so the widened scores rank exactly like the model's own."""
    ours = evaluate(Float8Model(TABLE))
    widened = TABLE.to(torch.float8_e4m3fn).float()
    reference = evaluate(TableModel(widened))
    for column in ("optimistic", "pessimistic", "num_candidates"):
        np.testing.assert_array_equal(ours.records[column], reference.records[column])


def test_targets_none() -> None:
    with pytest.raises(ValueError, match=r"^targets must be a non-empty subset of \('head', 'tail'\), got None$"):
        evaluate(targets=None)


def test_numpy_integers_are_integers() -> None:
    results = evaluate(num_entities=np.int64(8), batch_size=np.int32(3))
    assert results.get_metric("count") == 20
    with pytest.raises(ValueError, match="num_entities must be a positive integer, got True"):
        evaluate(num_entities=True)


# -- the command line: one line on stderr, exit status 2, never a traceback -------------------------------------
def _dataset(folder: Path, train: str = "a\tr\tb\nb\tr\tc\n", valid: str = "a\tr\tc\n", test: str = "c\tr\ta\n"):
    folder.mkdir(exist_ok=True)
    for split, text in (("train", train), ("valid", valid), ("test", test)):
        (folder / f"{split}.txt").write_text(text)
    return folder


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("corrupt gzip", "corrupt or truncated gzip data"),
        ("empty split", "mapped_triples is empty"),
        ("unwritable checkpoint", "cannot write"),
    ],
)
def test_demo_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, expected: str):
    folder = _dataset(tmp_path / "data", valid="" if case == "empty split" else "a\tr\tc\n")
    argv = ["demo", "--dataset", str(folder), "--epochs", "1", "--dim", "4", "--no-progress"]
    if case == "corrupt gzip":
        (folder / "test.txt").unlink()
        (folder / "test.txt.gz").write_bytes(gzip.compress(b"c\tr\ta\n" * 500)[:40])
    if case == "unwritable checkpoint":
        argv += ["--save-checkpoint", str(tmp_path / "no" / "such" / "model.pt")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("kgeval demo: error: ") and expected in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_strat_with_a_bad_checkpoint_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "model.pt"
    path.write_bytes(b"\x80\x04not a checkpoint")
    assert main(["strat", "--dataset", "nations", "--checkpoint", str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kgeval strat: error: ") and "is not a kgeval checkpoint" in err
    assert err.count("\n") == 1


def test_a_metric_that_needs_records_says_so() -> None:
    results = RankBasedEvaluator(keep_records=False).evaluate(TableModel(TABLE), GRAPH.triples, use_tqdm=False)
    with pytest.raises(KeyError, match=r"needs the per-task rank records.*keep_records=True"):
        results["median_rank"]


def test_num_entities_that_disagrees_with_the_model_names_both() -> None:
    with pytest.raises(ValueError, match=r"^num_entities=6, but the model has num_entities=8"):
        evaluate(num_entities=6)


def test_comparison_and_interval_read_as_one_line() -> None:
    from kgeval.analysis.stats import compare

    a = evaluate(TableModel(TABLE))
    b = evaluate(TableModel(TABLE.flip(2)))
    text = str(compare(a, b, "mrr", n_resamples=200))
    assert text.startswith("both.realistic.inverse_harmonic_mean_rank: A - B = ")
    assert "95% CI [" in text and "p = " in text and "\n" not in text
    assert str(a.confidence_interval("mrr", n_resamples=200)).startswith("both.realistic.inverse_harmonic_mean_rank = ")
