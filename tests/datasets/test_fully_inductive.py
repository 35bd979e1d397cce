"""The fully inductive reader (InGram's layout): every triple of every file kept, in its order, with a vocabulary
per graph and the mapping between them -- checked against counts computed here from the files themselves, on the
four shared InGram sets and on a small folder written by hand."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
import torch

from kgeval.datasets import shared_data_dir
from kgeval.datasets.fully_inductive import is_fully_inductive_folder, load_fully_inductive_folder

INGRAM_SETS = ("InGram-NL-0", "InGram-NL-25", "InGram-NL-100", "InGram-WK-25")


def file_triples(path: Path) -> list[tuple[str, str, str]]:
    """The file's lines as label triples, read without kgeval."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [tuple(line.rstrip("\n").split("\t")) for line in handle if line.strip()]  # type: ignore[misc]


def labels_of(table: torch.Tensor, entities: dict[str, int], relations: dict[str, int]) -> list[tuple[str, ...]]:
    entity_labels = {index: label for label, index in entities.items()}
    relation_labels = {index: label for label, index in relations.items()}
    return [(entity_labels[h], relation_labels[r], entity_labels[t]) for h, r, t in table.tolist()]


def shared_set(name: str) -> Path:
    root = shared_data_dir()
    if root is None or not (root / name).is_dir():
        pytest.skip(f"needs the shared {name} data")
    return root / name


@pytest.mark.parametrize("name", INGRAM_SETS)
def test_a_shared_ingram_set_is_read_whole(name: str) -> None:
    folder = shared_set(name)
    files = {file: file_triples(folder / f"{file}.txt.gz") for file in ("train", "msg", "valid", "test")}
    train_entities = {x for h, _, t in files["train"] for x in (h, t)}
    train_relations = {r for _, r, _ in files["train"]}
    queried = files["msg"] + files["valid"] + files["test"]
    inference_entities = {x for h, _, t in queried for x in (h, t)}
    inference_relations = {r for _, r, _ in queried}

    data = load_fully_inductive_folder(folder)

    assert is_fully_inductive_folder(folder)
    assert (len(data.train), len(data.inference), len(data.valid), len(data.test)) == tuple(
        len(files[file]) for file in ("train", "msg", "valid", "test")
    )  # 0 triples dropped
    assert data.num_training_entities == len(train_entities)
    assert data.num_training_relations == len(train_relations)
    assert data.num_inference_entities == len(inference_entities)
    assert data.num_inference_relations == len(inference_relations)
    assert data.new_relations == len(inference_relations - train_relations)
    # every triple, in its file's order, as its labels
    assert labels_of(data.train, data.training_entity_to_id, data.training_relation_to_id) == files["train"]
    for table, file in ((data.inference, "msg"), (data.valid, "valid"), (data.test, "test")):
        assert labels_of(table, data.inference_entity_to_id, data.inference_relation_to_id) == files[file]
    # the mapping where labels coincide
    mapping = data.inference_relation_to_training.tolist()
    for label, index in data.inference_relation_to_id.items():
        assert mapping[index] == data.training_relation_to_id.get(label, -1)
    entity_mapping = data.inference_entity_to_training.tolist()
    assert sum(m >= 0 for m in entity_mapping) == len(train_entities & inference_entities)


def test_the_counts_of_the_issue() -> None:
    """The figures the issue measured by dropping: the triples of relations absent from training, now kept."""
    data = load_fully_inductive_folder(shared_set("InGram-NL-25"))
    new = data.inference_relation_to_training < 0
    assert int(new[data.inference[:, 1]].sum()) == 754 and int(new[data.test[:, 1]].sum()) == 230
    data = load_fully_inductive_folder(shared_set("InGram-NL-100"))
    assert data.new_relations == data.num_inference_relations == 53


def write(folder: Path, files: dict[str, list[tuple[str, str, str]]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for file, rows in files.items():
        (folder / f"{file}.txt").write_text("".join("\t".join(row) + "\n" for row in rows))
    return folder


def test_a_small_folder_keeps_new_relations_and_entities_only_in_queries(tmp_path: Path) -> None:
    folder = write(tmp_path / "tiny", {
        "train": [("a", "likes", "b"), ("b", "knows", "c")],
        "msg": [("x", "likes", "y"), ("y", "hates", "z"), ("x", "hates", "z")],
        "valid": [("x", "likes", "z")],
        "test": [("w", "owns", "x"), ("y", "likes", "x")],  # w and owns: only in test
    })  # fmt: skip
    data = load_fully_inductive_folder(folder, header=False)
    assert data.inference_entity_to_id == {"w": 0, "x": 1, "y": 2, "z": 3}
    assert data.inference_relation_to_id == {"hates": 0, "likes": 1, "owns": 2}
    assert data.training_relation_to_id == {"knows": 0, "likes": 1}
    assert data.inference_relation_to_training.tolist() == [-1, 1, -1]
    assert data.new_relations == 2
    assert data.test.tolist() == [[0, 2, 1], [2, 1, 1]]
    graph = data.graph("testing")
    assert graph.num_nodes == 4 and graph.num_relations == 3 and graph.edge_index.shape == (2, 3)
    assert graph.relation_labels == ("hates", "likes", "owns")
    inverse = graph.with_inverse_edges()
    assert inverse.num_relations == 6 and inverse.triples[3:].tolist() == [[2, 4, 1], [3, 3, 2], [3, 3, 1]]
    assert "1 with an entity outside the inference graph's edges" in data.summary()
    assert not is_fully_inductive_folder(tmp_path)
    with pytest.raises(FileNotFoundError, match="no msg file"):
        load_fully_inductive_folder(write(tmp_path / "no_msg", {"train": [("a", "r", "b")]}))


def test_evaluation_kwargs_and_the_validation_filter(tmp_path: Path) -> None:
    folder = write(tmp_path / "tiny", {"train": [("a", "r", "b")], "msg": [("x", "r", "y")],
                                       "valid": [("y", "r", "x")], "test": [("x", "s", "x")]})  # fmt: skip
    data = load_fully_inductive_folder(folder, header=False)
    ours = data.evaluation_kwargs("valid")
    field = data.evaluation_kwargs("valid", validation_filter="inference+test")
    assert ours["mode"] == field["mode"] == "validation"
    assert [t.tolist() for t in ours["additional_filter_triples"]] == [data.inference.tolist()]
    assert [t.tolist() for t in field["additional_filter_triples"]] == [data.inference.tolist(), data.test.tolist()]
    test = data.evaluation_kwargs("test")
    assert test["mode"] == "testing" and test["mapped_triples"] is data.test
    assert [t.tolist() for t in test["additional_filter_triples"]] == [data.inference.tolist(), data.valid.tolist()]
    with pytest.raises(ValueError, match="validation_filter must be one of"):
        data.evaluation_kwargs("valid", validation_filter="ultra")  # type: ignore[arg-type]
