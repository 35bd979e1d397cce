"""Checkpoints of the built-in models: one ``torch.save`` file of plain data (loadable with ``weights_only=True``)
that rebuilds the model without its code; ``kgeval demo --save-checkpoint`` writes one, ``kgeval evaluate`` and
``kgeval strat --checkpoint`` read it.
"""

from __future__ import annotations

import os
import pickle
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from kgeval.datasets import SHIPPED_DATASETS, dataset_fingerprint, labels_by_id, shared_data_dir
from kgeval.models import RESCAL, ComplEx, DistMult, RotatE, TNTComplEx, TransE

__all__ = [
    "BUILTIN_MODELS", "CHECKPOINT_FORMAT", "LoadedModel", "load_checkpoint", "load_model_file", "save_checkpoint",
]  # fmt: skip

CHECKPOINT_FORMAT = "kgeval.models.checkpoint/1"

#: The models a checkpoint can name, by class name.
BUILTIN_MODELS: dict[str, type[nn.Module]] = {
    cls.__name__: cls for cls in (DistMult, ComplEx, RESCAL, TransE, RotatE, TNTComplEx)
}
#: the temporal models among them: their header also holds ``num_times``
TEMPORAL_MODELS = ("TNTComplEx",)
#: constructor options beyond the sizes, per model, with their allowed values (absent from a file: the default)
MODEL_OPTIONS: dict[str, dict[str, tuple[Any, ...]]] = {"TransE": {"p": (1, 2)}}

_ACCEPTED = ", ".join(f"kgeval.models.{name}" for name in BUILTIN_MODELS)


def save_checkpoint(model: nn.Module, path: str | os.PathLike[str], dataset: Any = None) -> None:
    """Write ``model`` (a built-in model, see :data:`BUILTIN_MODELS`) and its sizes to ``path`` -- and, given the
    ``dataset`` it was trained on, what that data was.

    The file holds ``{"format": "kgeval.models.checkpoint/1", "model": "DistMult", "num_entities": int,
    "num_relations": int, "dim": int, "options": {...}, "state_dict": {name: tensor}}``; ``options`` holds the
    constructor options beyond the sizes (TransE's ``p``); a temporal model's header also holds ``num_times``.
    With a ``dataset`` (a :class:`kgeval.datasets.TriplesDataset` or ``TemporalDataset``) it also holds ``"data":
    {"name": str, "fingerprint": str, "entities": [label of each id], "relations": [...], "times": [...], "folder":
    str}`` (the fingerprint is :func:`kgeval.datasets.dataset_fingerprint`; ``times`` for temporal data; ``folder``
    for data read from a folder): plain strings, so that ``kgeval evaluate --checkpoint`` finds the dataset without
    being told, lines its ids up and checks it is the same data.

    Raises
    ------
    TypeError
        For any other model, a subclass of a built-in one included (the file stores no code, so only the
        built-in classes can be rebuilt from it).
    ValueError
        For a ``dataset`` whose counts are not the model's.
    """
    cls = type(model)
    name = cls.__name__
    if BUILTIN_MODELS.get(name) is not cls:
        raise TypeError(f"save_checkpoint takes one of kgeval's built-in models ({_ACCEPTED}), got "
                        f"{cls.__module__}.{cls.__qualname__}: a checkpoint stores no code, so only those classes "
                        "can be rebuilt from it")  # fmt: skip
    state = {key: tensor.detach().cpu() for key, tensor in model.state_dict().items()}
    torch.save(
        {
            "format": CHECKPOINT_FORMAT,
            "model": name,
            "num_entities": model.num_entities,
            "num_relations": model.num_relations,
            "dim": model.dim,
            **({"num_times": model.num_times} if name in TEMPORAL_MODELS else {}),
            "options": {option: getattr(model, option) for option in MODEL_OPTIONS.get(name, {})},
            "state_dict": state,
            **({"data": _data_description(model, dataset)} if dataset is not None else {}),
        },
        path,
    )


