"""The example scripts run end to end (each is the README's promise of a working recipe)."""

from __future__ import annotations

import importlib.util
import runpy
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[1] / "examples"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quickstart_prints_rising_validation_mrr(capsys) -> None:
    runpy.run_path(str(EXAMPLES / "quickstart.py"), run_name="__main__")
    lines = capsys.readouterr().out.splitlines()
    mrrs = [float(line.split("MRR ")[1].split()[0]) for line in lines if line.startswith("epoch")]
    assert len(mrrs) == 5
    assert mrrs[-1] > mrrs[0]
    assert any(line.startswith("1,322 ranking tasks (661 head, 661 tail)") for line in lines)


def test_train_with_early_stopping_runs_and_restores_the_best_epoch(capsys: pytest.CaptureFixture[str]) -> None:
    out = _load("train_with_early_stopping").main("nations", max_epochs=4, dim=8)
    stopper = out["stopper"]
    assert [evaluation.epoch for evaluation in stopper.history] == [2, 4]
    assert stopper.best_epoch in (2, 4)
    assert out["test"].get_metric("count") > 0
    printed = capsys.readouterr().out
    assert "valid MRR" in printed
    assert "macro MRR over relations" in printed


def test_compare_models_prints_every_comparison(capsys) -> None:
    comparisons = _load("compare_models").run("nations", models={"A": (16, 3), "B": (4, 1)}, n_resamples=200)
    assert [(c.key.split(".")[-1], c.test) for c in comparisons][:3] == [
        ("inverse_harmonic_mean_rank", "permutation"),
        ("inverse_harmonic_mean_rank", "bootstrap"),
        ("inverse_harmonic_mean_rank", "wilcoxon"),
    ]
    assert len(comparisons) == 14
    assert all(0 < c.p_value <= 1 and c.low <= c.high for c in comparisons)
    printed = capsys.readouterr().out
    assert "model A (DistMult, dim 16, 3 epochs): test MRR" in printed
    assert "A - B on nations test (paired by triple, 200 resamples, seed 0):" in printed


def test_distributed_evaluation_example_under_two_processes(tmp_path) -> None:
    """The DDP example, run as torchrun would run it on 2 gloo processes, gives every rank the same test results,
    those of the same training in one process up to float rounding."""
    from tests.support.distributed import run_example

    argv = ["--dataset", "nations", "--epochs", "2", "--dim", "8"]
    outcomes = run_example(2, EXAMPLES / "distributed_evaluation.py", argv, tmp_path)
    assert [outcome[0] for outcome in outcomes] == ["ok", "ok"], outcomes
    first, second = (outcome[1] for outcome in outcomes)
    assert first == second
    alone = _load("distributed_evaluation").main(argv)
    assert first.get_metric("count") == alone.get_metric("count")
    assert first.get_metric("mrr") == pytest.approx(alone.get_metric("mrr"), abs=1e-3)


def test_rank_plots_writes_both_figures(tmp_path, capsys) -> None:
    paths = _load("rank_plots").main(["--dataset", "nations", "--epochs", "1", "--out-dir", str(tmp_path)])
    assert [path.name for path in paths] == ["rank_distribution.png", "per_relation_mrr.png"]
    assert all(path.stat().st_size > 1000 for path in paths)
    assert "| MRR " in capsys.readouterr().out
