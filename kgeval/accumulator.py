"""MetricAccumulator: the mergeable state of one side's ranking tasks, and the metrics computed from it.

Two kinds of state: float64 / int64 sums per rank type and null-model sums (merged by adding), and the per-task
records (merged by concatenating; emitted as :class:`kgeval.records.RankRecords`). Distributed synchronisation
gathers the states and calls :meth:`MetricAccumulator.merge`.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import torch

from kgeval._checks import check_ks, check_rank_batch, check_rank_records
from kgeval.metrics.null_model import candidate_statistics
from kgeval.metrics.registry import reported_keys
from kgeval.metrics.summary import RankSummary, rank_statistics, rank_sums
from kgeval.records import RankRecords, ranks_of_type
from kgeval.typing import RANK_TYPES, RankType, Target

__all__ = [
    "MetricAccumulator",
    "merged",
    "to_host",
]

#: per-task record states and their dtype / trailing shape
RECORD_STATES: dict[str, tuple[torch.dtype, tuple[int, ...]]] = {
    "optimistic": (torch.int64, ()),
    "pessimistic": (torch.int64, ()),
    "num_candidates": (torch.int64, ()),
    "triples": (torch.int64, (3,)),
    "task_index": (torch.int64, ()),
}


class MetricAccumulator:
    """Streams rank batches of one side into mergeable sums and per-task records.

    Parameters
    ----------
    ks : sequence of int, default=(1, 3, 5, 10)
        The k of hits@k (and of the adjusted / z hits metrics).
    keep_records : bool, default=True
        Keep one record per task (5 int64 fields plus the triple). Needed by median, MAD, variance, GMR-based
        null-model metrics and everything that reads ranks per task.

    Examples
    --------
    >>> acc = MetricAccumulator(ks=(1,))
    >>> acc.update(torch.tensor([1, 2]), torch.tensor([2, 2]), torch.tensor([5, 5]))
    >>> acc.compute("realistic")["hits_at_1"]
    0.0
    >>> acc.compute("optimistic")["hits_at_1"]
    0.5
    """

    def __init__(self, ks: Sequence[int] = (1, 3, 5, 10), keep_records: bool = True) -> None:
        self.ks: tuple[int, ...] = check_ks(ks)
        self.keep_records = bool(keep_records)
        self._sums: dict[str, torch.Tensor] = {}
        self._records: dict[str, list[torch.Tensor]] = {}
        #: every state read to the host (sums by name, records as "records/<name>"), as numpy; None: not read since
        #: the last change (:func:`to_host`)
        self._host: dict[str, np.ndarray] | None = None
        self.reset()

    # -- declared states -------------------------------------------------------------------------------------
    def _default_sums(self) -> dict[str, torch.Tensor]:
        """The sums of no task: :func:`_empty_sums`, computed once per ks and shared -- no state tensor is ever
        written in place (every change makes new ones), and :meth:`state_dict` hands out copies of them."""
        return dict(_empty_sums(self.ks))

    def _map_states(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """Apply ``fn`` to every state tensor in place (serves ``to`` and ``clone``)."""
        self._sums = {name: fn(value) for name, value in self._sums.items()}
        self._records = {name: [fn(part) for part in parts] for name, parts in self._records.items()}

    def reset(self) -> None:
        """Forget every update: sums to zero, records emptied."""
        self._sums = self._default_sums()
        self._records = {name: [] for name in RECORD_STATES} if self.keep_records else {}
        self._host = None
        self._fresh = True  #: no update since this reset (known on the host: nothing to read)

    def to(self, device: torch.device | str) -> MetricAccumulator:
        """Move every state to ``device`` (in place); returns self."""
        self._map_states(lambda tensor: tensor.to(device))
        return self

    def clone(self) -> MetricAccumulator:
        """An independent copy."""
        other = copy.copy(self)
        other._sums = dict(self._sums)
        other._records = {name: list(parts) for name, parts in self._records.items()}
        other._map_states(torch.clone)
        other._host = self._host  # never written in place: shared
        return other

    @property
    def count(self) -> int:
        """Number of tasks seen so far (one host synchronisation)."""
        return int(self._sums["count"].item())

    # -- update / merge ---------------------------------------------------------------------------------------
    def update(
        self,
        optimistic: torch.Tensor,
        pessimistic: torch.Tensor,
        num_candidates: torch.Tensor,
        triples: torch.Tensor | None = None,
        task_index: torch.Tensor | None = None,
    ) -> None:
        """Add a batch of ranking tasks.

        Parameters
        ----------
        optimistic, pessimistic : LongTensor of shape (n,)
            1-based integer ranks with 1 <= optimistic <= pessimistic <= num_candidates.
        num_candidates : LongTensor of shape (n,)
            C of each task (METRICS.md, Ranking tasks).
        triples : LongTensor of shape (n, 3), optional
            The (h, r, t) of each task (records only; -1 when not given).
        task_index : LongTensor of shape (n,), optional
            Index of each task's triple in the evaluated triples (records only; -1 when not given).
        """
        check_rank_batch(optimistic, pessimistic, num_candidates, triples, task_index)
        self.update_unchecked(optimistic, pessimistic, num_candidates, triples, task_index)

    def update_unchecked(
        self,
        optimistic: torch.Tensor,
        pessimistic: torch.Tensor,
        num_candidates: torch.Tensor,
        triples: torch.Tensor | None = None,
        task_index: torch.Tensor | None = None,
    ) -> None:
        """:meth:`update` without validation, for trusted callers (the evaluator); no host synchronisation."""
        device = optimistic.device
        self._host = None
        fresh = self._fresh  # no update since the last reset: the batch's sums are the sums (no additions)
        self._fresh = False
        if not fresh and self._sums["count"].device != device:
            self.to(device)
        batch: dict[str, torch.Tensor] = {"count": torch.tensor(optimistic.numel(), dtype=torch.int64, device=device)}
        k_tensor = torch.tensor(self.ks, dtype=torch.float64, device=device)
        for rank_type in RANK_TYPES:
            stats = rank_sums(ranks_of_type(rank_type, optimistic, pessimistic), k_tensor)
            batch.update({f"{rank_type}/{name}": value for name, value in stats.items()})
        batch.update({f"candidates/{n}": v for n, v in candidate_statistics(num_candidates, self.ks).items()})
        self._sums = {name: batch[name] if fresh else value + batch[name] for name, value in self._sums.items()}
        if self.keep_records:
            n = optimistic.shape[0]
            missing = torch.full((n,), -1, dtype=torch.int64, device=device)
            fields = {
                "optimistic": optimistic,
                "pessimistic": pessimistic,
                "num_candidates": num_candidates,
                "triples": triples if triples is not None else missing.unsqueeze(1).expand(n, 3),
                "task_index": task_index if task_index is not None else missing,
            }
            for name, value in fields.items():
                self._records[name].append(value.to(torch.int64))

    def merge(self, *others: MetricAccumulator) -> MetricAccumulator:
        """Add the states of ``others`` into this accumulator (in place); returns self. Inputs are unchanged.

        Sums are added, records concatenated in argument order; ``update`` and ``compute`` keep working. Records
        are kept only if every merged accumulator kept them.
        """
        for other in others:
            _check_mergeable(self, other)
            device = self._sums["count"].device
            self._sums = {name: value + other._sums[name].to(device) for name, value in self._sums.items()}
            if self.keep_records and other.keep_records:
                for name, parts in self._records.items():
                    parts.extend(part.to(device) for part in other._records[name])
            elif self.keep_records:
                self.keep_records = False
                self._records = {}
        self._host = _merged_host(self, others)  # the states read before (the loop changes none of them)
        self._fresh = self._fresh and all(other._fresh for other in others)
        return self

    # -- records and state dicts ------------------------------------------------------------------------------
    def records(self, target: Target) -> RankRecords:
        """The per-task records on the host, their ``side`` column set to ``target`` (the accumulator does not
        know which side it holds); read with the other states in one transfer (:func:`to_host`)."""
        if not self.keep_records:
            raise ValueError("this accumulator keeps no per-task records (keep_records=False)")
        host = self._host_state()
        return RankRecords.from_arrays(target, **{name: host[f"records/{name}"].copy() for name in RECORD_STATES})

    def _record_tensors(self) -> dict[str, torch.Tensor]:
        """The record states, concatenated on the accumulator's device (each of length n; ``triples`` (n, 3))."""
        if not self.keep_records:
            raise ValueError("this accumulator keeps no per-task records (keep_records=False)")
        out = {}
        for name, (dtype, trailing) in RECORD_STATES.items():
            parts = self._records[name]
            device = self._sums["count"].device
            out[name] = torch.cat(parts) if parts else torch.zeros((0, *trailing), dtype=dtype, device=device)
        self._records = {name: [value] for name, value in out.items()}  # concatenate once
        return out

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Every state as one tensor (records concatenated), plus ``ks`` and ``keep_records`` as tensors."""
        state = {f"sum:{name}": value.clone() if self._fresh else value for name, value in self._sums.items()}
        if self.keep_records:
            state.update({f"cat:{name}": value for name, value in self._record_tensors().items()})
        state["meta:ks"] = torch.tensor(self.ks, dtype=torch.int64, device="cpu")
        state["meta:keep_records"] = torch.tensor(self.keep_records, device="cpu")
        return state

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Replace every state by the ones in ``state`` (as produced by :meth:`state_dict`)."""
        _check_state_dict(self, state)
        self._load(state)

    def _load(self, state: dict[str, torch.Tensor]) -> None:
        self.ks = tuple(int(k) for k in state["meta:ks"].tolist())
        self.keep_records = bool(state["meta:keep_records"].item())
        self._host = None
        self._fresh = False
        self._sums = {name[len("sum:") :]: value.clone() for name, value in state.items() if name.startswith("sum:")}
        self._records = {
            name[len("cat:") :]: [value.clone()] for name, value in state.items() if name.startswith("cat:")
        }

    @classmethod
    def from_trusted_state(cls, state: dict[str, torch.Tensor]) -> MetricAccumulator:
        """:meth:`from_state_dict` without validation, for states kgeval produced itself (distributed sync)."""
        acc = cls(ks=tuple(int(k) for k in state["meta:ks"].tolist()), keep_records=False)
        acc._load(state)
        return acc

    @classmethod
    def from_state_dict(cls, state: dict[str, torch.Tensor]) -> MetricAccumulator:
        """A new accumulator holding ``state``."""
        ks = state.get("meta:ks")
        acc = cls(ks=check_ks(ks.tolist()) if ks is not None else (1,))
        acc.load_state_dict(state)
        return acc

    # -- compute ----------------------------------------------------------------------------------------------
    def summary(self, rank_type: RankType) -> RankSummary:
        """The :class:`RankSummary` of one rank type, on the host: every state is read in one transfer, once
        until the next update (:func:`to_host`), and the metrics are computed from it in numpy."""
        host = self._host_state()
        sums: dict[str, float | np.ndarray] = {}
        for name in self._sums:
            prefix, _, stat = name.partition("/")
            if name == "count" or prefix == "candidates" or prefix == rank_type:
                value = host[name]
                sums[stat or name] = value.item() if value.ndim == 0 else value
        if not self.keep_records:
            return RankSummary(ks=self.ks, sums=sums)
        ranks = ranks_of_type(rank_type, host["records/optimistic"], host["records/pessimistic"])
        return RankSummary(ks=self.ks, sums=sums, ranks=ranks, num_candidates=host["records/num_candidates"])

    def _host_state(self) -> dict[str, np.ndarray]:
        """Every state on the host (:attr:`_host`), read now if it was not since the last change."""
        if self._host is None:
            to_host([self])
        assert self._host is not None
        return self._host

    def compute(self, rank_type: RankType = "realistic") -> dict[str, float]:
        """Every metric supported for ``rank_type`` (metric key -> value); NaN with a warning where undefined."""
        summary = self.summary(rank_type)
        return {key: info.function(summary, k) for key, info, k in reported_keys(self.ks, rank_type, self.keep_records)}