def _data_description(model: nn.Module, dataset: Any) -> dict[str, Any]:
    """What a checkpoint records of the data its model was trained on (see :func:`save_checkpoint`)."""
    description: dict[str, Any] = {"name": str(dataset.name), "fingerprint": dataset_fingerprint(dataset),
                                   "entities": labels_by_id(dataset.entity_to_id),
                                   "relations": labels_by_id(dataset.relation_to_id)}  # fmt: skip
    if getattr(dataset, "time_to_id", None) is not None:
        description["times"] = labels_by_id(dataset.time_to_id)
    read_with = getattr(dataset, "read_with", None)
    if read_with:
        description["read_with"] = {str(option): str(value) for option, value in read_with.items()}
    train = getattr(dataset, "sources", {}).get("train")
    if train and Path(train).parent.is_dir():  # read from a folder: where, for a dataset its name does not find
        description["folder"] = str(Path(train).resolve().parent)
    counts = {"entities": getattr(model, "num_entities", None), "relations": getattr(model, "num_relations", None),
              "times": getattr(model, "num_times", None)}  # fmt: skip
    for kind, count in counts.items():
        if kind in description and count is not None and len(description[kind]) != count:
            raise ValueError(f"the dataset {dataset.name} has {len(description[kind])} {kind}, the model {count}: "
                             "it was not trained on this dataset")  # fmt: skip
    return description


#: the first torch release whose weights-only unpickler has no published advisory against it (remote code
#: execution through torch.load(weights_only=True) up to 2.5.1; memory corruption before 2.10)
SAFE_WEIGHTS_ONLY_TORCH = (2, 10)


def weights_only_loader_is_safe(version: str) -> bool:
    """Whether ``torch.load(weights_only=True)`` of this torch version (e.g. ``"2.13.0+cpu"``) is safe for files
    from others, as far as the published advisories go (:data:`SAFE_WEIGHTS_ONLY_TORCH`)."""
    parts = version.split("+")[0].split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return False
    return (major, minor) >= SAFE_WEIGHTS_ONLY_TORCH


def load_checkpoint(
    path: str | os.PathLike[str],
    map_location: Any = "cpu",
    num_entities: int | None = None,
    num_relations: int | None = None,
    *,
    trusted: bool = False,
) -> nn.Module:
    """The model saved by :func:`save_checkpoint`, on ``map_location``, in eval mode.

    The file is read with PyTorch's weights-only unpickler (it never runs code from the file), and its header is
    checked against the stored tensors before anything is allocated: a header cannot make kgeval allocate more
    than the file holds. The model is built as a skeleton on the meta device, none of its weights initialised, and
    takes the file's tensors.

    Parameters
    ----------
    path : str or path-like
    map_location : str or torch.device, default="cpu"
    num_entities, num_relations : int, optional
        When given, the checkpoint's sizes must equal them (the dataset the model is evaluated on).
    trusted : bool, default=False
        The file is your own. Needed only with torch older than 2.10, whose weights-only unpickler has published
        vulnerabilities: without it, kgeval refuses to load there.

    Raises
    ------
    ValueError
        For a file that is not a kgeval checkpoint, whose header and tensors disagree, or whose sizes differ from
        the given ones; on torch < 2.10 without ``trusted=True``.
    """
    return _read_checkpoint(path, map_location, num_entities, num_relations, trusted=trusted)[0]


