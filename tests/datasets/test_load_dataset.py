"""``load_dataset``, the one front door: every kind of data kgeval evaluates (shipped and shared names, labelled
triples and quadruples, RE-Net / RE-GCN / xERTE folders of integer ids, inductive folders) is read as what it is,
with the counts of its files (counted here line by line); a folder of integer ids beside ``entity2id.txt`` /
``relation2id.txt`` is never read as labels, and every format-specific reader handed another format names the format
and the call that reads it."""

from __future__ import annotations

import datetime
import gzip
import importlib.resources
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kgeval import TemporalRankBasedEvaluator
from kgeval.datasets import (
    FullyInductiveDataset,
    InductiveDataset,
    TemporalDataset,
    TriplesDataset,
    load_any_dataset,
    load_dataset,
    load_inductive_dataset,
    load_renet_folder,
    load_temporal_tsv,
    load_tsv_dataset,
    shared_data_dir,
)
from kgeval.exceptions import UndefinedMetricWarning
from tests.helpers.ranks import assert_same_ranks
from tests.test_temporal_data import IntegerTNT, numpy_reference


def shared(name: str) -> Path:
    folder = shared_data_dir()
    if folder is None or not (folder / name).is_dir():
        pytest.skip(f"{name} is not in the shared data folder")
    return folder / name


def rows_of(file: Path | object) -> list[list[str]]:
    """The tab-separated fields of every non-empty line of a (gzip) file, counted here without kgeval."""
    raw = file.read_bytes()  # type: ignore[attr-defined]
    text = gzip.decompress(raw).decode("utf-8") if str(file).endswith(".gz") else raw.decode("utf-8")
    return [[field.strip() for field in line.split("\t")] for line in text.splitlines() if line.strip()]


def label_counts(splits: dict[str, list[list[str]]]) -> tuple[int, int]:
    """(distinct entities, distinct relations) of labelled rows."""
    rows = [row for split in splits.values() for row in split]
    return len({row[0] for row in rows} | {row[2] for row in rows}), len({row[1] for row in rows})


# -- the five kinds, by name ------------------------------------------------------------------------------------------


def test_the_shipped_nations() -> None:
    folder = importlib.resources.files("kgeval.datasets").joinpath("data").joinpath("nations")
    splits = {split: rows_of(folder.joinpath(f"{split}.txt.gz")) for split in ("train", "valid", "test")}
    data = load_dataset("nations")
    assert type(data) is TriplesDataset
    assert (data.num_entities, data.num_relations) == label_counts(splits) == (14, 55)
    assert [len(data.train), len(data.valid), len(data.test)] == [len(rows) for rows in splits.values()]


@pytest.mark.parametrize(("name", "kind", "fields"), [("FB15k-237", TriplesDataset, 3),
                                                      ("ICEWS14", TemporalDataset, 4)])  # fmt: skip
def test_shared_labelled_datasets(name: str, kind: type, fields: int) -> None:
    folder = shared(name)
    splits = {split: rows_of(folder / f"{split}.txt.gz") for split in ("train", "valid", "test")}
    assert {len(row) for rows in splits.values() for row in rows} == {fields}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FB15k-237's valid / test labels never seen in train
        data = load_dataset(name)
    assert type(data) is kind
    assert (data.num_entities, data.num_relations) == label_counts(splits)
    assert [len(data.train), len(data.valid), len(data.test)] == [len(rows) for rows in splits.values()]
    if fields == 4:
        assert data.num_times == len({row[3] for rows in splits.values() for row in rows}) == 365


def test_a_shared_inductive_dataset() -> None:
    folder = shared("ILPC2022-small")
    files = {name: rows_of(folder / f"{name}.txt.gz")
             for name in ("train", "inference", "inference_validation", "inference_test")}  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = load_dataset("ILPC2022-small")
    assert type(data) is InductiveDataset
    assert (data.num_training_entities, data.num_relations) == label_counts({"train": files["train"]})
    assert data.num_inference_entities == label_counts({"inference": files["inference"]})[0]
    for split, file in (("train", "train"), ("inference", "inference"), ("valid", "inference_validation"),
                        ("test", "inference_test")):  # fmt: skip
        dropped = sum(data.dropped.get(file, {}).values())
        assert len(getattr(data, split)) + dropped == len(files[file])


