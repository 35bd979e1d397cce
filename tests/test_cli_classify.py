"""Tests of ``kgeval classify``: its text, ``--json`` and ``--save`` hold the numbers that the Python API
(:func:`kgeval.variants.classify_triples`) gives for the same model and files, and bad input is one line."""

from __future__ import annotations

import html
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
from kgeval.variants.classification import CONVENTIONS, classify_all_pairs
from kgeval.variants.classification.all_pairs import ALL_PAIRS_METRICS

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
    assert document["protocol"] == "labelled"
    assert "report" not in document and "saved" not in document
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
    (["--protocol", "pairs"], "--protocol must be one of labelled, all-pairs, got 'pairs'"),
    (["--threshold", "top_p"], "--threshold is an option of --protocol all-pairs (labelled triples are classified"),
    (["--exclude-train"], "--exclude-train is an option of --protocol all-pairs"),
    (["--protocol", "all-pairs", "--save", "out.csv"], "--save writes a row per labelled test triple, and --protocol "
     "all-pairs classifies every (query, entity) pair of the test triples' queries: queries x entities pairs, too "
     "many rows for a table; use --json for its numbers, --report PATH.html for its curves"),
    (["--protocol", "all-pairs", "--negatives-valid", "NEG", "--convention", "codex"], "--negatives-valid, "
     "--convention: options of the labelled protocol; --protocol all-pairs classifies the pairs of the dataset's "
     "test triples"),
    (["--protocol", "all-pairs", "--threshold", "median"], "--threshold must be one of validation, top_p or a "
     "number, got 'median'"),
    (["--protocol", "all-pairs", "--threshold", "top_p", "--objective", "f1"], "--threshold top_p fits no "
     "objective (only the threshold fitted on validation does): leave --objective out"),
    (["--protocol", "all-pairs", "--report", "FOLDER"], "--report 'FOLDER' is a folder; give a file name"),
])  # fmt: skip
def test_bad_input_is_one_line(labelled, tmp_path: Path, more: list[str], message: str, capsys) -> None:
    folder, checkpoint, _model = labelled
    swap = {"MISSING": str(tmp_path / "missing.txt"), "NEG": str(folder / "test_negatives.txt"),
            "FOLDER": str(tmp_path)}  # fmt: skip
    message = message.replace("MISSING", str(tmp_path / "missing.txt")).replace("FOLDER", str(tmp_path))
    assert main(_argv(folder, checkpoint, *(swap.get(a, a) for a in more))) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"kgeval classify: error: {message}")
    assert captured.err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # refused before anything is written


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


# -- --report ---------------------------------------------------------------------------------------------------
#: a printed number of the report: its data-key and exact data-value
CELL = re.compile(r'data-key="([^"]+)" data-value="([^"]+)"')


def _report_cells(path: Path) -> dict[str, str]:
    return {html.unescape(key): value for key, value in CELL.findall(path.read_text(encoding="utf-8"))}


def _same(printed: str, value: float) -> bool:
    return math.isnan(value) if printed == "nan" else printed == repr(float(value))


@pytest.mark.parametrize("convention", ["kgeval", "codex"])
def test_report_writes_the_python_apis_numbers(labelled, tmp_path: Path, convention: str, capsys) -> None:
    """--report PATH: the HTML report of the same results (every number the Python API's, to the last bit), its
    folder made, nothing left beside it; the text says where it is, --json names it."""
    folder, checkpoint, model = labelled
    expected = _expected(folder, model, convention=convention)
    path = tmp_path / "out" / "deep" / "classify.html"
    assert main(_argv(folder, checkpoint, "--convention", convention, "--report", str(path))) == 0
    assert f"(the HTML report, curves and tables, is in {path})" in capsys.readouterr().out
    page = path.read_text(encoding="utf-8")
    assert "<title>DistMult on labelled" in page and "24 labelled triples)</title>" in page
    assert page.count("<polyline") == 2 and "http" not in page
    cells = _report_cells(path)
    for key, value in expected.to_flat_dict().items():
        assert _same(cells[key], value), key
    assert [p.name for p in path.parent.iterdir()] == [path.name]
    assert main(_argv(folder, checkpoint, "--convention", convention, "--report", str(path), "--json")) == 0
    assert json.loads(capsys.readouterr().out)["report"] == str(path)


@pytest.fixture(scope="module")
def pairs_folder(tmp_path_factory: pytest.TempPathFactory):
    """A folder of train / valid / test only (no negatives file: nothing unread), a DistMult's checkpoint, the
    model."""
    folder = tmp_path_factory.mktemp("pairs")
    splits, _negatives = _triples(2)
    for split, rows in splits.items():
        _write(folder / f"{split}.txt", rows)
    dataset = _load(folder)
    model = DistMult(dataset.num_entities, dataset.num_relations, dim=8, seed=2)
    save_checkpoint(model, folder / "model.pt")
    return folder, folder / "model.pt", model


