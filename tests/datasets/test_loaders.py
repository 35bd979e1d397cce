"""Loading one's own data: header lines, separators, tables in memory, labels unseen in train, given vocabularies
(ids that line up with a PyKEEN TriplesFactory)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kgeval.datasets import load_labelled_triples, load_tsv_dataset
from kgeval.exceptions import UnseenLabelsWarning

TRAIN = [["a", "likes", "b"], ["b", "likes", "c"], ["c", "knows", "a"]]
VALID = [["a", "knows", "c"]]
TEST = [["b", "knows", "a"], ["z", "likes", "a"], ["a", "hates", "b"]]  # z and hates occur only here


def write(folder: Path, sep: str = "\t", header: str | None = None) -> Path:
    folder.mkdir(exist_ok=True)
    for split, rows in (("train", TRAIN), ("valid", VALID), ("test", TEST)):
        lines = ([header] if header else []) + [sep.join(row) for row in rows]
        (folder / f"{split}.txt").write_text("\n".join(lines) + "\n")
    return folder


def labelled(dataset, split):
    entities = {i: label for label, i in dataset.entity_to_id.items()}
    relations = {i: label for label, i in dataset.relation_to_id.items()}
    return [[entities[h], relations[r], entities[t]] for h, r, t in getattr(dataset, split).tolist()]


@pytest.mark.parametrize("header", ["head\trelation\ttail", "Subject\tPredicate\tObject", "h\tr\tt"])
def test_a_header_line_is_detected_and_skipped(tmp_path: Path, header: str) -> None:
    """The reported case: a header line was read as one more triple."""
    dataset = load_tsv_dataset(write(tmp_path / "d", header=header), unseen="keep")
    assert labelled(dataset, "train") == TRAIN
    assert "head" not in dataset.entity_to_id and "h" not in dataset.entity_to_id


def test_header_can_be_forced_either_way(tmp_path: Path) -> None:
    folder = write(tmp_path / "d", header="x\ty\tz")
    assert labelled(load_tsv_dataset(folder, header=True, unseen="keep"), "train") == TRAIN
    assert labelled(load_tsv_dataset(folder, header=False, unseen="keep"), "train") == [["x", "y", "z"], *TRAIN]


def nations_folder(folder: Path, first_lines: str = "", line_end: str = "\n") -> Path:
    """The shipped Nations splits as plain files, each preceded by ``first_lines`` and ended by ``line_end``."""
    import gzip
    from importlib import resources

    folder.mkdir()
    shipped = resources.files("kgeval.datasets") / "data" / "nations"
    for split in ("train", "valid", "test"):
        lines = gzip.decompress((shipped / f"{split}.txt.gz").read_bytes()).decode().splitlines()
        (folder / f"{split}.txt").write_text(first_lines + "".join(line + line_end for line in lines), newline="")
    return folder


@pytest.mark.parametrize(
    "first_lines",
    ["e1\trel\te2\n", "head_id\trelation_id\ttail_id\n", "src\trel\tdst\n", "from\tedge\tto\n",
     "# head\trelation\ttail\n", "#\n# Nations, by the ConvE authors\n"],
)  # fmt: skip
def test_headers_of_other_forms_and_comments_are_not_triples(tmp_path: Path, first_lines: str) -> None:
    """The reported cases: such a header was read as a triple (16 entities instead of Nations' 14)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # known forms and comments: skipped without a word
        dataset = load_tsv_dataset(nations_folder(tmp_path / "d", first_lines))
    assert (dataset.num_entities, dataset.num_relations) == (14, 55)
    assert (len(dataset.train), len(dataset.valid), len(dataset.test)) == (1592, 199, 201)


def test_an_unknown_first_line_of_new_labels_is_a_header_with_a_warning(tmp_path: Path) -> None:
    """A first line none of whose labels occurs anywhere else is never silently data: it is skipped, with a warning
    naming the file and line and how to keep it; header=False keeps it."""
    folder = nations_folder(tmp_path / "d", "col_a\tcol_b\tcol_c\n")
    with pytest.warns(UserWarning, match=r"train.txt line 1 \('col_a', 'col_b', 'col_c'\) is read as a header") as rec:
        dataset = load_tsv_dataset(folder)
    assert rec[0].filename == __file__
    assert (dataset.num_entities, len(dataset.train)) == (14, 1592)
    kept = load_tsv_dataset(folder, header=False, unseen="keep")
    assert (kept.num_entities, kept.num_relations, len(kept.train)) == (16, 56, 1593)


def test_a_first_triple_whose_labels_recur_is_data(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        dataset = load_tsv_dataset(write(tmp_path / "d"), unseen="keep")
    assert labelled(dataset, "train") == TRAIN and labelled(dataset, "test") == TEST


@pytest.mark.parametrize("line_end", [" \n", "\r\n", " \r\n", "  \r \r\n", "\r\r\n"])
def test_trailing_spaces_and_carriage_returns_are_no_part_of_a_label(tmp_path: Path, line_end: str) -> None:
    """The reported case: trailing spaces or carriage returns made a second copy of every tail (28 entities)."""
    dataset = load_tsv_dataset(nations_folder(tmp_path / "d", line_end=line_end))
    assert (dataset.num_entities, dataset.num_relations, len(dataset.train)) == (14, 55, 1592)
    assert all(label == label.strip() for label in dataset.entity_to_id)


def test_a_trailing_separator_is_refused_naming_the_line(tmp_path: Path) -> None:
    """A trailing tab is a fourth (empty) field, not whitespace: refused, never guessed."""
    with pytest.raises(ValueError, match=r"train.txt line 1: expected 3 tab-separated fields .* got 4"):
        load_tsv_dataset(nations_folder(tmp_path / "d", line_end="\t\n"))


def test_another_separator(tmp_path: Path) -> None:
    dataset = load_tsv_dataset(write(tmp_path / "d", sep=","), sep=",", unseen="keep")
    assert labelled(dataset, "test") == TEST
    with pytest.raises(ValueError, match="expected 3 ','-separated fields"):
        load_tsv_dataset(write(tmp_path / "e", sep=";"), sep=",")


def test_unseen_labels_warn_with_counts_by_default(tmp_path: Path) -> None:
    with pytest.warns(UnseenLabelsWarning, match=r"test: 2 triples with 1 entities and 1 relations") as record:
        dataset = load_tsv_dataset(write(tmp_path / "d"))
    assert record[0].filename == __file__  # points at the caller
    assert labelled(dataset, "test") == TEST  # kept


def test_unseen_labels_kept_silently(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dataset = load_tsv_dataset(write(tmp_path / "d"), unseen="keep")
    assert len(dataset.test) == 3 and "z" in dataset.entity_to_id


def test_unseen_labels_dropped_as_pykeen_does(tmp_path: Path) -> None:
    with pytest.warns(UnseenLabelsWarning, match="test: dropped 2 of 3 triples"):
        dataset = load_tsv_dataset(write(tmp_path / "d"), unseen="drop")
    assert labelled(dataset, "test") == [["b", "knows", "a"]]
    assert sorted(dataset.entity_to_id) == ["a", "b", "c"] and sorted(dataset.relation_to_id) == ["knows", "likes"]
    with pytest.raises(ValueError, match="unseen must be one of"):
        load_tsv_dataset(write(tmp_path / "e"), unseen="ignore")  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["frame", "named frame", "array", "list"])
def test_tables_in_memory(kind: str) -> None:
    def table(rows):
        if kind == "frame":
            return pd.DataFrame(rows)
        if kind == "named frame":
            return pd.DataFrame(rows, columns=["head", "relation", "tail"])[["tail", "head", "relation"]]
        return np.array(rows, dtype=object) if kind == "array" else rows

    dataset = load_labelled_triples(table(TRAIN), table(VALID), table(TEST), unseen="keep")
    assert labelled(dataset, "train") == TRAIN and labelled(dataset, "test") == TEST
    with pytest.raises(ValueError, match=r"train row 1: the relation label must be a non-empty string, got 5"):
        load_labelled_triples([["a", "r", "b"], ["a", 5, "b"]], [], [])


def test_given_vocabularies_and_unknown_labels(tmp_path: Path) -> None:
    entity_to_id = {"c": 0, "b": 1, "a": 2, "z": 3}
    relation_to_id = {"likes": 2, "knows": 0, "hates": 1}
    dataset = load_tsv_dataset(write(tmp_path / "d"), entity_to_id=entity_to_id, relation_to_id=relation_to_id,
                               unseen="keep")  # fmt: skip
    assert dataset.train.tolist() == [[2, 2, 1], [1, 2, 0], [0, 0, 2]]
    with pytest.raises(ValueError, match=r"d/test.txt line 2: entity label 'z' is not in the given entity_to_id"):
        load_tsv_dataset(write(tmp_path / "d"), entity_to_id={"a": 0, "b": 1, "c": 2}, unseen="keep")


def test_ids_line_up_with_a_pykeen_triples_factory(tmp_path: Path) -> None:
    """Loaded with a PyKEEN TriplesFactory's vocabulary and unseen='drop', kgeval's ids are PyKEEN's."""
    triples_factory = pytest.importorskip("pykeen.triples")
    train = triples_factory.TriplesFactory.from_labeled_triples(np.array(TRAIN))
    test = triples_factory.TriplesFactory.from_labeled_triples(
        np.array(TEST), entity_to_id=train.entity_to_id, relation_to_id=train.relation_to_id
    )
    with pytest.warns(UnseenLabelsWarning):
        ours = load_tsv_dataset(write(tmp_path / "d"), unseen="drop", entity_to_id=train.entity_to_id,
                                relation_to_id=train.relation_to_id)  # fmt: skip
    assert ours.train.tolist() == train.mapped_triples.tolist()
    assert sorted(ours.test.tolist()) == sorted(test.mapped_triples.tolist())