@functools.lru_cache(maxsize=16)
def _empty_sums(ks: tuple[int, ...]) -> dict[str, torch.Tensor]:
    """The sums of no task: ordinary CPU tensors of fixed dtypes (float64 / int64), shared by fresh accumulators
    and never written (see :meth:`MetricAccumulator._default_sums`).

    The cache outlives the call that fills it, so nothing of that caller's context reaches it: every tensor is
    made with an explicit device and dtype (a default device -- ``torch.set_default_device("meta")`` or
    ``"cuda"`` -- or a default dtype set by the first caller would otherwise be kept for the whole process), and
    outside ``torch.inference_mode`` (an evaluation fills it inside kgeval's, whose inference tensors later
    callers could not use freely)."""
    with torch.inference_mode(False), torch.no_grad():
        empty_ranks = torch.zeros(0, dtype=torch.float64, device="cpu")
        sums = {"count": torch.zeros((), dtype=torch.int64, device="cpu")}
        for rank_type in RANK_TYPES:
            for name, value in rank_statistics(empty_ranks, ks).items():
                if name != "count":
                    sums[f"{rank_type}/{name}"] = value
        empty_candidates = torch.zeros(0, dtype=torch.int64, device="cpu")
        for name, value in candidate_statistics(empty_candidates, ks).items():
            sums[f"candidates/{name}"] = value
    return sums


