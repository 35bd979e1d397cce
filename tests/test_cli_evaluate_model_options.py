"""``kgeval evaluate --also-filter`` (a second, wider filter level from the same pass) and ``--examples`` (per-example
rows: ranks and filtered top-k predictions): the ``--json`` keys and the written rows equal direct API calls on a
Nations checkpoint, and what cannot be honoured is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from kgeval import RankBasedEvaluator
from kgeval.cli import main
from kgeval.datasets import load_shipped_dataset
from kgeval.models import DistMult
from kgeval.models.checkpoint import save_checkpoint
from kgeval.variants import rank_examples


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory):
    """(nations, a seeded untrained DistMult, its checkpoint, the rank table of its test evaluation)."""
    data = load_shipped_dataset("nations")
    model = DistMult(data.num_entities, data.num_relations, dim=8, seed=4)
    folder = tmp_path_factory.mktemp("model-options")
    save_checkpoint(model, folder / "model.pt", data)
    results = RankBasedEvaluator().evaluate(model, use_tqdm=False, **data.evaluation_kwargs("test"))
    results.ranks_df().to_csv(folder / "ranks.csv", index=False)
    return data, model, folder / "model.pt", folder / "ranks.csv"


def _finite(flat: dict[str, float]) -> dict[str, float | None]:
    return {key: (None if value != value else value) for key, value in flat.items()}


def test_also_filter_gives_the_wider_level_beside_the_normal_one(saved, capsys) -> None:
    data, model, checkpoint, _ranks = saved
    argv = ["evaluate", "--checkpoint", str(checkpoint), "--split", "valid", "--also-filter", "test", "--no-progress"]
    assert main([*argv, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    narrow = RankBasedEvaluator().evaluate(model, data.valid, additional_filter_triples=[data.train, data.valid],
                                           use_tqdm=False)  # fmt: skip
    everything = [data.train, data.valid, data.test]
    wide = RankBasedEvaluator().evaluate(model, data.valid, additional_filter_triples=everything, use_tqdm=False)
    assert document["source"]["filtered_by"] == ["train", "valid"]
    assert document["metrics"] == pytest.approx(_finite(narrow.to_flat_dict()), abs=1e-12, nan_ok=True)
    also = document["also_filtered"]
    assert also["filtered_by"] == ["train", "valid", "test"]
    assert also["metrics"] == pytest.approx(_finite(wide.to_flat_dict()), abs=1e-12, nan_ok=True)
    assert also["metrics"]["both.realistic.inverse_harmonic_mean_rank"] > document["metrics"][
        "both.realistic.inverse_harmonic_mean_rank"]  # fmt: skip  # test answers filtered: better ranks
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("== nations valid, filtered by train + valid ==\n")
    narrow_text, wide_text = out.split("\n== also filtered by train + valid + test (the same pass) ==\n")
    assert narrow.summary() in narrow_text and wide_text.startswith(wide.summary())


def test_also_filter_takes_several_splits_and_a_relation_target(saved, capsys) -> None:
    data, model, checkpoint, _ranks = saved
    argv = ["evaluate", "--checkpoint", str(checkpoint), "--split", "valid", "--also-filter", "test",
            "--targets", "head", "tail", "relation", "--json", "--ks", "1", "3"]  # fmt: skip
    assert main(argv) == 0
    also = json.loads(capsys.readouterr().out)["also_filtered"]
    wide = RankBasedEvaluator(ks=(1, 3)).evaluate(model, data.valid, targets=("head", "tail", "relation"),
                                                  additional_filter_triples=[data.train, data.valid, data.test],
                                                  use_tqdm=False)  # fmt: skip
    assert also["metrics"] == pytest.approx(_finite(wide.to_flat_dict()), abs=1e-12, nan_ok=True)
    assert "relation.realistic.inverse_harmonic_mean_rank" in also["metrics"]


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_examples_writes_the_rows_of_rank_examples(saved, tmp_path: Path, suffix: str, capsys) -> None:
    data, model, checkpoint, _ranks = saved
    path = tmp_path / "new folder" / f"examples{suffix}"
    argv = ["evaluate", "--checkpoint", str(checkpoint), "--split", "valid", "--examples", str(path),
            "--examples-k", "3", "--no-progress"]  # fmt: skip
    assert main([*argv, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["examples_file"] == str(path)
    expected = rank_examples(model, data.valid, filter_triples=[data.train, data.valid], k=3, use_tqdm=False,
                             entity_labels=data.entity_to_id, relation_labels=data.relation_to_id)  # fmt: skip
    if suffix == ".jsonl":
        rows = pd.read_json(path, lines=True)
    else:
        rows = pd.read_csv(path)
        for column in ("predicted", "predicted_scores", "predicted_labels"):
            rows[column] = rows[column].map(json.loads)
    assert list(rows.columns) == list(expected.columns)
    assert len(rows) == len(expected) == 2 * len(data.valid)
    for column in ("head", "relation", "tail", "task_index", "optimistic", "pessimistic", "num_candidates"):
        assert rows[column].tolist() == expected[column].tolist(), column
    assert rows["side"].astype(str).tolist() == expected["side"].astype(str).tolist()
    assert rows["correct"].tolist() == expected["correct"].tolist()
    assert rows["predicted"].tolist() == [list(p) for p in expected["predicted"]]
    assert rows["predicted_labels"].tolist() == [list(p) for p in expected["predicted_labels"]]
    for got, want in zip(rows["predicted_scores"], expected["predicted_scores"], strict=True):
        assert got == pytest.approx(list(want), rel=1e-6)
    # the rows' ranks are the evaluation's
    metrics = document["metrics"]
    realistic = (rows["optimistic"] + rows["pessimistic"]) / 2
    assert metrics["both.realistic.inverse_harmonic_mean_rank"] == pytest.approx(float((1 / realistic).mean()))
    assert main(argv) == 0
    assert f"(the per-example rows, ranks and top-3 predictions, are in {path})" in capsys.readouterr().out


def test_examples_of_head_tasks_only(saved, tmp_path: Path, capsys) -> None:
    data, _model, checkpoint, _ranks = saved
    path = tmp_path / "heads.jsonl"
    argv = ["evaluate", "--checkpoint", str(checkpoint), "--examples", str(path), "--targets", "head", "relation",
            "--json"]  # fmt: skip
    assert main(argv) == 0
    rows = pd.read_json(path, lines=True)
    assert len(rows) == len(data.test) and set(rows["side"]) == {"head"}
    # the default k, fewer where a row has fewer filtered candidates
    assert [len(p) for p in rows["predicted"]] == [min(10, c) for c in rows["num_candidates"]]


@pytest.mark.parametrize(("extra", "message"), [
    (["--ranks", "RANKS", "--also-filter", "test"], "--also-filter counts a second filter level while a model is "
     "ranked: give --checkpoint (a rank table holds the ranks of one filter level)"),
    (["--ranks", "RANKS", "--examples", "OUT.jsonl"], "--examples writes a model's ranks and top-k predictions: give "
     "--checkpoint (a rank table has ranks but no model to predict with)"),
    (["--checkpoint", "CKPT", "--also-filter", "test"], "--also-filter test: a test evaluation is filtered by train "
     "+ valid + test already (test included); the wider level adds splits outside it (--split valid "
     "--also-filter test)"),
    (["--checkpoint", "CKPT", "--split", "valid", "--also-filter", "test,train"], "--also-filter test,train: a "
     "valid evaluation is filtered by train + valid already (train included)"),
    (["--checkpoint", "CKPT", "--examples-k", "3"], "--examples-k sets the predictions of each --examples row: give "
     "--examples PATH"),
    (["--checkpoint", "CKPT", "--examples", "OUT.txt"], "the suffix must be one of .jsonl, .csv"),
    (["--checkpoint", "CKPT", "--examples", "OUT.jsonl", "--targets", "relation"], "--examples writes rows of head "
     "and tail tasks"),
    (["--checkpoint", "CKPT", "--examples", "OUT.jsonl", "--examples-k", "15"], "k=15 is above the number of "
     "entities (14)"),
])  # fmt: skip
def test_what_cannot_be_honoured_is_refused(saved, tmp_path: Path, extra, message, capsys) -> None:
    _data, _model, checkpoint, ranks = saved
    names = {"RANKS": str(ranks), "CKPT": str(checkpoint), "OUT.jsonl": str(tmp_path / "out.jsonl"),
             "OUT.txt": str(tmp_path / "out.txt")}  # fmt: skip
    assert main(["evaluate", *(names.get(a, a) for a in extra), "--no-progress"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("kgeval evaluate: error: ") and message in error and error.count("\n") == 1, error
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("value", ["tests", "test,test", ""])
def test_also_filter_names_splits(saved, value: str, capsys) -> None:
    _data, _model, checkpoint, _ranks = saved
    with pytest.raises(SystemExit) as exit_info:
        main(["evaluate", "--checkpoint", str(checkpoint), "--split", "valid", "--also-filter", value])
    assert exit_info.value.code == 2
    assert "--also-filter" in capsys.readouterr().err
