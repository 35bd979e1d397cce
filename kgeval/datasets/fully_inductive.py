"""Fully inductive link prediction data: a training graph, and an inference graph with new entities **and new
relations** that validation and test triples are predicted over (:func:`load_fully_inductive_folder`; InGram's
layout, Lee et al. ICML 2023, as InGram's and ULTRA's loaders read it: nothing dropped).

A folder holds four files (any of :data:`kgeval.datasets.reading.FILE_PATTERNS`: ``.txt``, ``.txt.gz``, ``.tsv``,
``.tsv.gz``; ``head<TAB>relation<TAB>tail``):

- ``train``: the training graph;
- ``msg``: the inference graph (InGram's "message" triples: the known triples at test time);
- ``valid`` / ``test``: queries over the inference graph.

Two vocabularies per kind, each numbered by sorted label:

- the **training graph's** entities and relations (``training_entity_to_id``, ``training_relation_to_id``), from
  ``train``;
- the **inference graph's** (``inference_entity_to_id``, ``inference_relation_to_id``), from ``msg``, ``valid``
  and ``test`` together -- relations the training graph lacks included -- so every triple of these files is kept;
- the mapping between them where labels coincide: ``inference_relation_to_training[r]`` (and
  ``inference_entity_to_training[e]``) is the training graph's id of the same label, -1 for a new one.

Validation and test are ranked over the inference graph's entities with the inference graph's relation ids
(modes ``"validation"`` / ``"testing"``), filtered as :meth:`FullyInductiveDataset.evaluation_kwargs` says.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from kgeval.datasets.inductive import ValidationFilter, inference_split_kwargs
from kgeval.datasets.labelled import Duplicates, check_id_table, handle_duplicates, map_splits
from kgeval.datasets.reading import FILE_PATTERNS, ReadOptions, read_splits
from kgeval.graphs import Graph

__all__ = ["FULLY_INDUCTIVE_FILES", "FullyInductiveDataset", "ValidationFilter", "is_fully_inductive_folder",
           "load_fully_inductive_folder"]  # fmt: skip

#: InGram's files: the training graph, the inference graph ("msg"), and the queries over the inference graph
FULLY_INDUCTIVE_FILES: tuple[str, ...] = ("train", "msg", "valid", "test")


@dataclass(frozen=True, eq=False)
class FullyInductiveDataset:
    """A training graph, and an inference graph with its own entity and relation vocabularies, mapped to ids.

    Attributes
    ----------
    name : str
    train : LongTensor of shape (n_train, 3)
        The training graph, in the training graph's ids.
    inference : LongTensor of shape (n_msg, 3)
        The inference graph (``msg``), in the inference graph's ids.
    valid, test : LongTensor of shape (n, 3)
        Queries over the inference graph, in its ids.
    training_entity_to_id, training_relation_to_id : dict of str to int
        The training graph's vocabularies (sorted labels of ``train``).
    inference_entity_to_id, inference_relation_to_id : dict of str to int
        The inference graph's (sorted labels of ``msg``, ``valid`` and ``test``).
    sources : dict of str to str
        File name (``train``, ``msg``, ``valid``, ``test``) -> the file it was read from.
    notes : tuple of str
        What was read (:meth:`summary`).
    read_with : dict of str to str
        The reading options that decide the rows (``duplicates``).
    """

    name: str
    train: torch.Tensor = field(repr=False)
    inference: torch.Tensor = field(repr=False)
    valid: torch.Tensor = field(repr=False)
    test: torch.Tensor = field(repr=False)
    training_entity_to_id: dict[str, int] = field(repr=False)
    training_relation_to_id: dict[str, int] = field(repr=False)
    inference_entity_to_id: dict[str, int] = field(repr=False)
    inference_relation_to_id: dict[str, int] = field(repr=False)
    sources: dict[str, str] = field(default_factory=dict, repr=False)
    notes: tuple[str, ...] = field(default=(), repr=False)
    read_with: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        check_id_table("train", self.train, (("head", self.num_training_entities),
                                             ("relation", self.num_training_relations),
                                             ("tail", self.num_training_entities)))  # fmt: skip
        inference = (("head", self.num_inference_entities), ("relation", self.num_inference_relations),
                     ("tail", self.num_inference_entities))  # fmt: skip
        for split in ("inference", "valid", "test"):
            check_id_table(split, getattr(self, split), inference)

    @property
    def num_training_entities(self) -> int:
        return len(self.training_entity_to_id)

    @property
    def num_training_relations(self) -> int:
        return len(self.training_relation_to_id)

    @property
    def num_inference_entities(self) -> int:
        return len(self.inference_entity_to_id)

    @property
    def num_inference_relations(self) -> int:
        return len(self.inference_relation_to_id)

    @property
    def inference_relation_to_training(self) -> torch.Tensor:
        """(num_inference_relations,) LongTensor: the training graph's id of each inference relation's label, -1
        for a relation the training graph lacks."""
        return _to_other(self.inference_relation_to_id, self.training_relation_to_id)

    @property
    def inference_entity_to_training(self) -> torch.Tensor:
        """(num_inference_entities,) LongTensor: the training graph's id of each inference entity's label, -1 for
        an entity the training graph lacks (every one, in a disjoint split)."""
        return _to_other(self.inference_entity_to_id, self.training_entity_to_id)

    @property
    def new_relations(self) -> int:
        """Relations of the inference graph's vocabulary that the training graph lacks."""
        return int((self.inference_relation_to_training < 0).sum())

    def graph(self, mode: str) -> Graph:
        """The graph of an inductive mode, for a graph-conditioned model (:mod:`kgeval.adapters.graph`):
        ``"training"`` the training graph, ``"validation"`` / ``"testing"`` the inference graph (its labels, and
        each relation's training id where the label is the training graph's)."""
        if mode == "training":
            return Graph(self.train, self.num_training_entities, self.num_training_relations,
                         _labels(self.training_entity_to_id), _labels(self.training_relation_to_id),
                         torch.arange(self.num_training_relations), f"{self.name} training graph")  # fmt: skip
        if mode in ("validation", "testing"):
            return Graph(self.inference, self.num_inference_entities, self.num_inference_relations,
                         _labels(self.inference_entity_to_id), _labels(self.inference_relation_to_id),
                         self.inference_relation_to_training, f"{self.name} inference graph")  # fmt: skip
        raise ValueError(f"mode must be 'training', 'validation' or 'testing', got {mode!r}")

    def evaluation_kwargs(self, split: str, validation_filter: ValidationFilter = "inference") -> dict[str, Any]:
        """``mapped_triples``, ``additional_filter_triples`` and ``mode`` for evaluating ``split`` over the
        inference graph (its entities the candidates, its relation ids).

        Test triples are filtered by the inference graph and the validation triples (and themselves). Validation
        triples by the inference graph (and themselves) with ``validation_filter="inference"``, kgeval's inductive
        protocol; with ``"inference+test"`` by the test triples too, as InGram's and ULTRA's code filter them
        (their papers' validation numbers).
        """
        return inference_split_kwargs(split, self.inference, self.valid, self.test, validation_filter)

    def summary(self) -> str:
        """The dataset in a few lines: its graphs' sizes and vocabularies."""
        return "\n".join([repr(self), *self.notes])

    def __repr__(self) -> str:
        return (f"FullyInductiveDataset(name={self.name!r}, training_entities={self.num_training_entities}, "
                f"training_relations={self.num_training_relations}, "
                f"inference_entities={self.num_inference_entities}, "
                f"inference_relations={self.num_inference_relations}, new_relations={self.new_relations}, "
                f"train={len(self.train)}, inference={len(self.inference)}, valid={len(self.valid)}, "
                f"test={len(self.test)})")  # fmt: skip


