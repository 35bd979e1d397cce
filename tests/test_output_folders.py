"""The folders the command line writes into are made, with their parents (``mkdir -p``), as ``evaluate_many``'s
``results_dir`` is: a documented ``--results-dir runs/many`` works from a folder without ``runs/``. What cannot be
written (a file in the way, a folder that takes no new folder) is still refused before any work, in one line.

Every test runs in an empty working folder (``tmp_path``) and writes below a nested folder that does not exist."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from kgeval import RankBasedEvaluator
from kgeval._checks import check_writable_file, make_folder
from kgeval.cli import main
from kgeval.datasets import load_shipped_dataset
from kgeval.many import evaluate_many
from kgeval.models import DistMult
from kgeval.models.checkpoint import save_checkpoint
from kgeval.models.graph_baseline import NeighbourhoodBaseline
from tests.support.many_graphs import make_folders


@pytest.fixture
def empty_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working folder: relative output paths land in it."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untrained DistMult of nations, saved with its data."""
    data = load_shipped_dataset("nations")
    path = tmp_path_factory.mktemp("model") / "model.pt"
    save_checkpoint(DistMult(data.num_entities, data.num_relations, dim=8, seed=3), path, data)
    return path


def test_check_writable_file_makes_the_missing_folders_only_when_asked(empty_cwd: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):  # the library's writers still refuse
        check_writable_file("a/b/c.csv", "the table")
    assert not (empty_cwd / "a").exists()
    assert check_writable_file("a/b/c.csv", "--out", create_folder=True) == "a/b/c.csv"
    assert (empty_cwd / "a" / "b").is_dir() and not (empty_cwd / "a" / "b" / "c.csv").exists()
    (empty_cwd / "file").write_text("x")
    with pytest.raises(ValueError, match=r"^--out 'file/d/e.csv': cannot write there: cannot make the folder .*: "
                                         r"'.*file' is a file, not a folder$"):  # fmt: skip
        check_writable_file("file/d/e.csv", "--out", create_folder=True)
    with pytest.raises(ValueError, match="is a folder; give a file name"):
        check_writable_file("a", "--out", create_folder=True)


def test_a_folder_that_takes_no_new_folder_is_refused(empty_cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No permission (simulated: the tests may run as root, whom no permission bit stops)."""

    def refuse(name: str, mode: int = 0o777, exist_ok: bool = False) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", name)

    monkeypatch.setattr(os, "makedirs", refuse)
    with pytest.raises(ValueError, match=r"^--html 'x/y.html': cannot write there: cannot make the folder '.*x' "
                                         r"\(.*Permission denied"):  # fmt: skip
        check_writable_file("x/y.html", "--html", create_folder=True)
    with pytest.raises(ValueError, match=r"^results_dir 'runs/many': cannot make the folder .*Permission denied"):
        make_folder("runs/many", "results_dir 'runs/many'")


def test_evaluate_many_makes_its_results_dir_with_parents(empty_cwd: Path, tmp_path: Path) -> None:
    folders = make_folders(tmp_path / "data")[:2]
    many = evaluate_many(lambda dataset: NeighbourhoodBaseline(), folders, use_tqdm=False, results_dir="runs/many")
    assert len(list((empty_cwd / "runs" / "many").glob("*.json"))) == 2
    again = evaluate_many(lambda dataset: NeighbourhoodBaseline(), folders, use_tqdm=False, results_dir="runs/many")
    assert again.resumed == tuple(folder.name for folder in folders)
    assert list(again.table["mrr_realistic"]) == list(many.table["mrr_realistic"])
    (empty_cwd / "plain").write_text("x")
    with pytest.raises(ValueError, match=r"results_dir 'plain/many'.*'.*plain' is a file, not a folder"):
        evaluate_many(NeighbourhoodBaseline(), folders, use_tqdm=False, results_dir="plain/many")


def test_evaluate_many_command_makes_its_folders(empty_cwd: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    folders = make_folders(tmp_path / "data")[:2]
    base = ["evaluate-many", "--datasets", *map(str, folders), "--no-progress", "--threads", "1"]
    argv = [*base, "--results-dir", "runs/many", "--csv", "out/tables/many.csv", "--html", "out/pages/many.html"]
    assert main(argv) == 0, capsys.readouterr().err
    assert len(list((empty_cwd / "runs" / "many").glob("*.json"))) == 2
    assert (empty_cwd / "out" / "tables" / "many.csv").is_file() and (
        empty_cwd / "out" / "pages" / "many.html"
    ).is_file()
    (empty_cwd / "blocker").write_text("x")
    capsys.readouterr()
    assert main([*base, "--csv", "blocker/t.csv"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("kgeval evaluate-many: error: --csv 'blocker/t.csv'") and len(error.splitlines()) == 1
    assert "is a file, not a folder" in error


def test_demo_makes_the_folder_of_its_checkpoint(empty_cwd: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["demo", "--dataset", "nations", "--epochs", "1", "--dim", "4", "--no-progress", "--threads", "1"]
    assert main([*argv, "--save-checkpoint", "runs/models/nations.pt"]) == 0, capsys.readouterr().err
    assert (empty_cwd / "runs" / "models" / "nations.pt").is_file()
    (empty_cwd / "runs" / "taken").write_text("x")
    assert main([*argv, "--save-checkpoint", "runs/taken/more/n.pt"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("kgeval demo: error: --save-checkpoint") and "is a file, not a folder" in error
    assert "Trained" not in capsys.readouterr().out  # refused before training


def test_evaluate_makes_the_folders_of_ranks_and_progress(empty_cwd: Path, checkpoint: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    argv = ["evaluate", "--checkpoint", str(checkpoint), "--no-progress", "--threads", "1"]
    assert main([*argv, "--save-ranks", "runs/ranks/r.csv", "--progress-file", "runs/progress/p.pt"]) == 0, \
        capsys.readouterr().err  # fmt: skip
    assert (empty_cwd / "runs" / "ranks" / "r.csv").is_file()
    assert (empty_cwd / "runs" / "progress").is_dir()  # made; the file itself is removed on success
    assert main([*argv, "--save-ranks", "elsewhere/r.xlsx"]) == 2  # a refused suffix makes no folder
    assert not (empty_cwd / "elsewhere").exists()
    assert "rank file must end in" in capsys.readouterr().err


def test_report_and_strat_make_their_output_folders(empty_cwd: Path, checkpoint: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    data = load_shipped_dataset("nations")
    model = DistMult(data.num_entities, data.num_relations, dim=8, seed=3)
    results = RankBasedEvaluator().evaluate(model, **data.evaluation_kwargs("test"), use_tqdm=False)
    results.save_ranks(empty_cwd / "ranks.csv")
    assert main(["report", "--ranks", "ranks.csv", "--output", "out/pages/report.html", "--resamples", "10"]) == 0, \
        capsys.readouterr().err  # fmt: skip
    assert (empty_cwd / "out" / "pages" / "report.html").is_file()
    pytest.importorskip("matplotlib")
    assert main(["strat", "--ranks", "ranks.csv", "--dataset", "nations", "--plot", "out/plots/curve.png"]) == 0, \
        capsys.readouterr().err  # fmt: skip
    assert (empty_cwd / "out" / "plots" / "curve.png").is_file()
