"""Tests of the command line (kgeval.cli, python -m kgeval): demo, --version, evaluate."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import torch

import kgeval.cli._common
import kgeval.cli.triples
from kgeval import RankBasedEvaluator
from kgeval.cli import COMMANDS, build_parser, main
from kgeval.datasets import load_shipped_dataset
from kgeval.models import DistMult, TransE
from kgeval.models.checkpoint import save_checkpoint

needs_evaluator = pytest.mark.skipif(
    not hasattr(kgeval, "RankBasedEvaluator"), reason="kgeval.RankBasedEvaluator is not available yet"
)

#: A line of a results table that reports the mean reciprocal rank (under any of its names).
MRR_LINE = re.compile(r"^.*(mrr|inverse_harmonic_mean_rank|mean_reciprocal_rank).*$", re.IGNORECASE | re.MULTILINE)


@needs_evaluator
def test_demo_on_nations(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--dataset", "nations", "--epochs", "1", "--dim", "8", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "Dataset nations: 14 entities, 55 relations, 1592 / 199 / 201 train / valid / test triples" in out
    assert "Trained DistMult (dim=8) for 1 epoch in " in out
    valid_at = out.index("== valid: 199 triples, filtered by train + valid, evaluated in ")
    test_at = out.index("== test: 201 triples, filtered by train + valid + test, evaluated in ")
    assert valid_at < test_at
    assert MRR_LINE.search(out[valid_at:test_at])
    assert MRR_LINE.search(out[test_at:])


@needs_evaluator
def test_demo_on_a_folder_with_zero_epochs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = {"train": ["a\tr\tb", "b\tr\tc", "c\ts\ta"], "valid": ["a\ts\tc"], "test": ["b\ts\ta"]}
    for split, lines in rows.items():
        (tmp_path / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["demo", "--dataset", str(tmp_path), "--epochs", "0", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert f"Dataset {tmp_path.name}: 3 entities, 2 relations, 3 / 1 / 1 train / valid / test triples" in out
    assert "== test: 1 triples" in out


@pytest.mark.parametrize("empty", ["train", "valid", "test"])
def test_demo_reports_an_empty_split_before_training(
    tmp_path: Path, empty: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = {"train": ["a\tr\tb", "b\tr\tc", "c\ts\ta"], "valid": ["a\ts\tc"], "test": ["b\ts\ta"]}
    rows[empty] = ["# nothing but a comment"]
    for split, lines in rows.items():
        (tmp_path / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setattr(kgeval.cli.triples, "train_model", lambda *args, **kwargs: pytest.fail("trained on bad data"))
    assert main(["demo", "--dataset", str(tmp_path), "--epochs", "1", "--no-progress"]) == 2
    captured = capsys.readouterr()
    source = f"{tmp_path}/{empty}.tsv"
    if empty == "train":  # the loader refuses it: no labels to number
        assert captured.err.startswith(f"kgeval demo: error: {source}: the train split holds no triples, so there "
                                       "are no entities or relations to number")  # fmt: skip
    else:
        assert captured.err == (f"kgeval demo: error: the {empty} split of {tmp_path.name} is empty ({source} holds "
                                "no triple); the demo trains on train and evaluates valid and test\n")  # fmt: skip
    assert "Trained" not in captured.out


class _RecordingEvaluator:
    """Stands in for kgeval.RankBasedEvaluator: records the calls, returns a printable result."""

    calls: ClassVar[list[dict]] = []

    def __init__(self, **kwargs) -> None:
        self.kwargs = kwargs

    def evaluate(self, model, mapped_triples, additional_filter_triples=None, use_tqdm=True, **kwargs):
        self.calls.append(
            {
                "triples": mapped_triples,
                "filters": additional_filter_triples,
                "use_tqdm": use_tqdm,
                **self.kwargs,
            }
        )
        return _Printed()


class _Printed:
    """A stand-in result: what the demo prints of it."""

    data: ClassVar[dict] = {}

    def summary(self) -> str:
        return "both.realistic.inverse_harmonic_mean_rank  0.5"

    def get_metric(self, key: str) -> float:
        return 0.5

    def table(self, rank_types: str = "all") -> np.ndarray:
        return np.zeros((2, 3))


def test_demo_wiring(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kgeval.cli.triples, "RankBasedEvaluator", _RecordingEvaluator)
    monkeypatch.setattr(_RecordingEvaluator, "calls", [])
    threads = torch.get_num_threads()
    try:
        argv = ["demo", "--dataset", "nations", "--epochs", "1", "--dim", "4", "--threads", "1", "--no-progress"]
        assert main(argv) == 0
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)
    nations = load_shipped_dataset("nations")
    valid_call, test_call = _RecordingEvaluator.calls
    assert torch.equal(valid_call["triples"], nations.valid)
    assert [len(t) for t in valid_call["filters"]] == [len(nations.train), len(nations.valid)]
    assert torch.equal(test_call["triples"], nations.test)
    assert [len(t) for t in test_call["filters"]] == [
        len(nations.train),
        len(nations.valid),
        len(nations.test),
    ]
    for call in (valid_call, test_call):
        assert call["filtered"] is True
        assert call["use_tqdm"] is False
    out = capsys.readouterr().out
    assert out.count("both.realistic.inverse_harmonic_mean_rank  0.5") == 2


def test_demo_unknown_dataset(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """The error names every path looked at and the variable to set."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("kgeval.datasets.shared_data_dir", lambda: None)
    monkeypatch.delenv("KGEVAL_SHARED_DATA", raising=False)
    assert main(["demo", "--dataset", "no-such-dataset", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "kgeval demo: error: dataset 'no-such-dataset' is not a shipped dataset (umls, kinship, nations) and was not "
        f"found: looked at {tmp_path.resolve() / 'no-such-dataset'}; no shared data folder ($KGEVAL_SHARED_DATA is "
        "not set, and there is no ../shared/data beside the kgeval package). Pass a folder, or set "
        "KGEVAL_SHARED_DATA to the folder that holds no-such-dataset/\n"
    )
    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.setattr("kgeval.datasets.shared_data_dir", lambda: shared)
    monkeypatch.setenv("KGEVAL_SHARED_DATA", str(shared))
    assert main(["demo", "--dataset", "WN18RR", "--no-progress"]) == 2
    assert (
        f"looked at {tmp_path.resolve() / 'WN18RR'}; {shared / 'WN18RR'} (the shared data folder, "
        "$KGEVAL_SHARED_DATA)" in capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["demo", "--epochs", "-1"], "argument --epochs: expected an integer >= 0, got -1"),
        (["demo", "--dim", "0"], "argument --dim: expected an integer >= 1, got 0"),
        (["demo", "--threads", "0"], "argument --threads: expected an integer >= 1, got 0"),
        (["demo", "--batch-size", "x"], "argument --batch-size: expected an integer, got 'x'"),
        (["demo", "--lr", "-0.1"], "argument --lr: expected a number > 0, got '-0.1'"),
        (["demo", "--lr", "fast"], "argument --lr: expected a number, got 'fast'"),
    ],
)
def test_demo_invalid_options(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.endswith(f"kgeval demo: error: {message}\n")


def test_missing_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.endswith("kgeval: error: the following arguments are required: COMMAND\n")


def test_parser_has_every_command() -> None:
    parser = build_parser()
    for name in COMMANDS:
        assert parser.parse_args([name]).command == name


def test_python_dash_m_kgeval_help() -> None:
    root = Path(__file__).resolve().parent.parent
    completed = subprocess.run(
        [sys.executable, "-m", "kgeval", "demo", "--help"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("usage: kgeval demo")
    for option in ("--dataset", "--epochs", "--dim", "--seed", "--batch-size", "--threads", "--no-progress"):
        assert option in completed.stdout


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
    assert lines[1:-1] == results.summary().splitlines()
    assert main([*argv, "--full"]) == 0
    full = capsys.readouterr().out.split("\n\n", 1)[1]  # the table after the headline
    assert main([*argv, "--json"]) == 0
    written = len(json.loads(capsys.readouterr().out)["metrics"])
    assert lines[-1] == f"(--full lists {_table_cells(full)} numbers; --json all {written})"


def _table_cells(text: str) -> int:
    """The value cells of a printed metric table (rows after the two header lines, the row name left out)."""
    rows = text.strip("\n").splitlines()[2:]
    return sum(len(row.split()) - 1 for row in rows)


@pytest.mark.parametrize("command", [
    ["evaluate", "--ranks", "RANKS"],
    ["strat", "--ranks", "RANKS", "--dataset", "nations"],
    ["audit", "--ranks", "RANKS", "--dataset", "nations", "--no-baseline"],
    ["report", "--ranks", "RANKS", "--output", "OUT", "--resamples", "10"],
])  # fmt: skip
def test_every_command_that_evaluates_takes_threads(saved, tmp_path: Path, command: list[str], capsys) -> None:
    folder, _results = saved
    argv = [str(folder / "ranks.csv") if a == "RANKS" else str(tmp_path / "r.html") if a == "OUT" else a
            for a in command]  # fmt: skip
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert main([*argv, "--threads", "1"]) == 0, capsys.readouterr().err
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)


def test_a_warning_prints_one_line_without_python_source(tmp_path: Path) -> None:
    """A warning of the command line is one line on stderr: no ``warnings.warn(...`` source line under it."""
    rows = {"train": ["a\tr\tb", "b\tr\tc", "c\ts\ta"], "valid": ["a\ts\tc"], "test": ["b\ts\td"]}  # d unseen
    for split, lines in rows.items():
        (tmp_path / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    completed = subprocess.run([sys.executable, "-m", "kgeval", "demo", "--dataset", str(tmp_path), "--epochs", "0",
                                "--no-progress"], capture_output=True, text=True, check=False)  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    warned = [line for line in completed.stderr.splitlines() if line.strip()]
    assert all(line.startswith("kgeval demo: ") for line in warned), completed.stderr  # no source line between
    unseen = [line for line in warned if line.startswith("kgeval demo: UnseenLabelsWarning: ")]
    assert len(unseen) == 1 and "test: 1 triples with 1 entities" in unseen[0], completed.stderr


def test_evaluate_a_rank_table_gives_the_same_numbers(saved, capsys: pytest.CaptureFixture[str]) -> None:
    folder, results = saved
    assert main(["evaluate", "--ranks", str(folder / "ranks.csv"), "--json"]) == 0
    flat = json.loads(capsys.readouterr().out)["metrics"]
    expected = results.to_flat_dict()
    assert flat.keys() == expected.keys()
    assert all(flat[key] == pytest.approx(value, rel=1e-12, nan_ok=True) for key, value in expected.items())


@pytest.mark.parametrize("name", ["ranks.csv", "ranks.tsv", "ranks.csv.gz"])
def test_evaluate_saves_the_ranks_that_evaluate_strat_and_audit_read(
    saved, tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--save-ranks writes the checkpoint's rank table: its rows are the in-process evaluation's records, with the
    dataset's labels, and ``evaluate --ranks`` of it prints the checkpoint's numbers."""
    import pandas as pd

    folder, results = saved
    path = tmp_path / name
    argv = ["evaluate", "--dataset", "nations", "--checkpoint", str(folder / "model.pt"), "--save-ranks", str(path),
            "--json"]  # fmt: skip
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["ranks_file"] == str(path)
    table = pd.read_csv(path, sep="\t" if ".tsv" in name else ",")
    expected = results.ranks_df()
    assert len(table) == len(expected) == 2 * len(load_shipped_dataset("nations").test)
    for column in ("head", "relation", "tail", "optimistic", "pessimistic", "num_candidates"):
        np.testing.assert_array_equal(table[column].to_numpy(), expected[column].to_numpy(), err_msg=column)
    labels = {i: label for label, i in load_shipped_dataset("nations").entity_to_id.items()}
    assert table["head_label"].tolist() == [labels[i] for i in table["head"]]
    assert main(["evaluate", "--ranks", str(path), "--json"]) == 0
    flat = json.loads(capsys.readouterr().out)["metrics"]
    expected_metrics = results.to_flat_dict()
    assert all(flat[key] == pytest.approx(value, rel=1e-12, nan_ok=True) for key, value in expected_metrics.items())
    assert main(["strat", "--ranks", str(path), "--dataset", "nations"]) == 0
    capsys.readouterr()
    argv = ["evaluate", "--dataset", "nations", "--checkpoint", str(folder / "model.pt"), "--save-ranks", str(path)]
    assert main(argv) == 0
    assert capsys.readouterr().out.endswith(f"(the per-task ranks are in {path})\n")  # said in text mode too


@pytest.mark.parametrize(("argv", "message"), [
    (["--ranks", "IN", "--save-ranks", "out.csv"], "--save-ranks writes the ranks of a --checkpoint's evaluation"),
    (["--checkpoint", "CKPT", "--save-ranks", "out.xlsx"], "rank file must end in .csv, .tsv (either maybe compressed"),
    (["--checkpoint", "CKPT", "--save-ranks", "IN/folder/r.csv"], "ranks.csv' is a file, not a folder"),
])  # fmt: skip
def test_save_ranks_is_checked_before_the_evaluation(saved, argv, message, capsys) -> None:
    folder, _results = saved
    argv = [str(folder / "model.pt") if a == "CKPT" else a.replace("IN", str(folder / "ranks.csv"), 1)
            if a.startswith("IN") else a for a in argv]  # fmt: skip
    assert main(["evaluate", "--dataset", "nations", *argv]) == 2
    assert message in capsys.readouterr().err


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


def test_evaluate_ranks_relations_on_request(saved, capsys: pytest.CaptureFixture[str]) -> None:
    folder, _results = saved
    data = load_shipped_dataset("nations")
    model = DistMult(data.num_entities, data.num_relations, dim=8, seed=3)
    targets = ("head", "tail", "relation")
    expected = RankBasedEvaluator().evaluate(model, **data.evaluation_kwargs("test"), targets=targets, use_tqdm=False)
    argv = ["evaluate", "--dataset", "nations", "--checkpoint", str(folder / "model.pt"), "--json", "--targets",
            "relation", "tail", "head"]  # fmt: skip
    assert main(argv) == 0
    flat = json.loads(capsys.readouterr().out)["metrics"]
    assert flat["relation.realistic.inverse_harmonic_mean_rank"] == expected.get_metric("relation.mrr")
    assert flat["both.realistic.count"] == expected.get_metric("both.count") == 2 * len(data.test)


def _strict(text: str) -> dict:
    """JSON parsed the way a strict reader parses it: NaN / Infinity are errors."""

    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A three-entity dataset (so adjusted and z hits@k are undefined: every candidate is within k) and a TransE."""
    folder = tmp_path_factory.mktemp("tiny")
    rows = {"train": ["a\tr\tb", "b\tr\tc", "c\ts\ta"], "valid": ["a\ts\tc"], "test": ["b\ts\ta"]}
    for split, lines in rows.items():
        (folder / f"{split}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    save_checkpoint(TransE(3, 2, dim=4, p=1, seed=0), folder / "transe.pt")
    return folder, folder / "transe.pt"


def test_evaluate_json_is_strict_and_says_how_the_numbers_were_made(
    tiny_checkpoint, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reported case: NaN in the output (not JSON), no metadata, one stderr warning per undefined metric."""
    folder, checkpoint = tiny_checkpoint
    argv = ["evaluate", "--dataset", str(folder), "--checkpoint", str(checkpoint), "--split", "valid", "--json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    document = _strict(captured.out)
    assert captured.err == ""
    assert document["kgeval_version"] == kgeval.cli._common.version()
    assert document["source"] == {"checkpoint": str(checkpoint), "model": "TransE", "dataset": folder.name,
                                  "split": "valid", "filtered_by": ["train", "valid"],
                                  "targets": ["head", "tail"]}  # fmt: skip
    assert document["protocol"]["setting"] == "filtered" and document["protocol"]["ks"] == [1, 3, 5, 10]
    metrics = document["metrics"]
    assert metrics["both.realistic.adjusted_hits_at_10"] is None  # undefined: null
    assert isinstance(metrics["both.realistic.inverse_harmonic_mean_rank"], float)


def test_evaluate_text_collects_undefined_metrics_in_one_line(
    tiny_checkpoint, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, checkpoint = tiny_checkpoint
    assert main(["evaluate", "--dataset", str(folder), "--checkpoint", str(checkpoint), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("kgeval evaluate: 6 metric(s) undefined on these ranks, reported as NaN: adjusted_hits_at_10")


def _flat_metrics(capsys: pytest.CaptureFixture[str]) -> dict:
    return _strict(capsys.readouterr().out)["metrics"]


def test_evaluate_reads_a_pickled_pyg_model_only_when_trusted(tmp_path: Path, capsys) -> None:
    """The reported case: only kgeval's own checkpoints were read. A model saved whole (torch.save) runs code when
    loaded: refused without --trust-checkpoint, evaluated with it, with the numbers of an in-process evaluation."""
    kge = pytest.importorskip("torch_geometric.nn.kge")
    data = load_shipped_dataset("nations")
    torch.manual_seed(0)
    model = kge.DistMult(data.num_entities, data.num_relations, 8)
    torch.save(model, tmp_path / "pyg.pt")
    argv = ["evaluate", "--dataset", "nations", "--checkpoint", str(tmp_path / "pyg.pt"), "--json"]
    assert main(argv) == 2
    assert "is not a kgeval checkpoint but a pickled object" in capsys.readouterr().err
    assert main([*argv, "--trust-checkpoint"]) == 0
    expected = RankBasedEvaluator().evaluate(model, **data.evaluation_kwargs("test"), use_tqdm=False)
    got = _flat_metrics(capsys)
    assert got["both.realistic.inverse_harmonic_mean_rank"] == pytest.approx(expected.get_metric("mrr"), rel=1e-12)
    other = kge.DistMult(data.num_entities + 1, data.num_relations, 8)
    torch.save(other, tmp_path / "other.pt")
    assert main(["evaluate", "--dataset", "nations", "--checkpoint", str(tmp_path / "other.pt"),
                 "--trust-checkpoint"]) == 2  # fmt: skip
    assert "the checkpoint's model has 15 entities, the dataset nations 14" in capsys.readouterr().err


def test_evaluate_reads_a_pykeen_results_folder(tmp_path: Path, capsys) -> None:
    """A PyKEEN pipeline's saved folder: trained_model.pkl, and the ids of training_triples line the dataset up
    (here PyKEEN's ids are reversed against kgeval's sorted ones, so an unaligned read would rank wrong)."""
    pytest.importorskip("pykeen")
    from pykeen.models import DistMult as PyKEENDistMult
    from pykeen.triples import TriplesFactory

    data = load_shipped_dataset("nations")
    entities = {label: data.num_entities - 1 - i for label, i in data.entity_to_id.items()}
    relations = {label: data.num_relations - 1 - i for label, i in data.relation_to_id.items()}
    labels = ({i: label for label, i in data.entity_to_id.items()},
              {i: label for label, i in data.relation_to_id.items()})  # fmt: skip
    train = np.array([[labels[0][h], labels[1][r], labels[0][t]] for h, r, t in data.train.tolist()])
    factory = TriplesFactory.from_labeled_triples(train, entity_to_id=entities, relation_to_id=relations)
    model = PyKEENDistMult(triples_factory=factory, embedding_dim=8, random_seed=0)
    folder = tmp_path / "run"
    (folder / "training_triples").mkdir(parents=True)
    torch.save(model, folder / "trained_model.pkl")
    factory.to_path_binary(folder / "training_triples")
    assert main(["evaluate", "--dataset", "nations", "--checkpoint", str(folder), "--trust-checkpoint", "--json"]) == 0
    got = _flat_metrics(capsys)
    aligned = load_shipped_dataset("nations", entity_to_id=entities, relation_to_id=relations)
    expected = RankBasedEvaluator().evaluate(model, **aligned.evaluation_kwargs("test"), use_tqdm=False)
    assert got["both.realistic.inverse_harmonic_mean_rank"] == pytest.approx(expected.get_metric("mrr"), rel=1e-12)
    unaligned = RankBasedEvaluator().evaluate(model, **data.evaluation_kwargs("test"), use_tqdm=False)
    assert unaligned.get_metric("mrr") != pytest.approx(expected.get_metric("mrr"))  # the alignment matters here


def test_a_trusted_load_prints_no_pickle_warning_and_a_default_dataset_that_does_not_fit_says_so(
    tmp_path: Path, capsys
) -> None:
    """A model pickled with protocol 5 (as PyKEEN saves) is first offered to the weights-only loader, which warns
    about the protocol: kgeval's attempt keeps that to itself. Without --dataset the checkpoint is evaluated on the
    default dataset; one it does not fit is an error that says no --dataset was given."""
    data = load_shipped_dataset("nations")
    model = DistMult(data.num_entities, data.num_relations, dim=4, seed=0)
    torch.save(model, tmp_path / "whole.pt", pickle_protocol=5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["evaluate", "--dataset", "nations", "--checkpoint", str(tmp_path / "whole.pt"),
                     "--trust-checkpoint", "--json"]) == 0  # fmt: skip
    assert not [w for w in caught if "pickle" in str(w.message).lower()]
    capsys.readouterr()
    assert main(["evaluate", "--checkpoint", str(tmp_path / "whole.pt"), "--trust-checkpoint"]) == 2
    error = capsys.readouterr().err
    assert "the dataset umls" in error and "no --dataset was given, so the dataset was the default, umls" in error


def test_evaluate_reads_a_pickled_torchkge_model_when_trusted(tmp_path: Path, capsys) -> None:
    models = pytest.importorskip("torchkge.models")
    data = load_shipped_dataset("nations")
    torch.manual_seed(0)
    model = models.TransEModel(8, data.num_entities, data.num_relations, dissimilarity_type="L2").eval()
    torch.save(model, tmp_path / "torchkge.pt")
    argv = ["evaluate", "--dataset", "nations", "--checkpoint", str(tmp_path / "torchkge.pt"), "--json"]
    assert main([*argv, "--trust-checkpoint"]) == 0
    expected = RankBasedEvaluator().evaluate(model, **data.evaluation_kwargs("test"), use_tqdm=False)
    assert _flat_metrics(capsys)["both.realistic.inverse_harmonic_mean_rank"] == pytest.approx(
        expected.get_metric("mrr"), rel=1e-12
    )


def test_evaluate_resumes_from_a_progress_file(saved, tmp_path, monkeypatch, capsys) -> None:
    """--progress-file: an evaluation that failed midway (here: the third batch raises) is resumed by the command,
    which prints the numbers of an uninterrupted run and removes the file."""
    from kgeval._engine import loop
    from kgeval.models.checkpoint import load_model_file

    folder, _results = saved
    progress = tmp_path / "progress.pt"
    data = load_shipped_dataset("nations")
    model = load_model_file(folder / "model.pt").model
    real_count_batch, calls = loop.count_batch, []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("simulated preemption")
        return real_count_batch(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(loop, "count_batch", failing)
        with pytest.raises(RuntimeError, match="preemption"):
            RankBasedEvaluator().evaluate(model, **data.evaluation_kwargs("test"), use_tqdm=False, batch_size=32,
                                          progress_path=progress, save_every=0)  # fmt: skip
    assert progress.exists()
    argv = ["evaluate", "--dataset", "nations", "--checkpoint", str(folder / "model.pt"), "--no-progress", "--json"]
    assert main([*argv, "--progress-file", str(progress), "--save-every", "0"]) == 0
    assert not progress.exists()
    resumed = json.loads(capsys.readouterr().out)["metrics"]
    assert main(argv) == 0
    assert resumed == json.loads(capsys.readouterr().out)["metrics"]
