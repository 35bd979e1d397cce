"""Link-prediction datasets: ``train`` / ``valid`` / ``test`` label files (or tables) mapped to integer ids,
the three shipped datasets (UMLS, Kinship, Nations) and the shared benchmark folder. Ids come by sorted label unless
a vocabulary is given (:mod:`kgeval.datasets.labelled` holds the rules).

:func:`load_dataset` is the front door: it reads every kind of data kgeval evaluates -- a shipped or shared name,
labelled triples, labelled quadruples, RE-Net-format folders of ids, inductive folders -- and returns the matching
dataset (:mod:`kgeval.datasets.formats` tells the kinds apart). The format-specific readers stay for their options
and refuse a folder of another format, naming the call that reads it.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal, TypeAlias, overload

import torch

from kgeval.datasets import scenarios
from kgeval.datasets.formats import folder_format, refuse_other_format
from kgeval.datasets.fully_inductive import FullyInductiveDataset, load_fully_inductive_folder
from kgeval.datasets.inductive import InductiveDataset, load_inductive_dataset
from kgeval.datasets.labelled import (
    Duplicates,
    LabelledSplit,
    Unseen,
    check_id_table,
    handle_duplicates,
    map_splits,
    split_from_table,
)
from kgeval.datasets.reading import SPLITS, ReadOptions, UnreadFilesWarning, read_splits
from kgeval.datasets.renet import load_renet_folder
from kgeval.datasets.temporal import TemporalDataset, load_temporal_tsv, time_keys

__all__ = [
    "SHIPPED_DATASETS",
    "SPLITS",
    "AnyDataset",
    "DatasetKind",
    "FullyInductiveDataset",
    "InductiveDataset",
    "TemporalDataset",
    "TriplesDataset",
    "UnreadFilesWarning",
    "dataset_fingerprint",
    "dataset_folder",
    "inductive_folder",
    "labels_by_id",
    "load_any_dataset",
    "load_dataset",
    "load_fully_inductive_folder",
    "load_inductive_dataset",
    "load_labelled_triples",
    "load_renet_folder",
    "load_shipped_dataset",
    "load_temporal_tsv",
    "load_tsv_dataset",
    "not_found_message",
    "shared_data_dir",
    "split_fingerprint",
    "temporal_folder",
]

#: Names of the datasets packaged in ``kgeval/datasets/data``.
SHIPPED_DATASETS: tuple[str, ...] = ("umls", "kinship", "nations")


#: Environment variable naming the shared benchmark data folder.
SHARED_DATA_ENV = "KGEVAL_SHARED_DATA"


@dataclass(frozen=True, eq=False)
class TriplesDataset:
    """Train, validation and test triples of one knowledge graph, mapped to integer ids.

    Attributes
    ----------
    name : str
        A short name (the folder name for datasets read from disk).
    train, valid, test : LongTensor of shape (n_split, 3)
        (head, relation, tail) ids of each split.
    entity_to_id : dict of str to int
        Entity label -> id; ids are ``0 .. num_entities - 1``.
    relation_to_id : dict of str to int
        Relation label -> id; ids are ``0 .. num_relations - 1``.

    Notes
    -----
    Equality and hashing are by identity (the fields hold tensors). The constructor checks shapes, dtypes
    and id ranges of the three splits.
    """

    name: str
    #: LongTensor of shape (n_train, 3): (head, relation, tail) ids.
    train: torch.Tensor = field(repr=False)
    #: LongTensor of shape (n_valid, 3).
    valid: torch.Tensor = field(repr=False)
    #: LongTensor of shape (n_test, 3).
    test: torch.Tensor = field(repr=False)
    #: entity label -> id, ids 0 .. num_entities - 1.
    entity_to_id: dict[str, int] = field(repr=False)
    #: relation label -> id, ids 0 .. num_relations - 1.
    relation_to_id: dict[str, int] = field(repr=False)
    #: split -> the file it was read from (empty for datasets built in memory), for messages.
    sources: dict[str, str] = field(default_factory=dict, repr=False)
    #: the reading options that decide which rows were kept ({"unseen": ..., "duplicates": ...}; empty when
    #: unknown): what a checkpoint records, to read its data again the same way.
    read_with: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        columns = (("head", self.num_entities), ("relation", self.num_relations), ("tail", self.num_entities))
        for split in SPLITS:
            check_id_table(split, getattr(self, split), columns)

    @property
    def num_entities(self) -> int:
        """Number of entities (the size of :attr:`entity_to_id`)."""
        return len(self.entity_to_id)

    @property
    def num_relations(self) -> int:
        """Number of relations (the size of :attr:`relation_to_id`)."""
        return len(self.relation_to_id)

    def evaluation_kwargs(self, split: str) -> dict[str, Any]:
        """``mapped_triples`` and ``additional_filter_triples`` for evaluating ``split`` without leaking test triples.

        "valid" filters train + valid (training, early stopping, HPO); "test" filters train + valid + test (the
        final report). See :mod:`kgeval.datasets.scenarios`.

        Examples
        --------
        >>> ds = load_shipped_dataset("nations")
        >>> [len(t) for t in ds.evaluation_kwargs("valid")["additional_filter_triples"]]
        [1592, 199]
        """
        return scenarios.evaluation_kwargs(split, self.train, self.valid, self.test)

    def __repr__(self) -> str:
        return (
            f"TriplesDataset(name={self.name!r}, num_entities={self.num_entities}, "
            f"num_relations={self.num_relations}, train={len(self.train)}, valid={len(self.valid)}, "
            f"test={len(self.test)})"
        )


def labels_by_id(label_to_id: Mapping[str, int]) -> list[str]:
    """The label of each id (``label_to_id`` inverted; where several labels share an id -- spellings of one time --
    the first one)."""
    labels = [""] * len(set(label_to_id.values()))
    for label, index in label_to_id.items():
        labels[index] = labels[index] or label
    return labels


def split_fingerprint(dataset: Any, split: str) -> str:
    """The first 16 hex digits of the SHA-256 of one split's labelled rows, sorted (``head\trelation\ttail`` lines,
    with ``\ttime`` for quadruples, a time named by its instant, :func:`kgeval.datasets.temporal.time_keys`): equal
    for equal contents whatever the ids, the order of the file or the spelling of a time. Works for a
    :class:`TriplesDataset` and a :class:`TemporalDataset`."""
    names = [labels_by_id(dataset.entity_to_id), labels_by_id(dataset.relation_to_id)]
    names.append(names[0])
    if getattr(dataset, "time_to_id", None) is not None:
        names.append(time_keys(dataset.time_to_id))
    rows = sorted("\t".join(names[c][v] for c, v in enumerate(row)) for row in getattr(dataset, split).tolist())
    return hashlib.sha256("\n".join(rows).encode("utf-8")).hexdigest()[:16]


def dataset_fingerprint(dataset: Any) -> str:
    """The first 16 hex digits of the SHA-256 of the three splits' fingerprints (:func:`split_fingerprint`): what a
    checkpoint stores to recognise the data it was trained on."""
    parts = "\n".join(f"{split}:{split_fingerprint(dataset, split)}" for split in SPLITS)
    return hashlib.sha256(parts.encode("utf-8")).hexdigest()[:16]


def load_tsv_dataset(
    path: str | os.PathLike[str],
    name: str | None = None,
    *,
    sep: str = "\t",
    header: bool | Literal["auto"] = "auto",
    unseen: Unseen = "warn",
    entity_to_id: Mapping[str, int] | None = None,
    relation_to_id: Mapping[str, int] | None = None,
    duplicates: Duplicates = "keep",
) -> TriplesDataset:
    """Read a dataset folder of labelled triples.

    Parameters
    ----------
    path : str or path-like
        Folder holding one file per split, each named ``<split>.txt``, ``<split>.txt.gz``, ``<split>.tsv`` or
        ``<split>.tsv.gz`` (``.gz`` files are gzip-compressed). Every non-empty line is
        ``head<sep>relation<sep>tail``; empty lines and lines starting with ``#`` (comments) are skipped, and
        spaces and carriage returns around a label are no part of it. The folder's other data files (names ending
        as a split file's) are not read: one :class:`~kgeval.datasets.reading.UnreadFilesWarning` names them with
        why (CoDEx's ``valid_negatives`` / ``test_negatives``: hard negatives for triple classification, which
        link prediction does not read -- :func:`kgeval.variants.load_split_with_negatives` does; label lists;
        other splits).
    name : str, default=None
        Dataset name; defaults to the folder name.
    sep : str, default="\t"
        The field separator.
    header : bool or "auto", default="auto"
        Whether each file's first line is a header. "auto" skips a first line that reads like one
        (``head relation tail``, ``subject predicate object``, ``h r t``, ``e1 rel e2``, ``src rel dst``, ... in
        any case), and, with a warning, a first line none of whose three labels occurs anywhere else in the
        dataset (a header of another form: it is never silently read as a triple). False reads every line.
    unseen : {"warn", "keep", "drop"}, default="warn"
        Valid / test triples whose entities or relations never occur in train: kept with an
        :class:`~kgeval.datasets.labelled.UnseenLabelsWarning` counting
        them, kept silently, or dropped (PyKEEN's behaviour;
        ids then come from the train labels only).
    entity_to_id, relation_to_id : mapping of str to int, optional
        Use these ids (e.g. a PyKEEN ``TriplesFactory``'s, to evaluate a model trained on it); a label outside them
        is a ValueError naming the file and line.
    duplicates : {"keep", "merge"}, default="keep"
        A triple equal to an earlier one of the same split: kept (ranked as often as it occurs) or merged into the
        first; either way a :class:`~kgeval.datasets.labelled.DuplicatesWarning` counts them per split.

    Returns
    -------
    TriplesDataset
        Ids assigned by sorted label over the union of the three splits, unless given.

    Raises
    ------
    FileNotFoundError
        If the folder does not exist or a split file is missing (the message names the folder and the file
        names tried).
    ValueError
        If the folder holds another format (RE-Net's integer ids beside ``entity2id.txt`` / ``relation2id.txt``,
        never read as labels; an inductive dataset; ...: the message names the call that reads it), a split has
        more than one candidate file, a line does not have exactly 3 tab-separated non-empty fields (five:
        interval-valued temporal facts, which kgeval does not read yet, the message says) or is not UTF-8, or
        gzip data is corrupt or truncated (the message names the file and the 1-based line number). A
        leading UTF-8 byte-order mark is dropped, never read as part of the first label.

    Examples
    --------
    >>> ds = load_tsv_dataset("path/to/FB15k-237")  # doctest: +SKIP
    >>> ds.train.shape  # doctest: +SKIP
    torch.Size([272115, 3])
    """
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"dataset folder {str(folder)!r} does not exist or is not a directory")
    refuse_other_format(folder, ("triples", "quadruples"), "kgeval.datasets.load_tsv_dataset")
    splits = read_splits(folder, str(folder), ReadOptions(sep, header))
    return _dataset(splits, folder.name if name is None else name, unseen, entity_to_id, relation_to_id, duplicates)


def load_labelled_triples(
    train: Any,
    valid: Any,
    test: Any,
    name: str = "labelled",
    *,
    unseen: Unseen = "warn",
    entity_to_id: Mapping[str, int] | None = None,
    relation_to_id: Mapping[str, int] | None = None,
    duplicates: Duplicates = "keep",
) -> TriplesDataset:
    """A dataset from labelled triples in memory: DataFrames (columns ``head``, ``relation``, ``tail``, or the
    first three) or (n, 3) arrays / lists of string labels, one per split.

    ``unseen``, ``entity_to_id``, ``relation_to_id`` and ``duplicates`` as in :func:`load_tsv_dataset`.

    Examples
    --------
    >>> ds = load_labelled_triples([["a", "likes", "b"], ["b", "likes", "c"]], [["a", "likes", "c"]], [])
    >>> ds.entity_to_id, ds.valid.tolist()
    ({'a': 0, 'b': 1, 'c': 2}, [[0, 0, 2]])
    """
    splits = {split: split_from_table(table, split) for split, table in zip(SPLITS, (train, valid, test), strict=True)}
    return _dataset(splits, name, unseen, entity_to_id, relation_to_id, duplicates)


def _dataset(
    splits: Mapping[str, LabelledSplit],
    name: str,
    unseen: Unseen,
    entity_to_id: Mapping[str, int] | None,
    relation_to_id: Mapping[str, int] | None,
    duplicates: Duplicates = "keep",
) -> TriplesDataset:
    mapped, entity_ids, relation_ids = map_splits(splits, unseen, entity_to_id, relation_to_id)
    sources = {split: labels.source for split, labels in splits.items() if labels.source}
    mapped = handle_duplicates(mapped, duplicates, "triples", sources)
    return TriplesDataset(
        name=name,
        train=mapped["train"],
        valid=mapped["valid"],
        test=mapped["test"],
        entity_to_id=entity_ids,
        relation_to_id=relation_ids,
        sources={split: labels.source for split, labels in splits.items() if labels.source},
        read_with={"unseen": unseen, "duplicates": duplicates},
    )


def load_shipped_dataset(
    name: str = "umls",
    *,
    entity_to_id: Mapping[str, int] | None = None,
    relation_to_id: Mapping[str, int] | None = None,
) -> TriplesDataset:
    """Load one of the datasets packaged with kgeval.

    Parameters
    ----------
    name : {"umls", "kinship", "nations"}, default="umls"
        Dataset name, case-insensitive (see :data:`SHIPPED_DATASETS`).

    Returns
    -------
    TriplesDataset

    Raises
    ------
    ValueError
        If ``name`` is not a shipped dataset.

    Examples
    --------
    >>> ds = load_shipped_dataset("umls")
    >>> ds.num_entities, ds.num_relations, len(ds.train), len(ds.valid), len(ds.test)
    (135, 46, 5216, 652, 661)
    """
    key = name.lower()
    if key not in SHIPPED_DATASETS:
        raise ValueError(f"unknown shipped dataset {name!r}; choose one of {', '.join(SHIPPED_DATASETS)}")
    folder = importlib.resources.files("kgeval.datasets").joinpath("data").joinpath(key)
    return _load_folder(folder, display=f"kgeval/datasets/data/{key}", name=key, entity_to_id=entity_to_id,
                        relation_to_id=relation_to_id)  # fmt: skip


def shared_data_dir() -> Path | None:
    """Locate the shared benchmark data folder (``<name>/{train,valid,test}.txt.gz`` per dataset).

    Looks at the environment variable ``KGEVAL_SHARED_DATA`` first, then at ``../shared/data`` relative to the
    directory that contains the ``kgeval`` package (``<repo root>/../shared/data`` in a source checkout).

    Returns
    -------
    Path or None
        The folder, or None when neither location is an existing directory.
    """
    env = os.environ.get(SHARED_DATA_ENV)
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[3] / "shared" / "data")
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return None


def dataset_folder(name_or_path: str | os.PathLike[str]) -> Path | None:
    """The folder :func:`load_dataset` would read for ``name_or_path`` (an existing folder, or one of the shared
    data folder); None for a shipped dataset name or a name that resolves to nothing."""
    text = os.fspath(name_or_path)
    if text.lower() in SHIPPED_DATASETS:
        return None
    if Path(text).is_dir():
        return Path(text)
    shared = shared_data_dir()
    if shared is not None and (shared / text).is_dir():
        return shared / text
    return None


def inductive_folder(name_or_path: str | os.PathLike[str]) -> Path | None:
    """The folder :func:`dataset_folder` finds for ``name_or_path`` when it holds an inductive dataset (a train and
    an inference file, :func:`kgeval.datasets.formats.folder_format`), else None."""
    folder = dataset_folder(name_or_path)
    return folder if folder is not None and folder_format(folder).kind == "inductive" else None


def temporal_folder(name_or_path: str | os.PathLike[str]) -> Path | None:
    """The folder :func:`dataset_folder` finds for ``name_or_path`` when it holds quadruples -- labelled ones or a
    RE-Net-format folder of ids (:func:`kgeval.datasets.formats.folder_format`) --, else None."""
    folder = dataset_folder(name_or_path)
    return folder if folder is not None and folder_format(folder).kind in _KIND_FORMATS["temporal"] else None


#: any dataset :func:`load_dataset` returns
AnyDataset: TypeAlias = TriplesDataset | TemporalDataset | InductiveDataset | FullyInductiveDataset
#: the kinds of dataset :func:`load_dataset` may be asked for (``kind=``)
DatasetKind = Literal["triples", "temporal", "inductive", "fully-inductive"]
#: the folder formats (:func:`kgeval.datasets.formats.folder_format`) of each kind
_KIND_FORMATS: dict[str, tuple[str, ...]] = {"triples": ("triples",), "temporal": ("quadruples", "renet"),
                                             "inductive": ("inductive",),
                                             "fully-inductive": ("fully-inductive",)}  # fmt: skip


@overload
def load_dataset(name_or_path: str | os.PathLike[str], *, kind: Literal["triples"],
                 entity_to_id: Mapping[str, int] | None = None, relation_to_id: Mapping[str, int] | None = None,
                 time_to_id: Mapping[str, int] | None = None, unseen: Unseen = "warn",
                 duplicates: Duplicates = "keep") -> TriplesDataset: ...  # fmt: skip
@overload
def load_dataset(name_or_path: str | os.PathLike[str], *, kind: Literal["temporal"],
                 entity_to_id: Mapping[str, int] | None = None, relation_to_id: Mapping[str, int] | None = None,
                 time_to_id: Mapping[str, int] | None = None, unseen: Unseen = "warn",
                 duplicates: Duplicates = "keep") -> TemporalDataset: ...  # fmt: skip
@overload
def load_dataset(name_or_path: str | os.PathLike[str], *, kind: Literal["inductive"],
                 entity_to_id: Mapping[str, int] | None = None, relation_to_id: Mapping[str, int] | None = None,
                 time_to_id: Mapping[str, int] | None = None, unseen: Unseen = "warn",
                 duplicates: Duplicates = "keep") -> InductiveDataset: ...  # fmt: skip
@overload
def load_dataset(name_or_path: str | os.PathLike[str], *, kind: Literal["fully-inductive"],
                 entity_to_id: Mapping[str, int] | None = None, relation_to_id: Mapping[str, int] | None = None,
                 time_to_id: Mapping[str, int] | None = None, unseen: Unseen = "warn",
                 duplicates: Duplicates = "keep") -> FullyInductiveDataset: ...  # fmt: skip
@overload
def load_dataset(name_or_path: str | os.PathLike[str], *, kind: None = None,
                 entity_to_id: Mapping[str, int] | None = None, relation_to_id: Mapping[str, int] | None = None,
                 time_to_id: Mapping[str, int] | None = None, unseen: Unseen = "warn",
                 duplicates: Duplicates = "keep") -> AnyDataset: ...  # fmt: skip
def load_dataset(
    name_or_path: str | os.PathLike[str],
    *,
    kind: DatasetKind | None = None,
    entity_to_id: Mapping[str, int] | None = None,
    relation_to_id: Mapping[str, int] | None = None,
    time_to_id: Mapping[str, int] | None = None,
    unseen: Unseen = "warn",
    duplicates: Duplicates = "keep",
) -> AnyDataset:
    """Load any dataset kgeval evaluates, by shipped name, by name in the shared data folder, or by folder.

    ``name_or_path`` is resolved in this order: a shipped dataset name (:data:`SHIPPED_DATASETS`,
    case-insensitive); an existing folder; a sub-folder of :func:`shared_data_dir` (``"FB15k-237"``,
    ``"ICEWS14"``, ``"ILPC2022-small"``). A folder is read by what it holds
    (:func:`kgeval.datasets.formats.folder_format`):

    - a ``train`` and a ``msg`` file (InGram's fully inductive layout, relations new at inference): a fully
      inductive dataset, read whole (:func:`load_fully_inductive_folder`; docs/inductive.md, "Fully inductive");
    - a train and an inference file: an inductive dataset (:func:`load_inductive_dataset`);
    - ``train.txt`` of integer ids beside ``entity2id.txt`` and ``relation2id.txt`` (four columns, or five as
      RE-Net / RE-GCN / xERTE write them; with ``stat.txt``, or without where the id files give the counts):
      RE-Net's format, read with the id files' ids (:func:`load_renet_folder`) -- never as labels;
    - a train file whose first data line has four fields: labelled quadruples (:func:`load_temporal_tsv`);
    - else labelled triples (:func:`load_tsv_dataset`).

    Integer ids of triples beside id files are refused: kgeval does not read them.

    Parameters
    ----------
    name_or_path : str or path-like
    kind : {"triples", "temporal", "inductive", "fully-inductive"}, optional
        The kind the caller needs: a dataset of another kind is a ValueError naming what was found (and the
        returned type is that kind's, for type checkers). None: whatever the folder holds.
    entity_to_id, relation_to_id : mapping of str to int, optional
        Use these ids (as :func:`load_tsv_dataset`), e.g. those a model was trained with. A RE-Net folder's ids
        are its id files' own: given ones must equal them (else a ValueError says how many differ); an inductive
        folder numbers its two graphs itself and refuses given ids.
    time_to_id : mapping of str to int, optional
        Time ids of a temporal dataset (as :func:`load_temporal_tsv`); refused for a dataset of triples.
    unseen : {"warn", "keep", "drop"}, default="warn"
        Valid / test rows with labels never seen in train (as :func:`load_tsv_dataset`; a shipped dataset, a
        RE-Net folder and an inductive folder -- which drops what its graphs cannot score -- have none).
    duplicates : {"keep", "merge"}, default="keep"
        Rows repeating an earlier one of their split (as :func:`load_tsv_dataset`).

    Returns
    -------
    TriplesDataset, TemporalDataset, InductiveDataset or FullyInductiveDataset

    Raises
    ------
    FileNotFoundError
        If nothing resolves, naming the paths looked at and the variable that names the shared folder.
    ValueError
        For a layout kgeval does not read, a dataset of another ``kind`` than asked, ids given that the data
        cannot take, or what the format-specific reader refuses.

    Examples
    --------
    >>> load_dataset("nations")
    TriplesDataset(name='nations', num_entities=14, num_relations=55, train=1592, valid=199, test=201)
    """
    text = os.fspath(name_or_path)
    ids: dict[str, Any] = {"entity_to_id": entity_to_id, "relation_to_id": relation_to_id}
    if text.lower() in SHIPPED_DATASETS:
        _check_kind(text, "triples", "labelled triples (a shipped dataset)", kind, time_to_id)
        return load_shipped_dataset(text, **ids)
    folder = dataset_folder(text)
    if folder is None:
        raise FileNotFoundError(not_found_message(text))
    found = folder_format(folder)
    if found.reader is None:
        raise found.refuse(folder)
    own_kind = next(name for name, formats in _KIND_FORMATS.items() if found.kind in formats)
    _check_kind(str(folder), own_kind, found.description, kind, time_to_id)
    if found.kind in ("inductive", "fully-inductive"):
        if entity_to_id is not None or relation_to_id is not None:
            raise ValueError(f"{folder} is an inductive dataset: its ids are those of its two graphs (sorted "
                             "labels, as PyKEEN numbers them), not given ones")  # fmt: skip
        if found.kind == "fully-inductive":
            return load_fully_inductive_folder(folder, duplicates=duplicates)
        return load_inductive_dataset(folder, duplicates=duplicates)
    if found.kind == "renet":
        return _same_ids(load_renet_folder(folder, duplicates=duplicates), {**ids, "time_to_id": time_to_id})
    if found.kind == "quadruples":
        return load_temporal_tsv(folder, unseen=unseen, duplicates=duplicates, time_to_id=time_to_id, **ids)
    return load_tsv_dataset(folder, unseen=unseen, duplicates=duplicates, **ids)


def _check_kind(where: str, own: str, description: str, wanted: str | None,
                time_to_id: Mapping[str, int] | None) -> None:  # fmt: skip
    """A ValueError where the dataset at ``where`` (of kind ``own``, ``description`` in words) is not of the kind
    ``wanted``, or is no temporal dataset but was given time ids."""
    if wanted is not None and wanted not in _KIND_FORMATS:
        raise ValueError(f"kind must be one of {', '.join(_KIND_FORMATS)} or None, got {wanted!r}")
    if wanted is not None and own != wanted:
        raise ValueError(f"{where} holds {description}, a {own} dataset, but a {wanted} dataset was asked for")
    if time_to_id is not None and own != "temporal":
        raise ValueError(f"time_to_id was given, but {where} holds {description}, which has no times")


#: the front door's former name, kept working: :func:`load_dataset`
load_any_dataset = load_dataset


def _same_ids(dataset: TemporalDataset, ids: Mapping[str, Any]) -> TemporalDataset:
    """A RE-Net folder's dataset, whose ids are its id files' own, when the ids given to read it with (a
    checkpoint's) are those; else a ValueError saying which differ."""
    for kind, given in ids.items():
        if given is None:
            continue
        own = getattr(dataset, kind)
        if dict(given) != own and labels_by_id(given) != labels_by_id(own):
            differing = sum(given.get(label) != index for label, index in own.items())
            raise ValueError(
                f"{dataset.name} is a RE-Net folder whose ids are its id files' own; the given {kind} "
                f"differs from them ({differing:,} of {len(own):,} labels have another id or none)"
            )
    return dataset


def not_found_message(name: str) -> str:
    """Why ``name`` names no dataset here: the shipped names, every path looked at, and the variable that names the
    shared data folder (:func:`shared_data_dir`)."""
    looked = [str(Path(name).resolve())]
    shared = shared_data_dir()
    if shared is not None:
        how = f"${SHARED_DATA_ENV}" if os.environ.get(SHARED_DATA_ENV) else "beside the kgeval package"
        looked.append(f"{shared / name} (the shared data folder, {how})")
    else:
        env = os.environ.get(SHARED_DATA_ENV)
        setting = f"${SHARED_DATA_ENV} is {env!r}, which does not exist" if env else f"${SHARED_DATA_ENV} is not set"
        looked.append(f"no shared data folder ({setting}, and there is no ../shared/data beside the kgeval package)")
    return (
        f"dataset {name!r} is not a shipped dataset ({', '.join(SHIPPED_DATASETS)}) and was not found: looked "
        f"at {'; '.join(looked)}. Pass a folder, or set {SHARED_DATA_ENV} to the folder that holds {name}/"
    )


def _load_folder(
    folder: Path | Traversable,
    display: str,
    name: str,
    entity_to_id: Mapping[str, int] | None = None,
    relation_to_id: Mapping[str, int] | None = None,
) -> TriplesDataset:
    """Read the three splits of a shipped dataset (a package resource) and map labels to ids (given ones, or by
    sorted label)."""
    return _dataset(read_splits(folder, display, ReadOptions()), name, "warn", entity_to_id, relation_to_id)