def _read_checkpoint(
    path: str | os.PathLike[str],
    map_location: Any = "cpu",
    num_entities: int | None = None,
    num_relations: int | None = None,
    *,
    trusted: bool = False,
) -> tuple[nn.Module, dict[str, Any] | None]:
    """:func:`load_checkpoint`'s model and the checkpoint's data description (None in files without one)."""
    where = repr(os.fspath(path))
    if not trusted and not weights_only_loader_is_safe(torch.__version__):
        raise ValueError(
            f"not loading {where}: torch {torch.__version__}'s weights-only loader has published vulnerabilities "
            "(fixed in torch 2.10); upgrade torch, or pass trusted=True for a file you made yourself"
        )
    try:
        with warnings.catch_warnings():  # a pickled model file (read only with trust, below) is not its concern
            warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
            document = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, pickle.UnpicklingError, EOFError, OSError, KeyError) as error:
        if isinstance(error, FileNotFoundError):
            raise
        reason = _load_failure(error) if _saved_by_torch(path) else _NOT_SAVED
        raise ValueError(f"{where} is not a kgeval checkpoint: {reason}. {_READS}") from error
    if not isinstance(document, dict) or document.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{where} is not a kgeval checkpoint (no format {CHECKPOINT_FORMAT!r} entry). {_READS}")
    model_class = BUILTIN_MODELS.get(str(document.get("model")))
    if model_class is None:
        raise ValueError(f"{where}: the checkpoint's model {document.get('model')!r} is none of kgeval's built-in "
                         f"models ({', '.join(BUILTIN_MODELS)})")  # fmt: skip
    sizes = _header_sizes(document, where)
    options = _header_options(document, where)
    expected = {"num_entities": num_entities, "num_relations": num_relations}
    for name, value in expected.items():
        if value is not None and sizes[name] != value:
            raise ValueError(f"the checkpoint has {name}={sizes[name]}, the dataset {value}")
    with torch.device("meta"), _SkipFills():  # the shapes the header implies: nothing allocated, nothing filled
        times = (sizes["num_times"],) if "num_times" in sizes else ()
        model = model_class(sizes["num_entities"], sizes["num_relations"], *times, dim=sizes["dim"], **options)
    _check_tensors(document.get("state_dict"), model.state_dict(), where)
    _check_data(document.get("data"), sizes, where)
    model.load_state_dict(document["state_dict"], assign=True)
    return model.to(map_location).eval(), document.get("data")


def _check_data(data: Any, sizes: dict[str, int], where: str) -> None:
    """A checkpoint's data description (absent in older files) is plain strings: a name, a fingerprint, one distinct
    label per id (times: as many as the model's, or any number for a model without times), optionally a folder and
    the reading options (:attr:`kgeval.datasets.TriplesDataset.read_with`)."""
    if data is None:
        return
    expected: dict[str, int | None] = {"entities": sizes["num_entities"], "relations": sizes["num_relations"]}
    if "num_times" in sizes or (isinstance(data, dict) and "times" in data):
        expected["times"] = sizes.get("num_times")
    fields_ok = isinstance(data, dict) and all(isinstance(data.get(key), str) for key in ("name", "fingerprint"))
    fields_ok = fields_ok and isinstance(data.get("folder", ""), str)
    for kind, count in expected.items():
        labels = data.get(kind) if isinstance(data, dict) else None
        fields_ok = fields_ok and isinstance(labels, list) and (count is None or len(labels) == count)
        fields_ok = fields_ok and all(isinstance(label, str) for label in labels)  # type: ignore[union-attr]
        fields_ok = fields_ok and len(set(labels)) == len(labels)  # type: ignore[arg-type]
    read_with = data.get("read_with", {}) if isinstance(data, dict) else {}
    fields_ok = fields_ok and isinstance(read_with, dict) and all(
        READ_OPTIONS.get(option, ()).__contains__(value) for option, value in read_with.items())  # fmt: skip
    if not fields_ok:
        raise ValueError(f"{where}: the checkpoint's data description must hold a name, a fingerprint, one distinct "
                         f"label per id of each of {', '.join(expected)}, and optionally a folder and reading "
                         f"options among {READ_OPTIONS}")  # fmt: skip


#: the reading options a checkpoint may record, and their values
READ_OPTIONS: dict[str, tuple[str, ...]] = {"unseen": ("warn", "keep", "drop"), "duplicates": ("keep", "merge")}


class _SkipFills(TorchFunctionMode):
    """In-place fills of meta tensors (``normal_``, ``uniform_``, ``xavier_uniform_``, ...) do nothing: a model
    built as a skeleton for the checkpoint's tensors is not initialised first. On the meta device a fill costs no
    memory, but torch runs it through its reference implementations, whose first use imports the compiler stack
    (~1 s per process: ``torch._dynamo``, ``torch._refs``, ``torch._decomp``)."""

    #: the fills of torch.nn.init and of tensors that initialisation uses
    FILLS = frozenset({"normal_", "uniform_", "fill_", "zero_", "zeros_", "ones_", "constant_", "eye_",
                       "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "trunc_normal_",
                       "orthogonal_", "random_", "exponential_", "bernoulli_"})  # fmt: skip

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        target = args[0] if args else (kwargs or {}).get("tensor")  # torch.nn.init passes its tensor by keyword
        if getattr(func, "__name__", "") in self.FILLS and isinstance(target, torch.Tensor) and target.is_meta:
            return target
        return func(*args, **(kwargs or {}))


