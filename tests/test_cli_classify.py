"""Tests of ``kgeval classify``: its text, ``--json`` and ``--save`` hold the numbers that the Python API
(:func:`kgeval.variants.classify_triples`) gives for the same model and files, and bad input is one line."""

from __future__ import annotations

import json
import math
import random
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kgeval.cli import main
from kgeval.cli._common import version
from kgeval.datasets import UnreadFilesWarning, load_dataset, shared_data_dir
from kgeval.models import DistMult
from kgeval.models.checkpoint import save_checkpoint
from kgeval.variants import classify_triples, load_split_with_negatives, read_labelled_triples
from kgeval.variants.classification import CONVENTIONS

#: a line of the text output's table: a metric, its micro and its macro value
ROW = re.compile(r"^(accuracy|f1|roc_auc|average_precision)\s+(\S+)\s+(\S+)$", re.MULTILINE)


def _write(path: Path, rows: list[tuple[str, ...]]) -> None:
    path.write_text("".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")


def _triples(seed: int) -> tuple[dict[str, list[tuple[str, ...]]], list[tuple[str, ...]]]:
    """(splits, negatives) of a small graph: r2 occurs in train and test but not in valid (a fallback relation)."""
    rng = random.Random(seed)
    entities = [f"e{i}" for i in range(10)]
    every = sorted({(h, r, t) for h in entities for r in ("r0", "r1", "r2") for t in entities if h != t})
    rng.shuffle(every)
    valid = [row for row in every if row[1] != "r2"][:12]
    test = [row for row in every if row not in valid][:12]
    train = [row for row in every if row not in valid and row not in test][:60]
    known = set(train) | set(valid) | set(test)
    negatives = [row for row in every if row not in known]
    return {"train": train, "valid": valid, "test": test}, negatives


@pytest.fixture(scope="module")
def labelled(tmp_path_factory: pytest.TempPathFactory):
    """A folder of train / valid / test and CoDEx-style valid / test negatives, a DistMult's checkpoint of it (saved
    as tests/test_cli.py saves them), and the model."""
    folder = tmp_path_factory.mktemp("labelled")
    splits, negatives = _triples(0)
    for split, rows in splits.items():
        _write(folder / f"{split}.txt", rows)
    valid_negatives = [row for row in negatives if row[1] != "r2"][:12]
    test_negatives = [row for row in negatives if row not in valid_negatives][:12]
    _write(folder / "valid_negatives.txt", valid_negatives)
    _write(folder / "test_negatives.txt", test_negatives)
    dataset = _load(folder)
    model = DistMult(dataset.num_entities, dataset.num_relations, dim=8, seed=1)
    save_checkpoint(model, folder / "model.pt")
    return folder, folder / "model.pt", model


def _load(folder: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the negatives files, which link prediction does not read
        return load_dataset(str(folder))


def _expected(folder: Path, model, **kwargs):
    """The Python API's results on the folder: its split negatives beside the splits."""
    dataset = _load(folder)
    valid, test = load_split_with_negatives(dataset, "valid"), load_split_with_negatives(dataset, "test")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return classify_triples(model, valid, test, **kwargs)


def _argv(folder: Path, checkpoint: Path, *more: str) -> list[str]:
    return ["classify", "--dataset", str(folder), "--checkpoint", str(checkpoint), *more]


def _close(printed: str, value: float) -> bool:
    """A number printed with 4 decimals is ``value`` (nan printed as nan)."""
    return math.isnan(value) if printed == "nan" else abs(float(printed) - value) <= 5e-5 + 1e-12


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_the_text_names_the_python_apis_numbers(labelled, convention: str, capsys) -> None:
    folder, checkpoint, model = labelled
    expected = _expected(folder, model, convention=convention)
    assert main(_argv(folder, checkpoint, "--convention", convention)) == 0
    out = capsys.readouterr().out
    rows = {name: (micro, macro) for name, micro, macro in ROW.findall(out)}
    assert set(rows) == {"accuracy", "f1", "roc_auc", "average_precision"}
    for name, (micro, macro) in rows.items():
        assert _close(micro, expected.micro[name]), (name, micro, expected.micro[name])
        assert _close(macro, expected.macro[name]), (name, macro, expected.macro[name])
    comparison = ">" if expected.strict else ">="
    assert expected.strict == (convention == "torchkge")
    assert f"convention {convention}, objective accuracy: a triple is true when its score {comparison} its " in out
    assert "24 labelled triples (12 true, 12 false); thresholds fitted on 24 labelled valid triples" in out
    fallback = next(line for line in out.splitlines() if line.startswith("fallback: "))
    if expected.fallback:
        test_relations = len(expected.per_relation)
        assert fallback.startswith(f"fallback: {len(expected.fallback)} of {test_relations} test relations, "
                                   f"{expected.fallback_triples} test triple")  # fmt: skip
        assert all(expected.relation_name(r) in fallback and why in fallback for r, why in expected.fallback.items())
    else:
        assert fallback.startswith("fallback: none")


def test_the_fixture_has_a_fallback_relation(labelled) -> None:
    """r2 is absent from validation: the default falls back for it, CoDEx's convention gives it -inf."""
    folder, _checkpoint, model = labelled
    default, codex = _expected(folder, model), _expected(folder, model, convention="codex")
    r2 = _load(folder).relation_to_id["r2"]
    assert r2 in default.fallback and default.fallback_triples > 0
    assert codex.thresholds[r2] == -math.inf


@pytest.mark.parametrize("convention", ["kgeval", "codex"])
def test_json_is_strict_and_equals_to_dict(labelled, convention: str, capsys) -> None:
    folder, checkpoint, model = labelled
    expected = _expected(folder, model, convention=convention).to_dict()
    assert main(_argv(folder, checkpoint, "--convention", convention, "--json")) == 0
    captured = capsys.readouterr()
    assert captured.err == ""

    def refuse(constant: str) -> None:
        raise ValueError(f"not strict JSON: {constant}")

    document = json.loads(captured.out, parse_constant=refuse)
    assert document["kgeval_version"] == version()
    assert document["source"] == {"checkpoint": str(checkpoint), "model": "DistMult", "dataset": folder.name,
                                  "valid": f"valid + {folder / 'valid_negatives.txt'}",
                                  "test": f"test + {folder / 'test_negatives.txt'}", "valid_triples": 24,
                                  "test_triples": 24, "batch_size": None}  # fmt: skip
    assert document["known_negatives"] == {"valid": 0, "test": 0}
    for key in ("convention", "objective", "strict", "fallback_triples"):
        assert document[key] == expected[key]
    assert document["global_threshold"] == pytest.approx(expected["global_threshold"], abs=0)
    for scope in ("micro", "macro"):
        assert document[scope].keys() == expected[scope].keys()
        for name, value in expected[scope].items():
            assert document[scope][name] is None if math.isnan(value) else document[scope][name] == value
    assert document["per_relation"].keys() == expected["per_relation"].keys()
    for relation, values in expected["per_relation"].items():
        for name, value in values.items():
            got = document["per_relation"][relation][name]
            if isinstance(value, float) and math.isnan(value):
                assert got is None
            elif isinstance(value, float) and math.isinf(value):
                assert got == ("-inf" if value < 0 else "inf")  # CoDEx's -inf threshold, spelled out
            else:
                assert got == value, (relation, name)
    if convention == "codex":
        assert document["per_relation"]["r2"]["threshold"] == "-inf"


@pytest.mark.parametrize(("name", "convention"), [("out/a/b/triples.csv", "kgeval"), ("triples.tsv", "torchkge"),
                                                  ("triples.csv.gz", "codex")])  # fmt: skip
def test_save_writes_every_test_triple(labelled, tmp_path: Path, name: str, convention: str, capsys) -> None:
    """One row per test triple, in the test triples' order; the prediction is score >= threshold (> for
    TorchKGE's convention); the scores are the Python API's to the last bit."""
    folder, checkpoint, model = labelled
    expected = _expected(folder, model, convention=convention)
    path = tmp_path / name
    assert main(_argv(folder, checkpoint, "--convention", convention, "--save", str(path))) == 0
    assert f"are in {path})" in capsys.readouterr().out
    frame = pd.read_csv(path, sep="\t" if ".tsv" in name else ",", keep_default_na=False)
    assert list(frame.columns) == ["head", "relation", "tail", "score", "label", "threshold", "prediction"]
    assert len(frame) == len(expected.scores) == 24
    dataset = _load(folder)
    test = load_split_with_negatives(dataset, "test")
    entities = {i: label for label, i in dataset.entity_to_id.items()}
    relations = {i: label for label, i in dataset.relation_to_id.items()}
    assert frame["head"].tolist() == [entities[int(i)] for i in test.triples[:, 0]]
    assert frame["relation"].tolist() == [relations[int(i)] for i in test.triples[:, 1]]
    assert frame["tail"].tolist() == [entities[int(i)] for i in test.triples[:, 2]]
    assert np.array_equal(frame["score"].to_numpy(), expected.scores)
    assert np.array_equal(frame["label"].to_numpy() == 1, expected.labels)
    assert frame["threshold"].tolist() == [expected.thresholds[int(r)] for r in expected.relations]
    scores, thresholds = frame["score"].to_numpy(), frame["threshold"].to_numpy()
    called = scores > thresholds if convention == "torchkge" else scores >= thresholds
    assert np.array_equal(frame["prediction"].to_numpy() == 1, called)
    assert np.array_equal(called, expected.predictions)
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left beside it


def test_labelled_files_as_wn11_ships_them(labelled, tmp_path: Path, capsys) -> None:
    """--labelled-valid / --labelled-test: head relation tail label (1 / -1) files, read with the dataset's ids."""
    folder, checkpoint, model = labelled
    for split in ("valid", "test"):
        true = (folder / f"{split}.txt").read_text().splitlines()
        false = (folder / f"{split}_negatives.txt").read_text().splitlines()
        lines = [f"{line}\t1" for line in true] + [f"{line}\t-1" for line in false]
        (tmp_path / f"{split}.txt").write_text("\n".join(lines[::-1]) + "\n", encoding="utf-8")
    dataset = _load(folder)
    known = [dataset.train, dataset.valid, dataset.test]
    valid, test = (read_labelled_triples(tmp_path / f"{s}.txt", dataset.entity_to_id, dataset.relation_to_id,
                                         known_triples=known) for s in ("valid", "test"))  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = classify_triples(model, valid, test, objective="f1")
    argv = _argv(folder, checkpoint, "--labelled-valid", str(tmp_path / "valid.txt"), "--labelled-test",
                 str(tmp_path / "test.txt"), "--objective", "f1", "--json")  # fmt: skip
    with pytest.warns(UnreadFilesWarning, match="test_negatives.txt, valid_negatives.txt"):  # not read: said
        assert main(argv) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["source"]["valid"] == str(tmp_path / "valid.txt")
    assert document["objective"] == "f1"
    assert document["micro"] == {k: (None if math.isnan(v) else v) for k, v in expected.micro.items()}


@pytest.fixture(scope="module")
def without_negatives(tmp_path_factory: pytest.TempPathFactory):
    """A folder of train / valid / test only, and a checkpoint of it."""
    folder = tmp_path_factory.mktemp("plain")
    splits, _negatives = _triples(1)
    for split, rows in splits.items():
        _write(folder / f"{split}.txt", rows)
    dataset = _load(folder)
    save_checkpoint(DistMult(dataset.num_entities, dataset.num_relations, dim=4, seed=0), folder / "model.pt")
    return folder, folder / "model.pt"


@pytest.mark.parametrize(("more", "message"), [
    (["--convention", "sklearn"], "--convention must be one of kgeval, codex, torchkge, global"),
    (["--objective", "mcc"], "--objective must be one of accuracy, f1, got 'mcc'"),
    (["--negatives-valid", "MISSING"], "--negatives-valid 'MISSING': no such file"),
    (["--labelled-test", "MISSING"], "--labelled-test 'MISSING': no such file"),
    (["--negatives-test", "NEG", "--labelled-test", "NEG"], "give --negatives-test or --labelled-test, not both"),
    (["--save", "out.xlsx"], "--save 'out.xlsx': the table is written as .csv, .tsv, .csv.gz, .tsv.gz"),
    (["--convention", "torchkge", "--objective", "f1"], "--convention torchkge fits no objective"),
])  # fmt: skip
def test_bad_input_is_one_line(labelled, tmp_path: Path, more: list[str], message: str, capsys) -> None:
    folder, checkpoint, _model = labelled
    swap = {"MISSING": str(tmp_path / "missing.txt"), "NEG": str(folder / "test_negatives.txt")}
    message = message.replace("MISSING", str(tmp_path / "missing.txt"))
    assert main(_argv(folder, checkpoint, *(swap.get(a, a) for a in more))) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"kgeval classify: error: {message}")
    assert captured.err.count("\n") == 1


def test_a_dataset_without_negatives_says_what_to_give(without_negatives, capsys) -> None:
    folder, checkpoint = without_negatives
    assert main(_argv(folder, checkpoint)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"kgeval classify: error: {folder.name} has no negatives for its valid split (no negatives "
                          "file for valid in ")  # fmt: skip
    assert "give --negatives-valid FILE --negatives-test FILE" in err and "--labelled-valid FILE" in err


def test_a_checkpoint_is_needed(capsys) -> None:
    assert main(["classify", "--dataset", "nations"]) == 2
    assert capsys.readouterr().err == "kgeval classify: error: give the model to classify with: --checkpoint PATH\n"


CODEX_S = shared_data_dir() / "codex-s" if shared_data_dir() is not None else None


@pytest.mark.slow
@pytest.mark.skipif(CODEX_S is None or not (CODEX_S / "valid_negatives.txt.gz").is_file(), reason="no CoDEx-S")
def test_codex_s_with_its_hard_negatives(tmp_path: Path, capsys) -> None:
    """On CoDEx-S its negatives files are found beside the splits (and not reported unread); CoDEx's convention
    falls back for P35 alone (2 test triples), and the printed numbers are the Python API's."""
    assert CODEX_S is not None
    dataset = _load(CODEX_S)
    model = DistMult(dataset.num_entities, dataset.num_relations, dim=16, seed=0)
    save_checkpoint(model, tmp_path / "codex.pt", dataset)
    valid, test = load_split_with_negatives(dataset, "valid"), load_split_with_negatives(dataset, "test")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = classify_triples(model, valid, test, convention="codex")
    argv = ["classify", "--checkpoint", str(tmp_path / "codex.pt"), "--convention", "codex"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(argv) == 0
    assert not [w for w in caught if w.category.__name__ == "UnreadFilesWarning"]
    out = capsys.readouterr().out
    assert "3,656 labelled triples (1,828 true, 1,828 false); thresholds fitted on 3,654 labelled valid" in out
    assert "fallback: 1 of 36 test relations, 2 test triples -- absent from validation: -inf" in out
    rows = {name: (micro, macro) for name, micro, macro in ROW.findall(out)}
    for name, (micro, macro) in rows.items():
        assert _close(micro, expected.micro[name]) and _close(macro, expected.macro[name]), name
