"""kgeval --version and kgeval evaluate (a checkpoint on a split, or a rank table; --full, --json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgeval import RankBasedEvaluator
from kgeval.cli import main
from kgeval.datasets import load_shipped_dataset
from kgeval.models import DistMult
from kgeval.models.checkpoint import save_checkpoint


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory):
    data = load_shipped_dataset("nations")
    model = DistMult(data.num_entities, data.num_relations, dim=8, seed=3)
    folder = tmp_path_factory.mktemp("evaluate")
    save_checkpoint(model, folder / "model.pt")
    results = RankBasedEvaluator().evaluate(model, **data.evaluation_kwargs("test"), use_tqdm=False)
    results.ranks_df().to_csv(folder / "ranks.csv", index=False)
    return folder, results


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("kgeval ")


def test_evaluate_a_checkpoint_prints_the_headline(saved, capsys: pytest.CaptureFixture[str]) -> None:
    folder, results = saved
    argv = ["evaluate", "--dataset", "nations", "--checkpoint", str(folder / "model.pt"), "--no-progress"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "== nations test, filtered by train + valid + test =="
    assert lines[1:] == [*results.summary().splitlines(), f"(--full lists all {len(results.data)} numbers)"]


def test_evaluate_a_rank_table_gives_the_same_numbers(saved, capsys: pytest.CaptureFixture[str]) -> None:
    folder, results = saved
    assert main(["evaluate", "--ranks", str(folder / "ranks.csv"), "--json"]) == 0
    flat = json.loads(capsys.readouterr().out)
    expected = results.to_flat_dict()
    assert flat.keys() == expected.keys()
    assert all(flat[key] == pytest.approx(value, rel=1e-12, nan_ok=True) for key, value in expected.items())


def test_evaluate_full_lists_every_metric(saved, capsys: pytest.CaptureFixture[str]) -> None:
    folder, results = saved
    assert main(["evaluate", "--ranks", str(folder / "ranks.csv"), "--full"]) == 0
    out = capsys.readouterr().out
    assert results.full_table() in out


def test_evaluate_needs_num_candidates(tmp_path: Path, saved, capsys: pytest.CaptureFixture[str]) -> None:
    folder, _results = saved
    import pandas as pd

    pd.read_csv(folder / "ranks.csv").drop(columns=["num_candidates"]).to_csv(tmp_path / "r.csv", index=False)
    assert main(["evaluate", "--ranks", str(tmp_path / "r.csv")]) == 2
    assert "needs a num_candidates column" in capsys.readouterr().err


def test_evaluate_needs_a_source(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate"]) == 2
    message = "kgeval evaluate: error: give what to evaluate: --checkpoint PATH or --ranks PATH\n"
    assert capsys.readouterr().err == message