def to_host(accumulators: Iterable[MetricAccumulator]) -> None:
    """Read every state of ``accumulators`` (their sums and records) to the host in one transfer -- one host
    synchronisation for them all, however many metrics are computed from them next -- and keep it until their
    next change. The states are packed as int64 (float64 values by their bits, so exactly) into one tensor."""
    pending = [accumulator for accumulator in accumulators if accumulator._host is None]
    if not pending:
        return
    device = pending[0]._sums["count"].device
    # four groups -- floating / integer, scalars (stacked) / arrays (concatenated) -- make the packed tensor in a
    # few operations however many states there are
    groups: dict[tuple[bool, bool], list[tuple[MetricAccumulator, str, torch.Tensor]]] = {}
    for accumulator in pending:
        states = dict(accumulator._sums)
        if accumulator.keep_records:
            states.update({f"records/{name}": value for name, value in accumulator._record_tensors().items()})
        for name, value in states.items():
            key = (value.dtype.is_floating_point, value.dim() == 0)
            groups.setdefault(key, []).append((accumulator, name, value.to(device)))
    parts = []
    for (floating, scalars), members in groups.items():
        values = [value for _accumulator, _name, value in members]
        part = torch.stack(values) if scalars else torch.cat([value.reshape(-1) for value in values])
        parts.append(part.to(torch.float64).view(torch.int64) if floating else part.to(torch.int64))
    packed = torch.cat(parts).cpu().numpy()
    hosts: dict[int, dict[str, np.ndarray]] = {id(accumulator): {} for accumulator in pending}
    offset = 0
    for (floating, _scalars), members in groups.items():
        for accumulator, name, value in members:
            size = value.numel()
            read = packed[offset : offset + size]
            offset += size
            hosts[id(accumulator)][name] = (read.view(np.float64) if floating else read).reshape(value.shape)
    for accumulator in pending:
        accumulator._host = hosts[id(accumulator)]


