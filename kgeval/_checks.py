"""Boundary validation: every user-facing input is checked here, with one clear message per failure.

Internal code trusts its inputs; only ``evaluate``, the accumulator's ``update`` / ``merge`` /
``load_state_dict``, ``get_metric`` and ``from_json`` call into this module.
"""

from __future__ import annotations

import operator
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, overload

import numpy as np
import pandas as pd
import torch

from kgeval._counts import declared_count
from kgeval.adapters import scores_itself
from kgeval.adapters.devices import canonical_device, same_device
from kgeval.adapters.wrappers import delegate_of, describe, held_models_hint
from kgeval.typing import TARGETS, Target


@overload
def check_positive_int(value: Any, name: str, allow_none: Literal[False] = False) -> int: ...


@overload
def check_positive_int(value: Any, name: str, allow_none: bool) -> int | None: ...


def check_positive_int(value: Any, name: str, allow_none: bool = False) -> int | None:
    """``value`` as an int >= 1 (Python or numpy integers; bools rejected); None passes when ``allow_none``."""
    if value is None and allow_none:
        return None
    try:
        number = operator.index(value)
    except TypeError:
        number = None
    if isinstance(value, bool | np.bool_) or number is None or number < 1:
        raise ValueError(f"{name} must be a positive integer{' or None' if allow_none else ''}, got {value!r}")
    return int(number)


def check_ks(ks: Any) -> tuple[int, ...]:
    """The hits@k cut-offs as a sorted tuple of distinct positive Python ints (NumPy integers accepted)."""
    if isinstance(ks, int | str | np.integer) or not isinstance(ks, Iterable):
        raise ValueError(f"ks must be a sequence of positive integers, got {ks!r}")
    values = list(ks)
    bad = [k for k in values if isinstance(k, bool | np.bool_) or not isinstance(k, int | np.integer) or k < 1]
    if bad or not values:
        raise ValueError(f"ks must be a non-empty sequence of positive integers, got {ks!r}")
    return tuple(sorted({int(k) for k in values}))


def check_targets(targets: Any, allowed: tuple[Target, ...] = TARGETS) -> tuple[Target, ...]:
    """The ranking sides to evaluate, a non-empty subset of ``allowed`` (default ("head", "tail", "relation")) in
    that order."""
    if not isinstance(targets, str | Iterable):
        raise ValueError(f"targets must be a non-empty subset of {allowed}, got {targets!r}")
    values = (targets,) if isinstance(targets, str) else tuple(targets)
    unknown = [t for t in values if t not in allowed]
    if unknown or not values:
        raise ValueError(f"targets must be a non-empty subset of {allowed}, got {targets!r}")
    return tuple(t for t in allowed if t in values)