def test_a_fully_inductive_ingram_folder_is_read_whole_by_load_dataset_and_named_by_the_others(tmp_path: Path) -> None:
    folder = tmp_path / "ingram"
    folder.mkdir()
    rows = {"train": "a\tr\tb\nb\tr\tc\n", "msg": "x\tq\ty\ny\tr\tz\n", "valid": "x\tq\tz\n", "test": "z\tnew\tx\n"}
    for split, text in rows.items():
        (folder / f"{split}.txt").write_text(text)
    data = load_dataset(folder)
    assert isinstance(data, FullyInductiveDataset)
    assert load_dataset(folder, kind="fully-inductive").name == data.name
    with pytest.raises(ValueError, match="fully inductive dataset .*a fully-inductive dataset, but a triples"):
        load_dataset(folder, kind="triples")
    message = (
        r"fully inductive dataset \(InGram's layout.*read it with kgeval.datasets.load_dataset or "
        r"kgeval.datasets.load_fully_inductive_folder"
    )
    for reader in (load_tsv_dataset, load_temporal_tsv, load_inductive_dataset):
        with pytest.raises(ValueError, match=message):
            reader(folder)
    if shared_data_dir() is not None and (shared_data_dir() / "InGram-NL-0").is_dir():  # type: ignore[operator]
        assert isinstance(load_dataset("InGram-NL-0"), FullyInductiveDataset)


# -- folders of integer ids: RE-GCN (4 columns), RE-Net (5 columns), xERTE (no stat.txt) ----------------------------

#: the synthetic id folder's sizes: enough entities that '0', '1', '10', '100', ... sort away from 0, 1, 2, ...
ENTITIES, RELATIONS, TIMES = 120, 12, 15
#: layout -> (fifth column or None, stat.txt written, time unit: a time id's value in the files)
LAYOUTS = {"RE-GCN": (None, True, 1), "RE-Net": ("0", True, 1), "xERTE": ("-1", False, 24)}


def write_id_folder(folder: Path, layout: str, seed: int = 4) -> dict[str, np.ndarray]:
    """A folder of integer ids as the field ships them: entity and relation labels on a shuffled permutation of
    the ids (id files listed in shuffled order), tab-separated splits of (head, relation, tail, time) ids -- plus a
    fifth column and / or stat.txt as ``layout`` says. Returns each split's (n, 4) rows with time ids."""
    fifth, stat, unit = LAYOUTS[layout]
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    for file, count, name in (("entity2id.txt", ENTITIES, "Entity"), ("relation2id.txt", RELATIONS, "relation")):
        ids = rng.permutation(count)
        (folder / file).write_text("".join(f"{name} {label:03d}\t{ids[label]}\n" for label in rng.permutation(count)))
    if stat:
        (folder / "stat.txt").write_text(f"{ENTITIES}\t{RELATIONS}\t{TIMES}\n")
    written = {}
    for split, (first, count, span) in {"train": (0, 600, 10), "valid": (10, 100, 2), "test": (12, 100, 3)}.items():
        rows = np.column_stack([rng.integers(0, ENTITIES, count), rng.integers(0, RELATIONS, count),
                                rng.integers(0, ENTITIES, count), first + np.arange(count) % span])  # fmt: skip
        written[split] = rows
        extra = "" if fifth is None else f"\t{fifth}"
        (folder / f"{split}.txt").write_text("".join(f"{h}\t{r}\t{t}\t{tau * unit}{extra}\n" for h, r, t, tau in rows))
    return written


@pytest.mark.parametrize("layout", LAYOUTS)
def test_an_id_folder_is_read_with_its_own_ids_and_counts(tmp_path: Path, layout: str) -> None:
    folder = tmp_path / layout
    written = write_id_folder(folder, layout)
    data = load_dataset(folder)
    assert type(data) is TemporalDataset
    assert data.num_entities == len(rows_of(folder / "entity2id.txt")) == ENTITIES
    assert data.num_relations == len(rows_of(folder / "relation2id.txt")) == RELATIONS
    assert data.num_times == TIMES
    for split, rows in written.items():
        assert len(getattr(data, split)) == len(rows_of(folder / f"{split}.txt"))
        assert getattr(data, split).tolist() == rows.tolist()  # the files' ids, never renumbered
    for file, vocabulary in (("entity2id.txt", data.entity_to_id), ("relation2id.txt", data.relation_to_id)):
        assert vocabulary == {label: int(index) for label, index in rows_of(folder / file)}
    assert any("no stat.txt" in note for note in data.notes) == (layout == "xERTE")