def is_fully_inductive_folder(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` holds a fully inductive dataset of InGram's layout: a ``train`` and a ``msg`` file (any of
    :data:`kgeval.datasets.reading.FILE_PATTERNS`)."""
    path = Path(folder)
    return all(any((path / pattern.format(split=name)).is_file() for pattern in FILE_PATTERNS)
               for name in ("train", "msg"))  # fmt: skip


def load_fully_inductive_folder(path: str | os.PathLike[str], name: str | None = None, *, sep: str = "\t",
                                header: bool | Literal["auto"] = "auto",
                                duplicates: Duplicates = "keep") -> FullyInductiveDataset:  # fmt: skip
    """Read a fully inductive dataset folder -- ``train``, ``msg``, ``valid`` and ``test`` files of
    ``head<sep>relation<sep>tail`` lines (InGram's layout; read as :func:`kgeval.datasets.load_tsv_dataset` reads
    triples: ``.gz`` files, headers, comments, errors naming the file and line) -- whole, with the vocabularies of
    the module docstring: no triple is dropped.

    Parameters
    ----------
    path : str or path-like
    name : str, optional
        Default: the folder's name.
    sep : str, default="\\t"
    header : bool or "auto", default="auto"
        As for :func:`kgeval.datasets.load_tsv_dataset`. InGram's files have none: ``False`` reads every first
        line as a triple whatever its labels (``"auto"`` skips, with a warning, a first line none of whose labels
        occurs elsewhere).
    duplicates : {"keep", "merge"}, default="keep"
        A triple repeating an earlier one of its file: kept or merged into the first; either way counted in a
        :class:`~kgeval.datasets.labelled.DuplicatesWarning`.

    Raises
    ------
    FileNotFoundError
        For a missing folder or file (naming the files tried).
    ValueError
        For malformed lines (naming the file and line), or an empty training or inference graph.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"dataset folder {str(folder)!r} does not exist or is not a directory")
    files = read_splits(folder, str(folder), ReadOptions(sep, header), FULLY_INDUCTIVE_FILES)
    sources = {file: labels.source for file, labels in files.items() if labels.source}
    for graph in ("train", "msg"):
        if not files[graph].heads:
            raise ValueError(f"{sources.get(graph, graph)}: the {'training' if graph == 'train' else 'inference'} "
                             "graph holds no triple")  # fmt: skip
    training, training_entities, training_relations = map_splits({"train": files["train"]}, "keep")
    queries = [files[file] for file in ("msg", "valid", "test")]
    inference_entities = _sorted_ids({label for split in queries for label in (*split.heads, *split.tails)})
    inference_relations = _sorted_ids({label for split in queries for label in split.relations})
    mapped = {file: map_splits({"train": files[file]}, "keep", inference_entities, inference_relations)[0]["train"]
              for file in ("msg", "valid", "test")}  # fmt: skip
    tables = handle_duplicates({"train": training["train"], **mapped}, duplicates, "triples", sources)
    notes = _notes(files, sources, training_entities, training_relations, inference_entities, inference_relations)
    return FullyInductiveDataset(
        name=folder.name if name is None else name,
        train=tables["train"],
        inference=tables["msg"],
        valid=tables["valid"],
        test=tables["test"],
        training_entity_to_id=training_entities,
        training_relation_to_id=training_relations,
        inference_entity_to_id=inference_entities,
        inference_relation_to_id=inference_relations,
        sources=sources,
        notes=tuple(notes),
        read_with={"duplicates": duplicates},
    )


def _notes(files: Mapping[str, Any], sources: Mapping[str, str], training_entities: Mapping[str, int],
           training_relations: Mapping[str, int], inference_entities: Mapping[str, int],
           inference_relations: Mapping[str, int]) -> list[str]:  # fmt: skip
    """What was read: each graph's vocabulary, the new relations and what the files share."""
    msg = files["msg"]
    graph_entities = {*msg.heads, *msg.tails}
    new_relations = set(inference_relations) - set(training_relations)
    new_in_msg = sum(relation in new_relations for relation in msg.relations)
    notes = [f"{sources['train']}: the training graph, {len(training_entities):,} entities, "
             f"{len(training_relations):,} relations",
             f"{sources['msg']}: the inference graph, {len(graph_entities):,} entities, "
             f"{len(set(msg.relations)):,} relations; {new_in_msg:,} of its {len(msg.heads):,} triples have a "
             "relation the training graph lacks",
             f"the inference vocabulary (msg, valid, test): {len(inference_entities):,} entities, "
             f"{len(inference_relations):,} relations, {len(new_relations):,} of them new (not in train)"]  # fmt: skip
    for file in ("valid", "test"):
        split = files[file]
        new = sum(relation in new_relations for relation in split.relations)
        isolated = sum(head not in graph_entities or tail not in graph_entities
                       for head, tail in zip(split.heads, split.tails, strict=True))  # fmt: skip
        notes.append(f"{sources[file]}: {len(split.heads):,} triples, {new:,} with a new relation, {isolated:,} "
                     "with an entity outside the inference graph's edges")  # fmt: skip
    shared = set(training_entities) & set(inference_entities)
    notes.append(f"entities in both graphs: {len(shared):,}" + (" (a disjoint split)" if not shared else ""))
    return notes


def _sorted_ids(labels: set[str]) -> dict[str, int]:
    return {label: index for index, label in enumerate(sorted(labels))}


def _labels(vocabulary: Mapping[str, int]) -> tuple[str, ...]:
    """Id -> label of a vocabulary numbered 0..n-1."""
    labels = [""] * len(vocabulary)
    for label, index in vocabulary.items():
        labels[index] = label
    return tuple(labels)


def _to_other(vocabulary: Mapping[str, int], other: Mapping[str, int]) -> torch.Tensor:
    """(len(vocabulary),) LongTensor: each id's label's id in ``other``, -1 where ``other`` lacks it."""
    mapping = torch.full((len(vocabulary),), -1, dtype=torch.long)
    for label, index in vocabulary.items():
        if label in other:
            mapping[index] = other[label]
    return mapping
