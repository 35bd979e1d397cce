"""Inductive link prediction data: a training graph, and a disjoint inference graph that validation and test triples
are predicted over (:func:`load_inductive_dataset`; ILPC 2022's layout, read as PyKEEN's
``DisjointInductivePathDataset`` reads it, ids included).

Two entity spaces and one relation space:

- the **training graph** (``train``): its entities numbered by sorted label (``training_entity_to_id``), its
  relations by sorted label (``relation_to_id``);
- the **inference graph** (``inference``): its own entities by sorted label (``inference_entity_to_id``), the
  training graph's relations;
- **validation and test** (``inference_validation``, ``inference_test``): triples of the inference graph's ids, whose
  candidates are the inference graph's entities (PyKEEN's modes ``"validation"`` and ``"testing"``), filtered by
  the inference graph (and, for test, the validation triples).

A triple of the inference graph, validation or test whose entity is not in the inference graph, or whose relation
is not the training graph's, cannot be scored by a model of these graphs: it is dropped, as PyKEEN drops it, but
counted in an :class:`~kgeval.exceptions.UnseenLabelsWarning` and in the dataset's ``notes``. Entities the two
graphs share (none in ILPC 2022) are reported there too.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import torch

from kgeval.datasets.formats import folder_format, is_inductive_folder
from kgeval.datasets.labelled import Duplicates, LabelledSplit, check_id_table, handle_duplicates, map_splits
from kgeval.datasets.reading import FILE_PATTERNS, ReadOptions, read_splits
from kgeval.exceptions import UnseenLabelsWarning

__all__ = ["INDUCTIVE_FILES", "VALIDATION_FILTERS", "InductiveDataset", "ValidationFilter", "inference_split_kwargs",
           "is_inductive_folder", "load_inductive_dataset"]  # fmt: skip

#: how an inductive dataset's validation triples are filtered: "inference" (kgeval's inductive protocol, ILPC's
#: organisers': the inference graph and the validation triples) or "inference+test" (ULTRA's and InGram's code:
#: the test triples too)
ValidationFilter = Literal["inference", "inference+test"]
VALIDATION_FILTERS: tuple[str, ...] = get_args(ValidationFilter)


def inference_split_kwargs(split: str, inference: torch.Tensor, valid: torch.Tensor, test: torch.Tensor,
                           validation_filter: ValidationFilter) -> dict[str, Any]:  # fmt: skip
    """``mapped_triples``, ``additional_filter_triples`` and ``mode`` of ``split`` ("valid" or "test") over an
    inference graph, for :class:`InductiveDataset` and
    :class:`kgeval.datasets.fully_inductive.FullyInductiveDataset` alike: test filtered by the inference graph and
    the validation triples, validation by the inference graph (``validation_filter="inference"``) and the test
    triples too (``"inference+test"``); the evaluated triples are always filtered."""
    if validation_filter not in VALIDATION_FILTERS:
        raise ValueError(f"validation_filter must be one of {VALIDATION_FILTERS}, got {validation_filter!r}")
    if split in ("valid", "validation", "val"):
        known = [inference] + ([test] if validation_filter == "inference+test" else [])
        return {"mapped_triples": valid, "additional_filter_triples": known, "mode": "validation"}
    if split == "test":
        return {"mapped_triples": test, "additional_filter_triples": [inference, valid], "mode": "testing"}
    raise ValueError(f"split must be 'valid' or 'test', got {split!r}")


#: the files of an inductive dataset (any of kgeval's file patterns: ``.txt``, ``.txt.gz``, ``.tsv``, ``.tsv.gz``)
INDUCTIVE_FILES: tuple[str, ...] = ("train", "inference", "inference_validation", "inference_test")
#: the evaluation split -> (its file, PyKEEN's mode, the files it is filtered by besides itself)
_EVALUATED = {"valid": ("inference_validation", "validation", ("inference",)),
              "test": ("inference_test", "testing", ("inference", "inference_validation"))}  # fmt: skip


@dataclass(frozen=True, eq=False)
class InductiveDataset:
    """A training graph and an inference graph with its validation and test triples, mapped to ids.

    Attributes
    ----------
    name : str
    train : LongTensor of shape (n_train, 3)
        The training graph, in its own entity ids.
    inference : LongTensor of shape (n_inference, 3)
        The inference graph, in the inference entity ids.
    valid, test : LongTensor of shape (n, 3)
        Validation and test triples, in the inference entity ids.
    training_entity_to_id, inference_entity_to_id : dict of str to int
        Each graph's entity label -> id (sorted labels, as PyKEEN numbers them).
    relation_to_id : dict of str to int
        Relation label -> id, the training graph's, shared by every file.
    sources : dict of str to str
        File name (``train``, ``inference``, ...) -> the file it was read from.
    notes : tuple of str
        What was read, dropped and shared (:meth:`summary`).
    read_with : dict of str to str
        The reading options that decide the rows (``duplicates``).
    dropped : dict of str to dict of str to int
        File name (``inference``, ``inference_validation``, ``inference_test``) -> ``{"entity": n, "relation": m}``:
        the triples dropped for an entity outside the inference graph, and for a relation the training graph lacks
        (a triple with both counts as a relation drop).
    shared_entities : int
        Entity labels in both graphs.
    """

    name: str
    train: torch.Tensor = field(repr=False)
    inference: torch.Tensor = field(repr=False)
    valid: torch.Tensor = field(repr=False)
    test: torch.Tensor = field(repr=False)
    training_entity_to_id: dict[str, int] = field(repr=False)
    inference_entity_to_id: dict[str, int] = field(repr=False)
    relation_to_id: dict[str, int] = field(repr=False)
    sources: dict[str, str] = field(default_factory=dict, repr=False)
    notes: tuple[str, ...] = field(default=(), repr=False)
    read_with: dict[str, str] = field(default_factory=dict, repr=False)
    dropped: dict[str, dict[str, int]] = field(default_factory=dict, repr=False)
    shared_entities: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        training = (("head", self.num_training_entities), ("relation", self.num_relations),
                    ("tail", self.num_training_entities))  # fmt: skip
        inference = (("head", self.num_inference_entities), ("relation", self.num_relations),
                     ("tail", self.num_inference_entities))  # fmt: skip
        check_id_table("train", self.train, training)
        for split in ("inference", "valid", "test"):
            check_id_table(split, getattr(self, split), inference)

    @property
    def num_training_entities(self) -> int:
        return len(self.training_entity_to_id)

    @property
    def num_inference_entities(self) -> int:
        return len(self.inference_entity_to_id)

    @property
    def num_relations(self) -> int:
        return len(self.relation_to_id)

    def evaluation_kwargs(self, split: str, validation_filter: ValidationFilter = "inference") -> dict[str, Any]:
        """``mapped_triples``, ``additional_filter_triples`` and ``mode`` for evaluating ``split`` over the
        inference graph: "valid" filtered by the inference graph, "test" by the inference graph and the validation
        triples (the organisers' protocol of ILPC 2022; the evaluated triples are always filtered).

        ``validation_filter="inference+test"`` filters the validation triples by the test triples too, as ULTRA's
        code filters ILPC's validation split (its papers' validation numbers); the test split is the same either
        way. The same choice as :meth:`kgeval.datasets.fully_inductive.FullyInductiveDataset.evaluation_kwargs`."""
        return inference_split_kwargs(split, self.inference, self.valid, self.test, validation_filter)

    def to_pykeen(self, create_inverse_triples: bool = False) -> dict[str, Any]:
        """PyKEEN ``TriplesFactory`` objects of the four files with these ids -- ``transductive_training``,
        ``inductive_inference``, ``inductive_validation``, ``inductive_testing``, the names of PyKEEN's inductive
        datasets -- for PyKEEN's inductive models (``InductiveNodePiece`` needs ``create_inverse_triples=True`` on
        the training and inference factories; validation and test never have inverse triples, as in PyKEEN)."""
        from pykeen.triples import TriplesFactory

        def factory(triples: torch.Tensor, entities: dict[str, int], inverse: bool) -> Any:
            return TriplesFactory(mapped_triples=triples, entity_to_id=entities, relation_to_id=self.relation_to_id,
                                  create_inverse_triples=inverse)  # fmt: skip

        return {
            "transductive_training": factory(self.train, self.training_entity_to_id, create_inverse_triples),
            "inductive_inference": factory(self.inference, self.inference_entity_to_id, create_inverse_triples),
            "inductive_validation": factory(self.valid, self.inference_entity_to_id, False),
            "inductive_testing": factory(self.test, self.inference_entity_to_id, False),
        }

    def summary(self) -> str:
        """The dataset in a few lines: its graphs' sizes, and what was read, dropped and shared."""
        return "\n".join([repr(self), *self.notes])

    def __repr__(self) -> str:
        return (f"InductiveDataset(name={self.name!r}, training_entities={self.num_training_entities}, "
                f"inference_entities={self.num_inference_entities}, relations={self.num_relations}, "
                f"train={len(self.train)}, inference={len(self.inference)}, valid={len(self.valid)}, "
                f"test={len(self.test)})")  # fmt: skip


