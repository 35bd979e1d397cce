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
    assert any(line.startswith("Rank-based metrics over 1322 ranking tasks") for line in lines)


def test_train_with_early_stopping_runs_and_restores_the_best_epoch(capsys: pytest.CaptureFixture[str]) -> None:
    out = _load("train_with_early_stopping").main("nations", max_epochs=4, dim=8)
    stopper = out["stopper"]
    assert [evaluation.epoch for evaluation in stopper.history] == [2, 4]
    assert stopper.best_epoch in (2, 4)
    assert out["test"].get_metric("count") > 0
    printed = capsys.readouterr().out
    assert "valid MRR" in printed
    assert "macro MRR over relations" in printed