def check_triples(
    triples: Any,
    name: str,
    num_entities: int,
    num_relations: int | None = None,
    *,
    timed: bool = False,
    read_ranges: bool = True,
) -> torch.Tensor:
    """An integer (n, 3) tensor of (h, r, t) ids inside [0, num_entities) (and [0, num_relations)); with ``timed``
    an (n, 4) tensor of (h, r, t, τ) quadruples whose time ids are >= 0 too.

    Raises
    ------
    TypeError
        When ``triples`` is not a tensor of an integer dtype.
    ValueError
        For a wrong shape, or an id out of range (naming the first offending row).
    """
    width = 4 if timed else 3
    if not isinstance(triples, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape (n, {width}), got {type(triples).__name__}")
    if triples.dtype.is_floating_point or triples.dtype.is_complex or triples.dtype == torch.bool:
        raise TypeError(f"{name} must have an integer dtype, got {triples.dtype}")
    if triples.dim() != 2 or triples.shape[1] != width:
        if not timed:
            raise ValueError(f"{name} must have shape (n, 3), got {tuple(triples.shape)}")
        hint = ": triples are evaluated by kgeval.RankBasedEvaluator" if triples.shape[-1] == 3 else ""
        raise ValueError(f"{name} must have shape (n, 4) of (head, relation, tail, time), got "
                         f"{tuple(triples.shape)}{hint if triples.dim() == 2 else ''}")  # fmt: skip
    if triples.device.type == "meta":
        raise ValueError(f"{name} is on the meta device: it holds no ids")
    triples = triples.long()
    if read_ranges:  # else the caller checks the ranges of several tensors at once (check_id_ranges)
        check_id_ranges([(triples, name)], num_entities, num_relations, timed=timed)
    return triples


def check_id_ranges(
    named: Sequence[tuple[torch.Tensor, str]], num_entities: int, num_relations: int | None = None, *,
    timed: bool = False,
) -> None:  # fmt: skip
    """Every id of each (int64 (n, 3) / (n, 4) ``triples``, its argument's name) in range (:func:`check_triples`),
    from each tensor's columns' least and greatest values, read to the host together: one synchronisation per
    device for them all. The ValueError names the first offending row of the first tensor holding one."""
    present = [(triples, name) for triples, name in named if triples.shape[0]]
    by_device: dict[torch.device, list[torch.Tensor]] = {}
    for triples, _name in present:
        by_device.setdefault(triples.device, []).append(torch.stack(torch.aminmax(triples, dim=0)).reshape(-1))
    read = {device: iter(torch.cat(parts).tolist()) for device, parts in by_device.items()}
    for triples, name in present:
        values = read[triples.device]
        width = triples.shape[1]
        low, high = [next(values) for _ in range(width)], [next(values) for _ in range(width)]
        if not _in_range(low, high, num_entities, num_relations):
            _raise_on_first_bad_row(triples, name, num_entities, num_relations, timed)


def check_evaluated(triples: torch.Tensor, name: str) -> torch.Tensor:
    """``triples`` (checked by :func:`check_triples`) holding at least one row to evaluate; a ValueError naming
    ``name`` otherwise."""
    if triples.shape[0] == 0:
        raise ValueError(f"{name} is empty: there is nothing to evaluate")
    return triples


def _in_range(low: list[int], high: list[int], num_entities: int, num_relations: int | None) -> bool:
    """Whether every id of a tensor of triples (or quadruples) is in range, from its columns' least and greatest
    values."""
    relations_fit = num_relations is None or high[1] < num_relations
    return min(low) >= 0 and max(high[0], high[2]) < num_entities and relations_fit


def _raise_on_first_bad_row(triples: torch.Tensor, name: str, num_entities: int, num_relations: int | None,
                            timed: bool) -> None:  # fmt: skip
    """The ValueError naming the first row of ``triples`` (int64, (n, 3) or (n, 4)) with an id out of range."""
    entity_ids = triples[:, [0, 2]]
    bad = ((entity_ids < 0) | (entity_ids >= num_entities)).any(dim=1)
    if num_relations is not None:
        bad |= (triples[:, 1] < 0) | (triples[:, 1] >= num_relations)
    else:
        bad |= triples[:, 1] < 0
    if timed:
        bad |= triples[:, 3] < 0
    if bool(bad.any()):
        row = int(bad.nonzero()[0, 0])
        limits = (
            f"entities in [0, {num_entities})"
            + (f", relations in [0, {num_relations})" if num_relations is not None else ", relations >= 0")
            + (", times >= 0" if timed else "")
        )
        raise ValueError(f"{name} row {row} = {triples[row].tolist()} has an id out of range ({limits})")
    raise AssertionError("an id out of range was found by the columns' extremes, but in no row")  # pragma: no cover


def model_num_relations(model: Any) -> int | None:
    """``model.num_relations`` when the model declares a positive integer count (relation ids are checked against
    it), else None (relation ids only need to be >= 0); for a module that declares none, the count of the one
    model it holds that declares one (as :func:`check_num_entities`)."""
    count = declared_count(getattr(model, "num_relations", None))
    if count is None and _entity_count(model) is None:
        held = delegate_of(model, lambda child: declared_count(getattr(child, "num_relations", None)) is not None)
        count = None if held is None else declared_count(held[1].num_relations)
    return count if count is not None and count >= 1 else None


def check_filter_triples(
    filter_triples: Any,
    num_entities: int,
    num_relations: int | None = None,
    *,
    timed: bool = False,
    read_ranges: bool = True,
    argument: str | None = None,
) -> list[torch.Tensor]:
    """``additional_filter_triples`` as a list of checked (m, 3) tensors (None -> empty list); with ``timed``
    ``additional_filter_quadruples`` as (m, 4) tensors (:func:`check_triples`; ``read_ranges=False``: the
    caller checks the ids' ranges, with :func:`check_id_ranges`). ``argument``: the name errors give (default
    by ``timed``, as above)."""
    if argument is None:
        argument = "additional_filter_quadruples" if timed else "additional_filter_triples"
    if filter_triples is None:
        return []
    if isinstance(filter_triples, torch.Tensor):
        filter_triples = [filter_triples]
    if not isinstance(filter_triples, Sequence):
        raise TypeError(
            f"{argument} must be a tensor, a sequence of tensors or None, got {type(filter_triples).__name__}"
        )
    checked = [
        check_triples(t, f"{argument}[{i}]", num_entities, num_relations, timed=timed, read_ranges=False)
        for i, t in enumerate(filter_triples)
    ]
    if read_ranges:
        named = [(t, f"{argument}[{i}]") for i, t in enumerate(checked)]
        check_id_ranges(named, num_entities, num_relations, timed=timed)
    return checked


#: where libraries keep a model's number of entities: kgeval and PyKEEN, PyTorch Geometric, TorchKGE
ENTITY_COUNT_ATTRIBUTES = ("num_entities", "num_nodes", "n_ent")


def _entity_count(model: Any) -> Any:
    """The entity count ``model`` declares under one of :data:`ENTITY_COUNT_ATTRIBUTES`, else None."""
    return next(
        (getattr(model, name) for name in ENTITY_COUNT_ATTRIBUTES if getattr(model, name, None) is not None), None
    )


def check_num_entities(model: Any, num_entities: int | None, name: str | None = None) -> int:
    """The number of entities: the argument, else ``model.num_entities``; both must agree when both are given
    (the model scores that many candidates). ``name``: how errors name the model (default: its class, with the
    wrappers it is inside).

    A module that declares no count but holds exactly one model that does (a LightningModule delegating to
    ``self.model``) has that model's count; the widths of the module's own scores are checked against it as they
    come."""
    declared = _entity_count(model)
    if declared is None:
        held = delegate_of(model, lambda child: _entity_count(child) is not None)
        declared = None if held is None else _entity_count(held[1])
    if isinstance(declared, torch.Tensor):
        declared = int(declared)
    if num_entities is None:
        if declared is None:
            raise ValueError(
                f"num_entities is not given and {name or describe(model)} has no num_entities (num_nodes, n_ent) "
                "attribute" + held_models_hint(model, lambda child: _entity_count(child) is not None, "num_entities")
            )
        return check_positive_int(declared, "model.num_entities")
    if isinstance(num_entities, torch.Tensor):
        num_entities = int(num_entities)
    checked = check_positive_int(num_entities, "num_entities")
    model_count = declared_count(declared)
    if model_count is not None and checked != model_count:
        raise ValueError(
            f"num_entities={checked}, but the model has num_entities={model_count}: its scores rank that many "
            "candidates (leave num_entities out, or use restrict_entities_to to rank a subset)"
        )
    return checked


def check_writable_file(path: str | os.PathLike[str], name: str, *, create_folder: bool = False) -> str:
    """``path`` as a string, once a file can be written there: it is not a folder, and its folder exists and
    takes a new file (tried, not inferred from permission bits). ValueError naming ``name`` otherwise.

    With ``create_folder`` (the command line's outputs) a missing folder is made first, with its missing parents
    (:func:`make_folder`); without it (the library's writers) a missing folder is refused."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValueError(f"{name} {path!r} is a folder; give a file name")
    if create_folder:
        make_folder(folder, f"{name} {path!r}: cannot write there")
    if not os.path.isdir(folder):
        raise ValueError(f"{name} {path!r}: cannot write there, the folder {folder!r} does not exist")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise ValueError(f"{name} {path!r}: cannot write in {folder!r} ({error})") from error
    return path


def make_folder(folder: str | os.PathLike[str], name: str) -> None:
    """Make ``folder`` and its missing parents (``mkdir -p``; nothing to do where it exists). A ValueError that
    starts with ``name`` (what the folder is for, e.g. ``"--results-dir 'runs/many'"``) where it cannot be made: a
    file is in the way (named), or the folder above does not take a new folder (the system's reason)."""
    folder = os.fspath(folder)
    if os.path.isdir(folder):
        return
    blocker = os.path.abspath(folder)
    while not os.path.exists(blocker) and os.path.dirname(blocker) != blocker:
        blocker = os.path.dirname(blocker)
    if os.path.exists(blocker) and not os.path.isdir(blocker):
        raise ValueError(f"{name}: cannot make the folder {folder!r}: {blocker!r} is a file, not a folder")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as error:
        raise ValueError(f"{name}: cannot make the folder {folder!r} ({error})") from error


def check_device(device: Any, model_device: torch.device) -> None:
    """The model holds values (not on the meta device), and PyKEEN's ``device`` argument is None or the device the
    model lives on (kgeval never moves a model).

    Devices are compared as tensors name them (:func:`kgeval.adapters.devices.same_device`): by type, and for types
    other than the CPU by index -- ``"cpu:0"`` and ``torch.device("cpu", 0)`` are ``"cpu"``, and ``"cuda"`` is the
    current CUDA device -- so the advice of a refusal, ``model.to(device)``, puts the model where ``device`` names.
    """
    if model_device.type == "meta":
        raise ValueError(
            "the model is on the meta device: its parameters hold no values; load its weights first "
            "(e.g. model.load_state_dict(state, assign=True))"
        )
    if device is None:
        return
    try:
        wanted = torch.device(device)
    except (TypeError, RuntimeError) as error:
        raise ValueError(f"device must be a torch.device or a device string, got {device!r}") from error
    if not same_device(wanted, model_device):
        named = canonical_device(wanted)
        also = f" (that is {str(named)!r})" if named != wanted else ""
        raise ValueError(
            f"device={str(wanted)!r}{also}, but the model lives on {str(canonical_device(model_device))!r}: kgeval "
            "evaluates a model where it lives and never moves it; move it first with model.to(device), or pass "
            "device=None to evaluate it where it is"
        )


def check_model(model: Any, targets: Sequence[Target], scores_triples: bool = False, name: str | None = None) -> None:
    """The model exposes the scoring method of every requested target, unless it is scored triple by triple
    (``scores_triples``: a ``score_fn``, ``score_hrt`` or ``forward(h, r, t)``). ``name``: how the error names
    the model (default: its class, with the wrappers it is inside)."""
    if scores_triples:
        return
    methods = {"tail": "score_t", "head": "score_h", "relation": "score_r"}
    served = tuple(target for target, method in methods.items() if callable(getattr(model, method, None)))
    for target in targets:
        if target not in served:
            hint = ""
            if served:
                have = ", ".join(methods[side] for side in served)
                hint = f"; it has {have}: pass targets={served!r} to rank only those sides"
            if not hint:
                hint = held_models_hint(model, scores_itself, "scoring methods")
            raise TypeError(
                f"{name or describe(model)} has no {methods[target]}(batch) to rank {target}s with, and does not score "
                "whole triples (score_hrt(hrt_batch), forward(h, r, t), or evaluate(..., score_fn=...))" + hint
            )


#: floating dtypes kgeval compares in directly; others (float8) are widened to float32 first, which is exact
RANKED_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_scores(
    scores: Any, expected_shape: tuple[int, int], method: str, device: torch.device | None = None
) -> torch.Tensor:
    """A model's score output: a floating tensor of exactly ``expected_shape`` holding data (not on the meta
    device), on ``device`` (the device of the ids kgeval passed, the model's) when given; float8 scores come back
    as float32 (every float8 value is a float32 value: no rank changes)."""
    if not isinstance(scores, torch.Tensor) or not scores.dtype.is_floating_point:
        kind = scores.dtype if isinstance(scores, torch.Tensor) else type(scores).__name__
        raise TypeError(f"model.{method} must return a floating-point tensor, got {kind}")
    if tuple(scores.shape) != expected_shape:
        raise ValueError(f"model.{method} returned shape {tuple(scores.shape)}, expected {expected_shape}")
    if scores.device.type == "meta":
        raise ValueError(f"model.{method} returned scores on the meta device, which hold no values")
    if device is not None and scores.device != device:
        raise ValueError(
            f"model.{method} returned scores on {scores.device}, but kgeval evaluates the model on {device}, where "
            "its parameters are (and where it passed the ids): a model must score on its parameters' device (a "
            "buffer or table left on another device, e.g. created without device=?)"
        )
    return scores if scores.dtype in RANKED_DTYPES else scores.float()


def check_entity_ids(ids: Any, name: str, num_entities: int) -> torch.Tensor:
    """A candidate whitelist (tensor, list or set of ids) as a sorted, unique LongTensor inside range."""
    tensor = _id_tensor(ids, name, "entity")
    out_of_range = (tensor < 0) | (tensor >= num_entities)
    if bool(out_of_range.any()):
        raise ValueError(f"{name} holds id {int(tensor[out_of_range][0])} outside [0, {num_entities})")
    return torch.unique(tensor)


def check_relation_ids(ids: Any, name: str) -> torch.Tensor:
    """A relation selection (tensor, list or set of ids) as a sorted, unique, non-empty LongTensor of ids >= 0."""
    tensor = _id_tensor(ids, name, "relation")
    if bool((tensor < 0).any()):
        raise ValueError(f"{name} holds the negative id {int(tensor[tensor < 0][0])}")
    return torch.unique(tensor)


def _id_tensor(ids: Any, name: str, kind: str) -> torch.Tensor:
    """A tensor, list or set of ``kind`` ids as a flat, non-empty int64 CPU tensor (range unchecked)."""
    if isinstance(ids, torch.Tensor):
        tensor = ids
    else:
        try:
            tensor = torch.as_tensor(sorted(ids) if isinstance(ids, set | frozenset) else list(ids), device="cpu")
        except (TypeError, ValueError) as error:
            raise TypeError(f"{name} must be a tensor, list or set of {kind} ids, got {type(ids).__name__}") from error
    if tensor.numel() == 0:
        raise ValueError(f"{name} must not be empty")
    if tensor.dtype.is_floating_point or tensor.dtype.is_complex or tensor.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer ids, got dtype {tensor.dtype}")
    return tensor.reshape(-1).long().cpu()


def check_rank_batch(
    optimistic: Any,
    pessimistic: Any,
    num_candidates: Any,
    triples: Any = None,
    task_index: Any = None,
) -> None:
    """Inputs of :meth:`MetricAccumulator.update`: aligned 1-D integer tensors, 1 <= opt <= pess <= C."""
    named = {"optimistic": optimistic, "pessimistic": pessimistic, "num_candidates": num_candidates}
    for name, value in named.items():
        if not isinstance(value, torch.Tensor) or value.dtype.is_floating_point or value.dtype == torch.bool:
            raise TypeError(f"{name} must be an integer tensor, got {getattr(value, 'dtype', type(value).__name__)}")
        if value.dim() != 1 or value.shape != optimistic.shape:
            raise ValueError(
                f"{name} must have shape (n,) like optimistic {tuple(optimistic.shape)}, got {tuple(value.shape)}"
            )
    if triples is not None and (not isinstance(triples, torch.Tensor) or tuple(triples.shape) != (len(optimistic), 3)):
        raise ValueError(f"triples must have shape ({len(optimistic)}, 3), got {tuple(getattr(triples, 'shape', ()))}")
    if task_index is not None and (
        not isinstance(task_index, torch.Tensor) or tuple(task_index.shape) != tuple(optimistic.shape)
    ):
        raise ValueError(
            f"task_index must have shape ({len(optimistic)},), got {tuple(getattr(task_index, 'shape', ()))}"
        )
    if not bool(((optimistic >= 1) & (optimistic <= pessimistic) & (pessimistic <= num_candidates)).all()):
        raise ValueError("ranks must satisfy 1 <= optimistic <= pessimistic <= num_candidates for every task")


# -- per-task rank records from files and documents (rank tables, results JSON, accumulator states) -------------
def integer_column(values: Any, name: str, source: str, minimum: int) -> np.ndarray:
    """A record column as int64, every entry an integer >= ``minimum``; ValueError naming the first bad row.

    Integral floats (a CSV column with a blank cell is read as float) are accepted as their integer; NaN, blanks,
    fractions, strings, booleans and values outside int64 are not.
    """
    if isinstance(values, list | tuple):
        flags = [isinstance(value, bool | np.bool_) for value in values]
        if any(flags):  # numpy would read True as 1
            row = flags.index(True)
            raise ValueError(f"{source}: column {name!r} row {row} = {values[row]!r} is not an integer >= {minimum}")
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{source}: column {name!r} must be one-dimensional, got shape {array.shape}")
    if array.dtype.kind in "iu":
        good = np.ones(array.shape, dtype=bool) if array.dtype.kind == "i" else array <= np.iinfo(np.int64).max
        numbers = array.astype(np.float64) if array.dtype.kind == "u" else array
    else:
        numbers = pd.to_numeric(pd.Series(array, dtype=object), errors="coerce").to_numpy(dtype=np.float64)
        is_bool = np.array([isinstance(value, bool | np.bool_) for value in array.tolist()], dtype=bool)
        good = np.isfinite(numbers) & (numbers == np.floor(numbers)) & (np.abs(numbers) < 2.0**63) & ~is_bool
    good &= np.where(good, numbers, minimum) >= minimum
    if not good.all():
        row = int(np.flatnonzero(~good)[0])
        raise ValueError(f"{source}: column {name!r} row {row} = {plain(array[row])!r} is not an integer >= {minimum}")
    return array.astype(np.int64) if array.dtype.kind in "iu" else numbers.astype(np.int64)


def plain(value: Any) -> Any:
    """A numpy scalar as the Python value it holds (for error messages); anything else unchanged."""
    return value.item() if isinstance(value, np.generic) else value


def check_rank_records(
    columns: Mapping[str, Any], source: str, *, unknown_task_index: bool = False, unknown_triples: bool = False
) -> dict[str, np.ndarray]:
    """Per-task records checked against METRICS.md: ids >= 0, 1 <= optimistic <= pessimistic <= num_candidates
    (when present), side codes 0 (head) / 1 (tail) / 2 (relation), task_index >= 0 (-1 = unknown, where allowed),
    realistic (when present) = (optimistic + pessimistic) / 2; all columns of one length.

    Parameters
    ----------
    columns : mapping of str to array-like
        ``head``, ``relation``, ``tail``, ``side`` (int8 codes), ``optimistic``, ``pessimistic``; optional
        ``num_candidates``, ``task_index``, ``realistic``.
    source : str
        What the records come from, for the error messages (e.g. ``"rank table ranks.csv"``).
    unknown_task_index, unknown_triples : bool, default=False
        Allow -1 for an unknown task_index (and an unknown triple: an accumulator updated without triples
        records -1 for their ids and task_index).

    Returns
    -------
    dict of str to ndarray
        The integer columns as int64 (``side`` as int8); ``realistic`` is checked and dropped.
    """
    id_minimum = -1 if unknown_triples else 0
    out = {name: integer_column(columns[name], name, source, id_minimum) for name in ("head", "relation", "tail")}
    out["optimistic"] = integer_column(columns["optimistic"], "optimistic", source, 1)
    out["pessimistic"] = integer_column(columns["pessimistic"], "pessimistic", source, 1)
    out["side"] = integer_column(columns["side"], "side", source, 0)
    for name in ("num_candidates", "task_index"):
        if name in columns:
            minimum = 1 if name == "num_candidates" else -1 if unknown_task_index or unknown_triples else 0
            out[name] = integer_column(columns[name], name, source, minimum)
    lengths = {name: len(column) for name, column in out.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"{source}: record columns differ in length: {lengths}")
    rules = [
        (out["side"] <= 2, "side must be 0 (head), 1 (tail) or 2 (relation)"),
        (out["optimistic"] <= out["pessimistic"], "optimistic must be <= pessimistic"),
    ]
    if "num_candidates" in out:
        rules.append((out["pessimistic"] <= out["num_candidates"], "pessimistic must be <= num_candidates"))
    if "realistic" in columns:
        realistic = np.asarray(columns["realistic"], dtype=np.float64)
        rules.append((realistic * 2 == out["optimistic"] + out["pessimistic"], "realistic must be the mean rank"))
    for good, rule in rules:
        if not good.all():
            row = int(np.flatnonzero(~good)[0])
            values = {name: column[row].item() for name, column in out.items()}
            raise ValueError(f"{source}: row {row} {values}: {rule}")
    out["side"] = out["side"].astype(np.int8)
    return out
