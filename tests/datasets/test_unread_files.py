"""Nothing is silent about what kgeval does not read: a dataset folder's data files that no reader takes (CoDEx's hard
negatives for triple classification, label lists, other splits) are named in one warning with why, and a file of
five fields (interval-valued temporal facts: head, relation, tail, start, end) is refused with a message that says
what it looks like and what kgeval reads instead."""

from __future__ import annotations

import gzip
import warnings
from pathlib import Path

import pytest

from kgeval.cli import main
from kgeval.datasets import load_dataset, load_temporal_tsv, load_tsv_dataset
from kgeval.datasets.reading import UnreadFilesWarning, unread_files

#: the shared CoDEx-S folder, which ships {valid,test}_negatives.txt.gz beside the splits
CODEX_S = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "codex-s"

TRAIN, VALID, TEST = "a\tr\tb\nb\tr\tc\nc\ts\ta\n", "a\tr\tc\n", "b\ts\tc\n"


def write_folder(folder: Path, extra: dict[str, str] | None = None) -> Path:
    """A tiny folder of labelled triples, with ``extra`` files (``.gz`` names gzip-compressed)."""
    folder.mkdir()
    for name, text in {"train.txt": TRAIN, "valid.txt": VALID, "test.txt": TEST, **(extra or {})}.items():
        if name.endswith(".gz"):
            (folder / name).write_bytes(gzip.compress(text.encode()))
        else:
            (folder / name).write_text(text)
    return folder


def unread_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(warning.message) for warning in caught if issubclass(warning.category, UnreadFilesWarning)]


def test_hard_negatives_are_named_once_with_why(tmp_path: Path) -> None:
    extra = {"valid_negatives.txt": "a\tr\ta\n", "test_negatives.txt.gz": "c\tr\tc\n", "LICENSE-MIT.txt": "MIT",
             "SOURCE.md": "where"}  # fmt: skip
    folder = write_folder(tmp_path / "codex-like", extra)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = load_dataset(folder)
    (message,) = unread_warnings(caught)
    assert message.startswith(f"{folder} holds files kgeval does not read -- test_negatives.txt.gz, "
                              "valid_negatives.txt: hard negatives for triple classification")  # fmt: skip
    assert "link prediction does not read" in message and "LICENSE" not in message and "SOURCE" not in message
    assert caught[0].filename == __file__  # attributed to the caller's line
    assert (len(data.train), len(data.valid), len(data.test)) == (3, 1, 1)  # the splits are read as before


def test_other_data_files_are_named_and_documents_are_not(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "extra", {"entity2id.txt": "a\t0\n", "dev.tsv": VALID, "README.txt": "hi",
                                               "notes.md": "md", "LICENCE.txt": "l"})  # fmt: skip
    assert unread_files(folder, ["train.txt", "valid.txt", "test.txt"]) == {
        "dev.tsv": "",
        "entity2id.txt": unread_files(folder, [])["entity2id.txt"],
    }
    with pytest.warns(UnreadFilesWarning) as caught:
        load_tsv_dataset(folder)
    (message,) = [str(warning.message) for warning in caught]
    assert "dev.tsv: none of the files kgeval reads here (train, valid, test)" in message
    assert "entity2id.txt: a list or id map of labels" in message
    clean = write_folder(tmp_path / "clean", {"LICENSE-CC-BY-4.0.txt": "cc", "SOURCE.md": "where", "README": "r"})
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnreadFilesWarning)
        load_dataset(clean)


def test_the_command_line_says_it_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = write_folder(tmp_path / "codex-like", {"valid_negatives.txt": "a\tr\ta\n", "test_negatives.txt": "x"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["demo", "--dataset", str(folder), "--epochs", "0", "--dim", "4", "--no-progress",
                     "--threads", "1"]) == 0  # fmt: skip
    (message,) = unread_warnings(caught)
    assert "test_negatives.txt, valid_negatives.txt: hard negatives for triple classification" in message


@pytest.mark.skipif(not CODEX_S.is_dir(), reason=f"no CoDEx-S folder at {CODEX_S}")
def test_the_shared_codex_s_names_its_negatives() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = load_dataset(CODEX_S)
    (message,) = unread_warnings(caught)
    assert "test_negatives.txt.gz, valid_negatives.txt.gz: hard negatives for triple classification" in message
    assert (len(data.train), len(data.valid), len(data.test)) == (32888, 1827, 1828)


def test_interval_valued_facts_are_named_as_such(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    intervals = "a\tr\tb\t1926-##-##\t1950-##-##\nb\tr\tc\t1930\t1940\n"
    folder = write_folder(tmp_path / "yago-like", {})
    for split in ("train", "valid", "test"):
        (folder / f"{split}.txt").write_text(intervals)
    expected = (
        r"train.txt line 1: expected 3 tab-separated fields \(head, relation, tail\), got 5: five fields look like "
        r"interval-valued temporal facts \(head, relation, tail, start, end.*\); kgeval reads triples \(3 columns\) "
        r"and time-stamped quadruples \(4 columns\), not interval-valued facts yet$"
    )
    with pytest.raises(ValueError, match=expected):
        load_dataset(folder)
    assert main(["demo", "--dataset", str(folder), "--no-progress"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("kgeval demo: error: ") and "interval-valued" in error and len(error.splitlines()) == 1
    (folder / "train.txt").write_text("a\tr\tb\t2001\nb\tr\tc\t2002\t2005\n")  # quadruples, then an interval
    with pytest.raises(ValueError, match=r"train.txt line 2: expected 4 tab-separated fields \(head, relation, tail, "
                                         r"time\), got 5: five fields look like interval-valued"):  # fmt: skip
        load_temporal_tsv(folder)