def load_inductive_dataset(path: str | os.PathLike[str], name: str | None = None, *, sep: str = "\t",
                           header: bool | Literal["auto"] = "auto",
                           duplicates: Duplicates = "keep") -> InductiveDataset:  # fmt: skip
    """Read an inductive dataset folder: ``train``, ``inference``, ``inference_validation`` and ``inference_test``
    files of ``head<sep>relation<sep>tail`` lines (read as :func:`kgeval.datasets.load_tsv_dataset` reads triples:
    ``.gz`` files, headers, comments, errors naming the file and line), with the ids of the module docstring.

    Parameters
    ----------
    path : str or path-like
    name : str, optional
        Default: the folder's name.
    sep : str, default="\\t"
    header : bool or "auto", default="auto"
        As for :func:`kgeval.datasets.load_tsv_dataset`: ``"auto"`` skips a known header line (``head relation
        tail``, ...) and, with a warning, a file's first line none of whose labels occurs anywhere else -- which an
        inference graph's first triple may be (a new relation between two entities seen once): pass ``False``
        to read every first line as a triple.
    duplicates : {"keep", "merge"}, default="keep"
        A triple repeating an earlier one of its file: kept or merged into the first (PyKEEN's factories merge
        them); either way counted in a :class:`~kgeval.datasets.labelled.DuplicatesWarning`.

    Returns
    -------
    InductiveDataset

    Raises
    ------
    FileNotFoundError
        For a missing folder or file (naming the files tried, and the reader of a train / valid / test folder).
    ValueError
        For a folder of another format (naming it and its reader), malformed lines (naming the file and line), or
        an empty training or inference graph.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"dataset folder {str(folder)!r} does not exist or is not a directory")
    _refuse_other_format(folder)
    files = read_splits(folder, str(folder), ReadOptions(sep, header), INDUCTIVE_FILES)
    sources = {name_: labels.source for name_, labels in files.items() if labels.source}
    training, training_entities, relations = map_splits({"train": files["train"]}, "keep")
    for graph in ("train", "inference"):
        if not files[graph].heads:
            raise ValueError(f"{sources.get(graph, graph)}: the {graph} graph holds no triple")
    inference_entities = _sorted_ids({*files["inference"].heads, *files["inference"].tails})
    notes = [f"{sources['train']}: the training graph, {len(training_entities):,} entities, "
             f"{len(relations):,} relations"]  # fmt: skip
    kept, dropped = {}, {}
    for file in ("inference", "inference_validation", "inference_test"):
        kept[file], dropped[file] = _scorable(files[file], inference_entities, relations)
    if not kept["inference"].heads:
        raise ValueError(f"{sources.get('inference', 'inference')}: the inference graph holds no triple once those of "
                         f"relations the training graph lacks are dropped ({len(files['inference'].heads):,} dropped): "
                         "nothing relates its entities to what a model learned")  # fmt: skip
    mapped = {file: map_splits({"train": kept[file]}, "keep", inference_entities, relations)[0]["train"]
              for file in kept}  # fmt: skip
    notes.append(f"{sources['inference']}: the inference graph, {len(inference_entities):,} entities")
    notes.extend(_drop_notes(dropped, sources))
    shared = set(training_entities) & set(inference_entities)
    notes.append(f"entities in both graphs: {len(shared):,}" + (" (a disjoint split)" if not shared else ""))
    unused = set(relations) - set(files["inference"].relations)
    if unused:
        notes.append(f"relations of the training graph absent from the inference graph: {len(unused):,}")
    tables = handle_duplicates({"train": training["train"], **mapped}, duplicates, "triples", sources)
    return InductiveDataset(
        name=folder.name if name is None else name,
        train=tables["train"],
        inference=tables["inference"],
        valid=tables["inference_validation"],
        test=tables["inference_test"],
        training_entity_to_id=training_entities,
        inference_entity_to_id=inference_entities,
        relation_to_id=relations,
        sources=sources,
        notes=tuple(notes),
        read_with={"duplicates": duplicates},
        dropped={
            file: {"entity": counts["rows"] - counts["relation"], "relation": counts["relation"]}
            for file, counts in dropped.items()
        },
        shared_entities=len(shared),
    )


def _refuse_other_format(folder: Path) -> None:
    """Nothing for an inductive folder (a train and an inference file); else the error naming what the folder
    holds and its reader, or the files an inductive folder holds."""
    found = folder_format(folder)
    if found.kind == "inductive":
        return
    if found.kind != "triples":
        raise found.refuse(folder, "kgeval.datasets.load_inductive_dataset")
    tried = ", ".join(pattern.format(split="inference") for pattern in FILE_PATTERNS)
    plain = all(any((folder / pattern.format(split=split)).is_file() for pattern in FILE_PATTERNS)
                for split in ("train", "valid", "test"))  # fmt: skip
    other = (": it holds train, valid and test triples, read by kgeval.datasets.load_dataset or "
             "kgeval.datasets.load_tsv_dataset" if plain else "")  # fmt: skip
    raise FileNotFoundError(f"no inference file in {str(folder)!r} (tried {tried}; an inductive dataset holds train, "
                            f"inference, inference_validation and inference_test files){other}")  # fmt: skip


def _sorted_ids(labels: set[str]) -> dict[str, int]:
    return {label: index for index, label in enumerate(sorted(labels))}


def _scorable(split: LabelledSplit, entities: Mapping[str, int], relations: Mapping[str, int]) -> tuple[
        LabelledSplit, dict[str, int]]:  # fmt: skip
    """(the rows whose entities are the inference graph's and whose relation is the training graph's, the counts of
    the rows dropped: by an unknown entity, by an unknown relation)."""
    keep = [i for i, (head, relation, tail) in enumerate(zip(split.heads, split.relations, split.tails, strict=True))
            if head in entities and tail in entities and relation in relations]  # fmt: skip
    unknown_relation = sum(relation not in relations for relation in split.relations)  # dropped whatever the entities
    counts = {"rows": len(split.heads) - len(keep), "relation": unknown_relation}
    if counts["rows"] == 0:
        return split, counts
    return LabelledSplit([split.heads[i] for i in keep], [split.relations[i] for i in keep],
                         [split.tails[i] for i in keep], [split.origins[i] for i in keep],
                         source=split.source), counts  # fmt: skip


def _drop_notes(dropped: Mapping[str, dict[str, int]], sources: Mapping[str, str]) -> list[str]:
    """A note per file that lost rows, and one UnseenLabelsWarning counting them all."""
    notes = []
    for file, counts in dropped.items():
        if counts["rows"]:
            notes.append(f"{sources.get(file, file)}: {counts['rows']:,} triples dropped ({counts['relation']:,} of "
                         "them by a relation the training graph lacks, the rest by an entity outside the inference "
                         "graph): no model of these graphs scores them")  # fmt: skip
    if notes:
        warnings.warn("; ".join(notes) + " (as PyKEEN drops them)", UnseenLabelsWarning, stacklevel=3)
    return notes
