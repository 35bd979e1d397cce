"""One version source (kgeval/_version.py): the metadata, the package and every document the command line writes
agree, installed or from a bare checkout (where no installed metadata exists)."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest

import kgeval
from kgeval._version import __version__
from kgeval.cli import main
from kgeval.datasets import load_shipped_dataset
from kgeval.evaluator import RankBasedEvaluator
from kgeval.models import DistMult

ROOT = Path(__file__).resolve().parents[1]


def test_the_project_metadata_reads_the_one_version_source() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "kgeval._version.__version__"}
    assert kgeval.__version__ == __version__


def _not_installed(name: str) -> str:
    raise importlib.metadata.PackageNotFoundError(name)


def test_evaluate_and_audit_stamp_the_same_version_in_a_bare_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A checkout that is not installed has no metadata: both documents still carry the package's version (they
    read the installed metadata before, and printed "(not installed)")."""
    data = load_shipped_dataset("nations")
    model = DistMult(data.num_entities, data.num_relations, dim=8, seed=3)
    results = RankBasedEvaluator().evaluate(model, **data.evaluation_kwargs("test"), use_tqdm=False)
    results.ranks_df().to_csv(tmp_path / "ranks.csv", index=False)
    monkeypatch.setattr(importlib.metadata, "version", _not_installed)
    assert main(["evaluate", "--ranks", str(tmp_path / "ranks.csv"), "--json"]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    assert main(["audit", "--dataset", "nations", "--no-baseline", "--json"]) == 0
    audited = json.loads(capsys.readouterr().out)
    assert evaluated["kgeval_version"] == audited["kgeval_version"] == __version__