def test_the_shared_icews14_as_xerte_ships_it(tmp_path: Path) -> None:
    """ICEWS14 written back in xERTE's layout (ids on a shuffled permutation, hours since 2014-01-01, a fifth
    column of -1, no stat.txt) reads with the counts of its files and, through the id files, the labels of the
    shared folder."""
    source = shared("ICEWS14")
    labelled = {split: rows_of(source / f"{split}.txt.gz") for split in ("train", "valid", "test")}
    rows = [row for split in labelled.values() for row in split]
    rng = np.random.default_rng(5)
    entities = sorted({row[0] for row in rows} | {row[2] for row in rows})
    relations = sorted({row[1] for row in rows})
    entity_ids = dict(zip(entities, rng.permutation(len(entities)).tolist(), strict=True))
    relation_ids = dict(zip(relations, rng.permutation(len(relations)).tolist(), strict=True))
    folder = tmp_path / "ICEWS14_forecasting"
    folder.mkdir()
    (folder / "entity2id.txt").write_text("".join(f"{label}\t{index}\n" for label, index in entity_ids.items()))
    (folder / "relation2id.txt").write_text("".join(f"{label}\t{index}\n" for label, index in relation_ids.items()))
    start = datetime.date(2014, 1, 1)
    for split, lines in labelled.items():
        hours = [(datetime.date.fromisoformat(row[3]) - start).days * 24 for row in lines]
        (folder / f"{split}.txt").write_text("".join(
            f"{entity_ids[h]}\t{relation_ids[r]}\t{entity_ids[t]}\t{hour}\t-1\n"
            for (h, r, t, _), hour in zip(lines, hours, strict=True)))  # fmt: skip
    data = load_dataset(folder)
    assert type(data) is TemporalDataset
    assert (data.num_entities, data.num_relations, data.num_times) == (len(entities), len(relations), 365)
    assert [len(data.train), len(data.valid), len(data.test)] == [len(lines) for lines in labelled.values()]
    assert data.times is not None and data.times.granularity == 24
    entity_labels = {index: label for label, index in data.entity_to_id.items()}
    relation_labels = {index: label for label, index in data.relation_to_id.items()}
    for split, lines in labelled.items():
        read = [[entity_labels[h], relation_labels[r], entity_labels[t]]
                for h, r, t, _ in getattr(data, split).tolist()]  # fmt: skip
        assert read == [row[:3] for row in lines]


# -- the 4-column id folder: one MRR through every documented reader, or a clear refusal ------------------------------


def brute_force_mrr(expected: dict[str, dict[str, np.ndarray]]) -> float:
    """MRR of realistic ranks ((optimistic + pessimistic) / 2, METRICS.md) over both sides."""
    ranks = np.concatenate([(side["optimistic"] + side["pessimistic"]) / 2 for side in expected.values()])
    return float(np.mean(1.0 / ranks))