#: what kgeval reads, for the messages of files it does not
_READS = ("kgeval reads the files of kgeval.models.checkpoint.save_checkpoint (e.g. 'kgeval demo --save-checkpoint "
          "PATH'), which hold plain tensors; a pickled model object is not read, since loading it would run code "
          "from the file")  # fmt: skip
#: terminal escape sequences (PyTorch's messages bold some words)
_ESCAPES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


#: why a file that torch.save did not write cannot be read
_NOT_SAVED = "it is no file torch.save wrote (neither a checkpoint nor a pickled model)"


def _saved_by_torch(path: str | os.PathLike[str]) -> bool:
    """Whether the file looks like torch.save's output: a zip archive (its format since torch 1.6) or a pickle
    stream of protocol 2 or later (the legacy format); a text or other file is neither."""
    try:
        with open(path, "rb") as file:
            start = file.read(4)
    except OSError:
        return False
    return start.startswith(b"PK\x03\x04") or start[:1] == b"\x80"


def _load_failure(error: Exception) -> str:
    """Why torch.load refused a file, in one plain sentence (no escape codes, none of PyTorch's advice on loading
    untrusted files anyway)."""
    text = _ESCAPES.sub("", str(error))
    unsupported = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
    if unsupported:
        return f"it holds a Python object ({unsupported.group(1)}) rather than plain tensors"
    if "Weights only load failed" in text:
        return "it holds Python objects rather than plain tensors"
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(error).__name__)
    return first.rstrip(".")


def _header_options(document: dict[str, Any], where: str) -> dict[str, Any]:
    """The model's constructor options (``MODEL_OPTIONS``) as stored; absent: the constructor's defaults."""
    stored = document.get("options", {})
    allowed = MODEL_OPTIONS.get(document["model"], {})
    if not isinstance(stored, dict) or not set(stored) <= set(allowed):
        raise ValueError(f"{where}: checkpoint options must be a dict with keys among {sorted(allowed)}, "
                         f"got {stored!r}")  # fmt: skip
    for option, value in stored.items():
        if isinstance(value, bool) or value not in allowed[option]:
            raise ValueError(f"{where}: checkpoint option {option} must be one of {allowed[option]}, got {value!r}")
    return dict(stored)


def _header_sizes(document: dict[str, Any], where: str) -> dict[str, int]:
    """num_entities, num_relations and dim (and a temporal model's num_times) of a checkpoint header: positive
    ints."""
    sizes = {}
    temporal = ("num_times",) if document["model"] in TEMPORAL_MODELS else ()
    names = ("num_entities", "num_relations", "dim", *temporal)
    for name in names:
        value = document.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{where}: checkpoint {name} must be a positive int, got {value!r}")
        sizes[name] = value
    return sizes


def _check_tensors(stored: Any, expected: dict[str, torch.Tensor], where: str) -> None:
    """The stored state dict holds exactly the expected tensors, with their shapes and dtypes' kinds (floating
    point; boolean for boolean buffers such as TNTComplEx's trained_times)."""
    if not isinstance(stored, dict) or not all(isinstance(value, torch.Tensor) for value in stored.values()):
        raise ValueError(f"{where}: checkpoint state_dict must map names to tensors")
    if set(stored) != set(expected):
        raise ValueError(f"{where}: checkpoint tensors {sorted(stored)} differ from the model's {sorted(expected)}")
    for name, tensor in expected.items():
        boolean = tensor.dtype == torch.bool
        kind_matches = stored[name].dtype == torch.bool if boolean else stored[name].dtype.is_floating_point
        if stored[name].shape != tensor.shape or not kind_matches:
            raise ValueError(
                f"{where}: checkpoint tensor {name} has shape {tuple(stored[name].shape)} ({stored[name].dtype}); "
                f"its header implies {tuple(tensor.shape)} ({'boolean' if boolean else 'floating point'})"
            )


