"""Tests of kgeval.datasets: TSV folders, shipped datasets, the shared data folder."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest
import torch

from kgeval.datasets import (
    SHIPPED_DATASETS,
    TriplesDataset,
    load_dataset,
    load_shipped_dataset,
    load_tsv_dataset,
    shared_data_dir,
)

# Labelled triples per split; labels contain spaces, unicode and digits to check they are kept verbatim.
TRAIN = [("b ent", "likes", "a"), ("a", "knows", "ç"), ("10", "likes", "2")]
VALID = [("2", "knows", "b ent")]
TEST = [("ç", "hates", "a"), ("zeta", "likes", "10")]

#: Counts stated in kgeval/datasets/data/<name>/SOURCE.md: entities, relations, train, valid, test.
SHIPPED_COUNTS = {
    "umls": (135, 46, 5216, 652, 661),
    "kinship": (104, 25, 8544, 1068, 1074),
    "nations": (14, 55, 1592, 199, 201),
}


def _write(path: Path, rows: list[tuple[str, ...]], compressed: bool = False, newline: str = "\n") -> None:
    text = "".join("\t".join(row) + newline for row in rows)
    if compressed:
        with gzip.open(path, "wt", encoding="utf-8", newline="") as handle:
            handle.write(text)
    else:
        path.write_text(text, encoding="utf-8", newline="")


def _labelled(dataset: TriplesDataset, split: str) -> list[tuple[str, str, str]]:
    entities = {i: label for label, i in dataset.entity_to_id.items()}
    relations = {i: label for label, i in dataset.relation_to_id.items()}
    return [(entities[h], relations[r], entities[t]) for h, r, t in getattr(dataset, split).tolist()]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """train.txt (plain), valid.txt.gz, test.tsv.gz."""
    _write(tmp_path / "train.txt", TRAIN)
    _write(tmp_path / "valid.txt.gz", VALID, compressed=True)
    _write(tmp_path / "test.tsv.gz", TEST, compressed=True)
    return tmp_path


def test_load_tsv_dataset_maps_labels_to_sorted_ids(folder: Path) -> None:
    dataset = load_tsv_dataset(folder)
    assert dataset.name == folder.name
    entities = sorted({label for row in TRAIN + VALID + TEST for label in (row[0], row[2])})
    relations = sorted({row[1] for row in TRAIN + VALID + TEST})
    assert list(dataset.entity_to_id) == entities
    assert list(dataset.entity_to_id.values()) == list(range(len(entities)))
    assert list(dataset.relation_to_id) == relations
    assert (dataset.num_entities, dataset.num_relations) == (len(entities), len(relations))
    for split, rows in (("train", TRAIN), ("valid", VALID), ("test", TEST)):
        triples = getattr(dataset, split)
        assert triples.dtype == torch.long
        assert triples.shape == (len(rows), 3)
        assert _labelled(dataset, split) == rows


def test_load_tsv_dataset_ids_do_not_depend_on_line_order(folder: Path, tmp_path_factory) -> None:
    other = tmp_path_factory.mktemp("reversed")
    _write(other / "train.tsv", TRAIN[::-1])
    _write(other / "valid.tsv", VALID)
    _write(other / "test.txt", TEST[::-1])
    first, second = load_tsv_dataset(folder), load_tsv_dataset(other)
    assert first.entity_to_id == second.entity_to_id
    assert first.relation_to_id == second.relation_to_id
    assert torch.equal(first.train, second.train.flip(0))


def test_load_tsv_dataset_skips_empty_lines_and_accepts_crlf(tmp_path: Path) -> None:
    _write(tmp_path / "train.txt", TRAIN, newline="\r\n")
    (tmp_path / "valid.txt").write_text("\n" + "\t".join(VALID[0]) + "\n\n", encoding="utf-8")
    _write(tmp_path / "test.txt", [])
    dataset = load_tsv_dataset(tmp_path, name="tiny")
    assert dataset.name == "tiny"
    assert _labelled(dataset, "train") == TRAIN
    assert _labelled(dataset, "valid") == VALID
    assert dataset.test.shape == (0, 3)


def test_load_tsv_dataset_missing_folder(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    message = f"dataset folder {str(missing)!r} does not exist or is not a directory"
    with pytest.raises(FileNotFoundError, match=f"^{re.escape(message)}$"):
        load_tsv_dataset(missing)


def test_load_tsv_dataset_missing_split(folder: Path) -> None:
    (folder / "test.tsv.gz").unlink()
    message = f"no test file in {str(folder)!r}; tried test.txt, test.txt.gz, test.tsv, test.tsv.gz"
    with pytest.raises(FileNotFoundError, match=f"^{re.escape(message)}$"):
        load_tsv_dataset(folder)


def test_load_tsv_dataset_two_files_for_one_split(folder: Path) -> None:
    _write(folder / "train.txt.gz", TRAIN, compressed=True)
    message = f"more than one train file in {str(folder)!r}: train.txt, train.txt.gz; keep one"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        load_tsv_dataset(folder)


@pytest.mark.parametrize(("bad_line", "num_fields"), [("a\tb", 2), ("a\tb\tc\td", 4), ("a b c", 1)])
def test_load_tsv_dataset_wrong_number_of_fields(folder: Path, bad_line: str, num_fields: int) -> None:
    lines = ["\t".join(row) for row in VALID] + ["", bad_line]  # the bad line is line 3
    with gzip.open(folder / "valid.txt.gz", "wt", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    message = f"{folder}/valid.txt.gz line 3: expected 3 tab-separated fields (head, relation, tail), got {num_fields}"
    if num_fields == 4:  # a line of a quadruple file: the reader of quadruples is named
        message += ": a file of (head, relation, tail, time) quadruples is read by kgeval.datasets.load_temporal_tsv"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        load_tsv_dataset(folder)


def test_a_byte_order_mark_is_not_part_of_the_first_label(folder: Path) -> None:
    """A UTF-8 BOM used to become part of the first head: a new entity, so a test triple was not filtered."""
    (folder / "train.txt").write_bytes(b"\xef\xbb\xbf" + (folder / "train.txt").read_bytes())
    dataset = load_tsv_dataset(folder)
    assert _labelled(dataset, "train") == TRAIN
    assert "\ufeffb ent" not in dataset.entity_to_id


@pytest.mark.parametrize(("line", "empty"), [("\t\t", "head, relation, tail"), ("a\t\tc", "relation")])
def test_an_empty_label_is_refused(folder: Path, line: str, empty: str) -> None:
    """A tab-only line used to create the entity ''."""
    with (folder / "train.txt").open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")
    with pytest.raises(ValueError, match=f"^{re.escape(f'{folder}/train.txt line 4: empty {empty} label')}$"):
        load_tsv_dataset(folder)


def test_text_that_is_not_utf8_names_file_and_line(folder: Path) -> None:
    with (folder / "train.txt").open("ab") as handle:
        handle.write(b"caf\xe9\tlikes\ta\n")
    with pytest.raises(ValueError, match=f"^{re.escape(f'{folder}/train.txt line 4: not UTF-8 text')}"):
        load_tsv_dataset(folder)


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_damaged_gzip_names_the_file(folder: Path, damage: str) -> None:
    rows = [(f"e{i}", "r", f"e{i + 1}") for i in range(2000)]
    _write(folder / "valid.txt.gz", rows, compressed=True)
    data = (folder / "valid.txt.gz").read_bytes()
    if damage == "truncated":
        data = data[: len(data) // 2]
    else:
        data = data[:20] + bytes(byte ^ 0xFF for byte in data[20:60]) + data[60:]
    (folder / "valid.txt.gz").write_bytes(data)
    with pytest.raises(ValueError, match=f"^{re.escape(f'{folder}/valid.txt.gz: corrupt or truncated gzip data')}"):
        load_tsv_dataset(folder)


@pytest.mark.parametrize("name", SHIPPED_DATASETS)
def test_shipped_dataset_counts(name: str) -> None:
    dataset = load_shipped_dataset(name)
    counts = (dataset.num_entities, dataset.num_relations, len(dataset.train), len(dataset.valid))
    assert (*counts, len(dataset.test)) == SHIPPED_COUNTS[name]
    assert dataset.name == name
    for split in ("train", "valid", "test"):
        triples = getattr(dataset, split)
        assert len(torch.unique(triples, dim=0)) == len(triples)  # SOURCE.md: no duplicates within a split


def test_shipped_datasets_list() -> None:
    assert set(SHIPPED_DATASETS) == set(SHIPPED_COUNTS)


def test_load_shipped_dataset_unknown_name() -> None:
    message = "unknown shipped dataset 'FB15k-237'; choose one of umls, kinship, nations"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        load_shipped_dataset("FB15k-237")


def test_load_dataset_resolves_shipped_names_and_paths(folder: Path) -> None:
    assert load_dataset("Nations").num_entities == SHIPPED_COUNTS["nations"][0]
    assert load_dataset(folder).entity_to_id == load_tsv_dataset(folder).entity_to_id
    assert load_dataset(str(folder)).name == folder.name


def test_load_dataset_unknown(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The error names every path looked at and the variable that names the shared data folder."""
    monkeypatch.setenv("KGEVAL_SHARED_DATA", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    message = (
        "dataset 'no-such-dataset' is not a shipped dataset (umls, kinship, nations) and was not found: looked at "
        f"{tmp_path.resolve() / 'no-such-dataset'}; {tmp_path / 'no-such-dataset'} (the shared data folder, "
        "$KGEVAL_SHARED_DATA). Pass a folder, or set KGEVAL_SHARED_DATA to the folder that holds no-such-dataset/"
    )
    with pytest.raises(FileNotFoundError, match=f"^{re.escape(message)}$"):
        load_dataset("no-such-dataset")


def test_shared_data_dir_honours_environment_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KGEVAL_SHARED_DATA", str(tmp_path))
    assert shared_data_dir() == tmp_path
    monkeypatch.setenv("KGEVAL_SHARED_DATA", str(tmp_path / "missing"))
    fallback = shared_data_dir()  # falls back to <repo root>/../shared/data, which may be absent
    assert fallback is None or fallback.name == "data"


def test_load_dataset_from_shared_folder(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    monkeypatch.setenv("KGEVAL_SHARED_DATA", str(folder.parent))
    assert load_dataset(folder.name).entity_to_id == load_tsv_dataset(folder).entity_to_id


# -- real data from the shared folder (skipped when it is absent) -------------------------------------------

SHARED = shared_data_dir()
needs_shared = pytest.mark.skipif(SHARED is None, reason="shared benchmark data folder not found")


@needs_shared
def test_shared_umls_matches_shipped_copy() -> None:
    assert SHARED is not None
    shared = load_tsv_dataset(SHARED / "umls")
    shipped = load_shipped_dataset("umls")
    assert shared.entity_to_id == shipped.entity_to_id
    assert shared.relation_to_id == shipped.relation_to_id
    for split in ("train", "valid", "test"):
        assert torch.equal(getattr(shared, split), getattr(shipped, split))


@needs_shared
def test_shared_codex_s_counts() -> None:
    assert SHARED is not None
    if not (SHARED / "codex-s").is_dir():
        pytest.skip("codex-s not in the shared data folder")
    dataset = load_dataset("codex-s")
    counts = (dataset.num_entities, dataset.num_relations, len(dataset.train), len(dataset.valid))
    assert (*counts, len(dataset.test)) == (2034, 42, 32888, 1827, 1828)


# -- TriplesDataset validation -----------------------------------------------------------------------------


def _dataset(**overrides) -> TriplesDataset:
    fields = {
        "name": "toy",
        "train": torch.tensor([[0, 0, 1]]),
        "valid": torch.zeros((0, 3), dtype=torch.long),
        "test": torch.tensor([[1, 1, 2]]),
        "entity_to_id": {"a": 0, "b": 1, "c": 2},
        "relation_to_id": {"p": 0, "q": 1},
    }
    return TriplesDataset(**{**fields, **overrides})


def test_triples_dataset_repr_and_properties() -> None:
    dataset = _dataset()
    assert (dataset.num_entities, dataset.num_relations) == (3, 2)
    assert repr(dataset) == ("TriplesDataset(name='toy', num_entities=3, num_relations=2, train=1, valid=0, test=1)")


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        ({"train": [[0, 0, 1]]}, TypeError, "train must be a torch.Tensor, got list"),
        ({"valid": torch.zeros(3, dtype=torch.long)}, ValueError, "valid must have shape (n, 3), got (3,)"),
        ({"test": torch.zeros((1, 3))}, TypeError, "test must have dtype torch.int64, got torch.float32"),
        ({"train": torch.tensor([[0, 0, 3]])}, ValueError, "train has tail ids in [3, 3], outside [0, 2]"),
        ({"test": torch.tensor([[-1, 0, 0]])}, ValueError, "test has head ids in [-1, -1], outside [0, 2]"),
        ({"test": torch.tensor([[0, 2, 0]])}, ValueError, "test has relation ids in [2, 2], outside [0, 1]"),
    ],
)
def test_triples_dataset_validation(overrides: dict, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        _dataset(**overrides)