def merged(accumulators: Sequence[MetricAccumulator]) -> MetricAccumulator:
    """A new accumulator holding the merge of ``accumulators`` (in order; the inputs unchanged), as
    ``accumulators[0].clone().merge(*accumulators[1:])`` gives it. When every input was read to the host
    (:func:`to_host`) with the same states (records kept by all or by none), the merge is made there alone -- no
    operation on the device -- and its states are CPU tensors of the merged host values."""
    first, *rest = accumulators
    host = _merged_host(first, rest)  # None unless every input was read, with the same states
    if host is None:
        return first.clone().merge(*rest)
    out = copy.copy(first)
    out._sums = {name: torch.from_numpy(np.array(host[name])) for name in first._sums}
    out._records = {name: [torch.from_numpy(host[f"records/{name}"])] for name in first._records}
    out._host = host
    out._fresh = first._fresh and all(accumulator._fresh for accumulator in rest)
    return out


def _merged_host(receiver: MetricAccumulator, others: Sequence[MetricAccumulator]) -> dict[str, np.ndarray] | None:
    """The host states :meth:`MetricAccumulator.merge` gives, from those read already (sums added, records
    concatenated in order -- what the merged device states hold); None when one of them was not read."""
    states = [receiver._host, *(getattr(other, "_host", None) for other in others)]
    if any(state is None for state in states) or len({frozenset(state) for state in states}) != 1:  # type: ignore[arg-type]
        return None
    merged: dict[str, np.ndarray] = {}
    for name in receiver._host:  # type: ignore[union-attr]
        values = [state[name] for state in states]  # type: ignore[index]
        merged[name] = np.concatenate(values) if name.startswith("records/") else sum(values[1:], values[0])
    return merged


