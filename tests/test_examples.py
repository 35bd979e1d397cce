"""The examples run end to end (small settings)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_train_with_early_stopping_runs_and_restores_the_best_epoch(capsys: pytest.CaptureFixture[str]) -> None:
    out = _load("train_with_early_stopping").main("nations", max_epochs=4, dim=8)
    stopper = out["stopper"]
    assert [evaluation.epoch for evaluation in stopper.history] == [2, 4]
    assert stopper.best_epoch in (2, 4)
    assert out["test"].get_metric("count") > 0
    printed = capsys.readouterr().out
    assert "valid MRR" in printed
    assert "macro MRR over relations" in printed