def _expected_pairs(folder: Path, model, exclude_train: bool = False, threshold: str = "validation"):
    """classify_all_pairs on the test triples, known = train + valid (train excluded instead with
    ``exclude_train``), the threshold fitted on the valid triples' pairs (or ``threshold``'s rule)."""
    dataset = _load(folder)
    known = [dataset.valid] if exclude_train else [dataset.train, dataset.valid]
    exclude = dataset.train if exclude_train else None
    validation = dataset.valid if threshold == "validation" else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return classify_all_pairs(model, dataset.test, known=known, exclude=exclude, validation=validation,
                                  threshold=threshold)  # fmt: skip


#: a metric's line of the all-pairs text: its name and its head, tail and both values
PAIRS_ROW = re.compile(rf"^({'|'.join(ALL_PAIRS_METRICS)})\s+(\S+)\s+(\S+)\s+(\S+)$", re.MULTILINE)


@pytest.mark.parametrize(("more", "exclude_train", "threshold"), [
    ([], False, "validation"),
    (["--exclude-train"], True, "validation"),
    (["--threshold", "top_p"], False, "top_p"),
])  # fmt: skip
def test_all_pairs_text_names_the_python_apis_numbers(pairs_folder, more: list[str], exclude_train: bool,
                                                       threshold: str, capsys) -> None:  # fmt: skip
    folder, checkpoint, model = pairs_folder
    expected = _expected_pairs(folder, model, exclude_train, threshold)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing unread, PyKEEN's zero divisions not shown
        assert main(_argv(folder, checkpoint, "--protocol", "all-pairs", *more)) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert captured.err == ""
    queries = {side: len({tuple(t) for t in _load(folder).test[:, columns].tolist()})
               for side, columns in (("head", [1, 2]), ("tail", [0, 1]))}  # fmt: skip
    assert (f"== {folder.name} test: all-pairs classification (PyKEEN's protocol) of the 12 test triples' queries "
            f"({queries['head']} head, {queries['tail']} tail) x 10 entities ==") in out  # fmt: skip
    rows = {name: values for name, *values in PAIRS_ROW.findall(out)}
    assert set(rows) == set(ALL_PAIRS_METRICS)
    for name, printed in rows.items():
        for side, value in zip(("head", "tail", "both"), printed, strict=True):
            assert _close(value, expected.get_metric(f"{side}.{name}")), (name, side)
    pairs = next(line for line in out.splitlines() if line.startswith("pairs "))
    assert pairs.split()[1:] == [f"{expected.sides[side].num_pairs:,}" for side in ("head", "tail", "both")]
    both = expected.sides["both"]
    if threshold == "validation":
        assert f"threshold: {both.threshold!r}, validation (accuracy) over the " in out
        assert both.num_pairs == (queries["head"] + queries["tail"]) * 10 - both.excluded
    else:
        assert "threshold: PyKEEN's top-P rule" in out
    assert ("train in neither class" in out) == exclude_train
    assert (both.excluded > 0) == exclude_train


@pytest.mark.parametrize("more", [[], ["--exclude-train", "--threshold", "0.25"]])
def test_all_pairs_json_is_strict_and_equals_to_dict(pairs_folder, tmp_path: Path, more: list[str], capsys) -> None:
    folder, checkpoint, model = pairs_folder
    given = "--threshold" in more
    expected = _expected_pairs(folder, model, exclude_train="--exclude-train" in more,
                               threshold=0.25 if given else "validation")  # type: ignore[arg-type]  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        numbers = expected.to_dict()
    path = tmp_path / "pairs.html"
    assert main(_argv(folder, checkpoint, "--protocol", "all-pairs", "--json", "--report", str(path), *more)) == 0

    def refuse(constant: str) -> None:
        raise ValueError(f"not strict JSON: {constant}")

    document = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert document["kgeval_version"] == version() and document["protocol"] == "all-pairs"
    assert document["report"] == str(path)
    source = document["source"]
    assert source["known"] == (["valid"] if given else ["train", "valid"])
    assert source["excluded"] == (["train"] if given else [])
    assert source["validation"] == (None if given else "valid")
    assert (source["test_triples"], source["valid_triples"], source["entities"]) == (12, 12, 10)
    assert document["threshold_rule"] == numbers["threshold_rule"] == ("given" if given else "validation (accuracy)")
    assert document["sides"].keys() == numbers["sides"].keys() == {"head", "tail", "both"}
    for side, values in numbers["sides"].items():
        got = document["sides"][side]
        for key in ("num_pairs", "num_positives", "excluded_pairs", "threshold", "confusion"):
            assert got[key] == values[key], (side, key)
        for group in ("metrics", "pykeen"):
            assert got[group].keys() == values[group].keys()
            for name, value in values[group].items():
                assert got[group][name] is None if math.isnan(value) else got[group][name] == value, (side, name)
    page = path.read_text(encoding="utf-8")
    assert page.count("<polyline") == 6 and "PyKEEN's 22 numbers" in page
    cells = _report_cells(path)
    for key, value in expected.to_flat_dict().items():
        assert _same(cells[key], value), key