# -- checks of merged and loaded states -------------------------------------------------------------------------
def _check_mergeable(receiver: MetricAccumulator, other: Any) -> None:
    """``other`` is an accumulator with the same ks as ``receiver``."""
    if not isinstance(other, MetricAccumulator):
        raise TypeError(f"can only merge a MetricAccumulator, got {type(other).__name__}")
    if other.ks != receiver.ks:
        raise ValueError(f"cannot merge accumulators with different ks: {receiver.ks} and {other.ks}")


def _check_state_dict(receiver: MetricAccumulator, state: Any) -> None:
    """``state`` has exactly the sum states of an accumulator with its ks, and consistent records."""
    if not isinstance(state, dict) or "meta:ks" not in state or "meta:keep_records" not in state:
        raise ValueError("state must be a dict produced by MetricAccumulator.state_dict()")
    if any(not isinstance(value, torch.Tensor) for value in state.values()):
        raise ValueError("state must map names to tensors, as MetricAccumulator.state_dict() does")
    template = MetricAccumulator(ks=check_ks(state["meta:ks"].tolist()), keep_records=False)
    expected = {f"sum:{name}" for name in template._sums}
    present = {name for name in state if name.startswith("sum:")}
    if present != expected:
        raise ValueError(
            f"state sums do not match: missing {sorted(expected - present)}, extra {sorted(present - expected)}"
        )
    if bool(state["meta:keep_records"].item()):
        missing = [name for name in RECORD_STATES if f"cat:{name}" not in state]
        if missing:
            raise ValueError(f"state keeps records but lacks {missing}")
        lengths = {int(state[f"cat:{name}"].shape[0]) if state[f"cat:{name}"].dim() else -1 for name in RECORD_STATES}
        if len(lengths) != 1 or lengths != {int(state["sum:count"].item())}:
            raise ValueError("state records have inconsistent lengths")
        _check_state_records(template, state, expected)


def _check_state_records(template: MetricAccumulator, state: dict[str, torch.Tensor], sums: set[str]) -> None:
    """The records of a state obey :func:`check_rank_records`, and its sums are the ones its records give."""
    records = {name: state[f"cat:{name}"] for name in RECORD_STATES}
    if records["triples"].dim() != 2 or records["triples"].shape[1:] != (3,):
        raise ValueError(f"state records: triples must have shape (n, 3), got {tuple(records['triples'].shape)}")
    columns = {name: value.detach().cpu().numpy() for name, value in records.items() if name != "triples"}
    triples = records["triples"].detach().cpu().numpy()
    columns.update(head=triples[:, 0], relation=triples[:, 1], tail=triples[:, 2], side=np.zeros(len(triples)))
    checked = check_rank_records(columns, "accumulator state records", unknown_triples=True)
    tensors = {name: torch.from_numpy(checked[name]) for name in ("optimistic", "pessimistic", "num_candidates")}
    template.update_unchecked(tensors["optimistic"], tensors["pessimistic"], tensors["num_candidates"])
    for name in sorted(sums):
        stored, recomputed = state[name].detach().cpu().double(), template._sums[name[len("sum:") :]].double()
        if stored.shape != recomputed.shape or not torch.allclose(stored, recomputed, rtol=1e-9, atol=1e-9):
            raise ValueError(f"accumulator state: {name} disagrees with the records it keeps")