#: the model file of a PyKEEN results folder (``PipelineResult.save_to_directory``)
PYKEEN_MODEL_FILE = "trained_model.pkl"
#: the label-to-id files of a PyKEEN results folder's ``training_triples`` (``TriplesFactory.to_path_binary``)
PYKEEN_ID_FILES = {"entity_to_id": "entity_to_id.tsv.gz", "relation_to_id": "relation_to_id.tsv.gz"}


#: the files that make a folder a dicee experiment (``Execute``'s ``path_to_store_single_run``)
DICEE_FILES = ("configuration.json", "model.pt", "entity_to_idx.csv", "relation_to_idx.csv")


@dataclass(frozen=True)
class LoadedModel:
    """A model read by :func:`load_model_file`, the label-to-id maps it was trained with where the file says (a
    kgeval checkpoint's data description, a PyKEEN results folder's ``training_triples``, a dicee experiment's
    indices; else None), the dataset it was trained on where the file names one (a kgeval checkpoint's data name, a
    dicee experiment's ``dataset_dir`` that exists here; else None) and that data's fingerprint where the file
    records it (:func:`kgeval.datasets.dataset_fingerprint`)."""

    model: Any
    entity_to_id: dict[str, int] | None = None
    relation_to_id: dict[str, int] | None = None
    dataset: str | None = None
    fingerprint: str | None = None
    time_to_id: dict[str, int] | None = None
    #: the reading options the checkpoint recorded for its data (``unseen``, ``duplicates``), to read it so again
    read_with: dict[str, str] = field(default_factory=dict)


def load_model_file(path: str | os.PathLike[str], *, trust: bool = False) -> LoadedModel:
    """A model from a kgeval checkpoint, or -- with ``trust`` -- from a file or folder of another library.

    Parameters
    ----------
    path : str or path-like
        A kgeval checkpoint (:func:`save_checkpoint`; read as :func:`load_checkpoint` reads it); a model object
        saved with ``torch.save(model, path)`` (a PyKEEN, PyTorch Geometric or TorchKGE model, or any model
        kgeval can score); a PyKEEN results folder (``PipelineResult.save_to_directory``), whose
        ``trained_model.pkl`` is read and whose ``training_triples`` label-to-id files, when present, are returned
        so that the dataset's ids line up with the model's; or a dicee experiment folder, read by
        :func:`kgeval.adapters.dicee.load_dicee_experiment` (its weights are plain tensors: no trust needed)
        with its indices.
    trust : bool, default=False
        Read a pickled model object. Unpickling runs code from the file: pass it only for files you made or whose
        source you trust. Without it such a file is a ValueError that says so.

    Raises
    ------
    ValueError
        For a pickled model without ``trust``, a folder without ``trained_model.pkl``, or a file that is no model.
    """
    location = Path(os.fspath(path))
    entity_to_id = relation_to_id = None
    if location.is_dir() and all((location / name).is_file() for name in DICEE_FILES):
        return _dicee_experiment(location)
    if location.is_dir():
        model_file = location / PYKEEN_MODEL_FILE
        if not model_file.is_file():
            raise ValueError(f"{str(location)!r} is a folder without {PYKEEN_MODEL_FILE} (a PyKEEN results folder) "
                             f"or {', '.join(DICEE_FILES)} (a dicee experiment); give a checkpoint file or one of "
                             "those folders")  # fmt: skip
        entity_to_id, relation_to_id = (_pykeen_ids(location / "training_triples" / PYKEEN_ID_FILES[name])
                                        for name in ("entity_to_id", "relation_to_id"))  # fmt: skip
        location = model_file
    try:
        return _described(*_read_checkpoint(location), entity_to_id, relation_to_id)
    except ValueError as error:
        if "rather than plain tensors" not in str(error):
            raise
        if not trust:
            raise ValueError(f"{str(location)!r} is not a kgeval checkpoint but a pickled object; loading it runs "
                             "code from the file. If you made it or trust its source, pass --trust-checkpoint "
                             "(trust=True in Python)") from error  # fmt: skip
    try:
        model = torch.load(location, map_location="cpu", weights_only=False)
    except (RuntimeError, pickle.UnpicklingError, EOFError, OSError, KeyError, AttributeError, ImportError) as error:
        if isinstance(error, FileNotFoundError):
            raise
        reason = " ".join(_ESCAPES.sub("", str(error)).split()) or type(error).__name__
        missing_class = isinstance(error, AttributeError | ImportError)
        hint = " (a class the file names must be importable here)" if missing_class else ""
        raise ValueError(f"cannot unpickle {str(location)!r}: {reason}{hint}") from error
    if not isinstance(model, nn.Module):
        raise ValueError(f"{str(location)!r} holds a {type(model).__name__}, not a model (an nn.Module)")
    return LoadedModel(model.eval(), entity_to_id, relation_to_id)