def read_or_refuse(reader, folder: Path) -> tuple[Any, str | None]:
    """(what ``reader`` read, None), or (None, its ValueError's message)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a misreading's UnseenLabelsWarning must not pass for a refusal
            return reader(folder), None
    except ValueError as error:
        return None, str(error)


READERS = {"load_dataset": load_dataset, "load_any_dataset": load_any_dataset, "load_renet_folder": load_renet_folder,
           "load_temporal_tsv": load_temporal_tsv, "load_tsv_dataset": load_tsv_dataset}  # fmt: skip


@pytest.mark.parametrize("reader", READERS)
def test_a_regcn_folder_gives_one_mrr_through_every_reader_or_a_clear_refusal(tmp_path: Path, reader: str) -> None:
    """A model trained on the folder's ids (here: fixed integer embeddings indexed by them) ranks the test split as
    the brute-force reference over the written rows, whichever reader read the folder -- or the reader refuses in
    one line naming load_dataset and load_renet_folder. Read as labels, the ids would be renumbered by string sort
    (entity '10' -> 2) and every count still fit: a wrong MRR in silence."""
    folder = tmp_path / "ICEWS14s"
    written = write_id_folder(folder, "RE-GCN")
    model = IntegerTNT(ENTITIES, RELATIONS, TIMES, seed=7)
    known = np.concatenate([written["test"], written["train"], written["valid"]])
    expected = numpy_reference(model, written["test"], known, "time-aware")
    data, refusal = read_or_refuse(READERS[reader], folder)
    if refusal is not None:
        assert reader in ("load_temporal_tsv", "load_tsv_dataset"), f"{reader} must read the folder: {refusal}"
        assert "\n" not in refusal and "RE-Net-format folder of integer ids" in refusal
        assert "kgeval.datasets.load_dataset" in refusal and "kgeval.datasets.load_renet_folder" in refusal
        return
    assert (data.num_entities, data.num_relations, data.num_times) == (ENTITIES, RELATIONS, TIMES)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        results = TemporalRankBasedEvaluator(batch_size=64).evaluate(
            model, data.test, additional_filter_quadruples=[data.train, data.valid], use_tqdm=False
        )
    assert_same_ranks(results.records, expected)
    assert results["mrr"] == pytest.approx(brute_force_mrr(expected), abs=1e-12)


# -- every reader names the format it found and the call that reads it ------------------------------------------------


def write_folder(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


TRIPLES = "a\tr\tb\nb\tr\tc\n"
QUADRUPLES = "a\tr\tb\t1\nb\tr\tc\t2\n"
FOLDERS = {
    "triples": {f"{split}.txt": TRIPLES for split in ("train", "valid", "test")},
    "quadruples": {f"{split}.txt": QUADRUPLES for split in ("train", "valid", "test")},
    "inductive": {f"{name}.txt": TRIPLES for name in ("train", "inference", "inference_validation", "inference_test")},
    "id-triples": {"entity2id.txt": "a\t0\nb\t1\n", "relation2id.txt": "r\t0\n",
                   **{f"{split}.txt": "0\t0\t1\n" for split in ("train", "valid", "test")}},
}  # fmt: skip


@pytest.mark.parametrize(
    ("found", "reader", "message"),
    [
        ("RE-Net", load_tsv_dataset, r"RE-Net-format folder of integer ids.*load_tsv_dataset does not read.*"
                                     r"load_dataset or kgeval\.datasets\.load_renet_folder"),
        ("xERTE", load_temporal_tsv, r"RE-Net-format folder of integer ids.*load_temporal_tsv does not read.*"
                                     r"load_dataset or kgeval\.datasets\.load_renet_folder"),
        ("RE-GCN", load_inductive_dataset, r"RE-Net-format folder.*load_inductive_dataset does not read.*"
                                           r"load_renet_folder"),
        ("inductive", load_tsv_dataset, r"an inductive dataset.*load_dataset or kgeval\.datasets\.load_inductive"),
        ("inductive", load_temporal_tsv, r"an inductive dataset.*load_dataset or kgeval\.datasets\.load_inductive"),
        ("inductive", load_renet_folder, r"an inductive dataset.*load_dataset or kgeval\.datasets\.load_inductive"),
        ("quadruples", load_renet_folder, r"no entity2id\.txt, relation2id\.txt.*labelled \(head, relation, tail, "
                                          r"time\) quadruples: read it with kgeval\.datasets\.load_dataset or "
                                          r"kgeval\.datasets\.load_temporal_tsv"),
        ("quadruples", load_inductive_dataset, r"labelled \(head, relation, tail, time\) quadruples.*"
                                               r"load_temporal_tsv"),
        ("triples", load_inductive_dataset, r"no inference file.*train, valid and test triples, read by "
                                            r"kgeval\.datasets\.load_dataset or kgeval\.datasets\.load_tsv_dataset"),
        ("triples", load_renet_folder, r"no entity2id\.txt.*labelled triples: read it with kgeval\.datasets\."
                                       r"load_dataset or kgeval\.datasets\.load_tsv_dataset"),
        ("id-triples", load_tsv_dataset, r"integer ids of triples beside entity2id\.txt.*never reads ids as labels"),
        ("id-triples", load_dataset, r"integer ids of triples beside entity2id\.txt.*never reads ids as labels"),
        ("id-triples", load_renet_folder, r"integer ids of triples beside entity2id\.txt.*never reads ids as labels"),
    ],
)  # fmt: skip
def test_a_reader_handed_another_format_names_it_and_its_reader(tmp_path: Path, found: str, reader, message) -> None:
    folder = tmp_path / found
    if found in LAYOUTS:
        write_id_folder(folder, found)
    else:
        write_folder(folder, FOLDERS[found])
    with pytest.raises((ValueError, FileNotFoundError), match=message) as caught:
        reader(folder)
    assert "\n" not in str(caught.value)


def test_a_labelled_folder_beside_id_files_is_still_labels(tmp_path: Path) -> None:
    """Id files beside labelled splits (some distributions ship both) do not make a folder of ids."""
    folder = write_folder(tmp_path / "both", {**FOLDERS["quadruples"], "entity2id.txt": "a\t0\nb\t1\nc\t2\n",
                                              "relation2id.txt": "r\t0\n"})  # fmt: skip
    data = load_dataset(folder)
    assert type(data) is TemporalDataset and data.train.tolist() == [[0, 0, 1, 0], [1, 0, 2, 1]]


def test_a_kind_asked_for_and_time_ids_are_checked(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "tkg", FOLDERS["quadruples"])
    assert type(load_dataset(folder, kind="temporal")) is TemporalDataset
    with pytest.raises(ValueError, match=r"holds labelled \(head, relation, tail, time\) quadruples, a temporal "
                                         r"dataset, but a triples dataset was asked for"):  # fmt: skip
        load_dataset(folder, kind="triples")
    with pytest.raises(ValueError, match=r"nations holds labelled triples \(a shipped dataset\), which has no times"):
        load_dataset("nations", time_to_id={"1": 0})
    with pytest.raises(ValueError, match="kind must be one of triples, temporal, inductive"):
        load_dataset("nations", kind="quadruples")  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="an inductive dataset: its ids are those of its two graphs"):
        load_dataset(write_folder(tmp_path / "ind", FOLDERS["inductive"]), entity_to_id={"a": 0, "b": 1, "c": 2})