def _described(model: nn.Module, data: dict[str, Any] | None, entity_to_id: Any, relation_to_id: Any) -> LoadedModel:
    """A kgeval checkpoint's model with what its data description says (none in older files)."""
    if data is None:
        return LoadedModel(model, entity_to_id, relation_to_id)
    ids = {kind: {label: index for index, label in enumerate(data[kind])} for kind in ("entities", "relations")}
    times = {label: index for index, label in enumerate(data["times"])} if "times" in data else None
    return LoadedModel(model, ids["entities"], ids["relations"], _recorded_dataset(data), data["fingerprint"], times,
                       dict(data.get("read_with", {})))  # fmt: skip


def _recorded_dataset(data: dict[str, Any]) -> str:
    """Where the dataset a checkpoint recorded is here: the folder it was read from while that exists (a shipped
    dataset by its name, whichever install's copy it was read from), else a shipped or shared dataset of its name,
    else the recorded folder or name (which then finds nothing, and the error names it). A folder of the current
    directory never stands in for it."""
    name, folder = data["name"], data.get("folder")
    package = Path(__file__).resolve().parents[1]
    if name.lower() in SHIPPED_DATASETS and (folder is None or Path(folder).resolve().is_relative_to(package)):
        return name
    if folder is not None and Path(folder).is_dir():
        return folder
    if name.lower() in SHIPPED_DATASETS:  # the recorded folder is not here (another install's copy, say): the
        return name  # shipped dataset of that name -- its fingerprint is still checked against the checkpoint's
    shared = shared_data_dir()
    if shared is not None and Path(name).name == name and (shared / name).is_dir():
        return str(shared / name)
    return folder if folder is not None else name


def _dicee_experiment(location: Path) -> LoadedModel:
    """The model of a dicee experiment folder with its indices (plain tensors and CSV files: no trust needed), and
    its training data's folder when it exists here."""
    try:
        from kgeval.adapters.dicee import load_dicee_experiment
    except ImportError as error:
        raise ValueError(f"{str(location)!r} is a dicee experiment folder; reading it needs dicee "
                         "(pip install --no-deps dicee)") from error  # fmt: skip
    experiment = load_dicee_experiment(location)
    dataset_dir = experiment.configuration.get("dataset_dir")
    dataset = dataset_dir if isinstance(dataset_dir, str) and Path(dataset_dir).is_dir() else None
    return LoadedModel(experiment.model, experiment.entity_to_id, experiment.relation_to_id, dataset)


def _pykeen_ids(path: Path) -> dict[str, int] | None:
    """label -> id from a PyKEEN ``*_to_id.tsv.gz`` file (columns id, label), or None when there is none."""
    if not path.is_file():
        return None
    import pandas as pd

    try:
        table = pd.read_csv(path, sep="\t", dtype={"label": str}, keep_default_na=False)
    except (OSError, EOFError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        raise ValueError(f"cannot read {path}: {' '.join(str(error).split())}") from error
    if list(table.columns) != ["id", "label"]:
        raise ValueError(f"{path}: expected the columns id and label (PyKEEN's to_path_binary), "
                         f"got {list(table.columns)}")  # fmt: skip
    ids = pd.to_numeric(table["id"], errors="coerce")
    if ids.isna().any() or (ids != ids.round()).any() or ids.duplicated().any() or table["label"].duplicated().any():
        raise ValueError(f"{path}: not a one-to-one map of labels to integer ids (an id or a label appears twice, or "
                         "an id is no integer): the file is damaged")  # fmt: skip
    return dict(zip(table["label"], ids.astype(int), strict=True))
