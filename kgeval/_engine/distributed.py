"""Distributed evaluation over ``torch.distributed``: shard the tasks, check the ranks agree, gather and merge.

Every rank of the group calls ``evaluate`` with the same inputs and ranks a contiguous share of the triples
(:func:`shard`); :func:`synchronize` gathers each accumulator's state from every rank and merges them, so all ranks
return the results of the whole evaluation. :class:`CollectiveCheck` makes every rank raise together, never hang.
"""

from __future__ import annotations

import os
from datetime import timedelta
from types import TracebackType
from typing import Any, Literal

import torch
from torch import distributed as dist

from kgeval._engine.filter_index import content_fingerprint
from kgeval._fingerprints import ScoreSignature
from kgeval.accumulator import MetricAccumulator
from kgeval.exceptions import DistributedEvaluationError
from kgeval.typing import Target


def resolve_group(distributed: bool | None, process_group: Any = None) -> Any | None:
    """The process group to evaluate over, or None for a single-process evaluation.

    Parameters
    ----------
    distributed : bool or None
        None: distributed when a process group is initialised and has more than one rank; True: the same, but an
        error when no group is initialised; False: single-process, whatever the environment.
    process_group : torch.distributed.ProcessGroup, optional
        The group to use; default the world group.
    """
    if distributed is not None and not isinstance(distributed, bool):
        raise TypeError(f"distributed must be None, True or False, got {distributed!r}")
    if distributed is False:
        return None
    if not (dist.is_available() and dist.is_initialized()):
        if distributed or process_group is not None:
            raise ValueError(
                "distributed evaluation needs an initialised torch.distributed process group "
                "(call torch.distributed.init_process_group first), got none"
            )
        return None
    group = process_group if process_group is not None else dist.group.WORLD
    world_size = dist.get_world_size(group)
    if world_size < 1:
        raise ValueError(f"this process (global rank {dist.get_rank()}) is not a member of process_group")
    return group if world_size > 1 else None


#: the environment variable that sets how many seconds a collective evaluate waits for every rank to enter it
ENTRY_TIMEOUT_VARIABLE = "KGEVAL_DISTRIBUTED_ENTRY_TIMEOUT"
#: its default: long enough for a rank that saves a checkpoint or logs before evaluating, far below the process
#: group's own timeout (30 min for gloo, 10 min for NCCL) that a rank evaluating alone would otherwise wait out
DEFAULT_ENTRY_TIMEOUT = 60.0


def entry_timeout() -> float:
    """Seconds a collective evaluate waits for every rank to enter it: ``KGEVAL_DISTRIBUTED_ENTRY_TIMEOUT``, else
    :data:`DEFAULT_ENTRY_TIMEOUT`."""
    text = os.environ.get(ENTRY_TIMEOUT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_ENTRY_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(f"{ENTRY_TIMEOUT_VARIABLE} must be a positive number of seconds, got {text!r}")
    return seconds


def check_every_rank_entered(group: Any) -> None:
    """Return once every rank of ``group`` has entered this collective evaluation; raise when one has not within
    :func:`entry_timeout` seconds (``if rank == 0: evaluator.evaluate(...)``: without this check rank 0 would wait
    in the first collective until the process group times out).

    The ranks meet in the default group's key-value store (any backend, no collective), under the group's current
    *generation* -- a number the store holds, the same for every rank that enters: each rank adds one to the
    generation's counter of arrivals; the last to arrive writes "entered", a rank that waited in vain writes
    "abandoned" -- whichever is written first is every rank's outcome, so a rank that arrives after the others gave
    up raises too instead of waiting in a collective for ranks that left. Either outcome moves the group to the next
    generation (once), so the ranks' next evaluation meets afresh: an evaluation one rank entered alone and
    abandoned leaves nothing behind, and a later evaluation every rank calls succeeds. (Before, each process counted
    its own evaluations: after rank 0 had evaluated alone its count stayed one ahead of the others', and every later
    collective evaluation failed as "entered after the other ranks gave up".)

    Raises
    ------
    DistributedEvaluationError
        When a rank of ``group`` did not enter the evaluation in time, or entered it after the others gave up.
    """
    store = dist.distributed_c10d._get_default_store()
    name = dist.distributed_c10d._get_process_group_name(group)
    generation_key = f"kgeval/evaluate/{name}/generation"
    generation = int(store.add(generation_key, 0))
    prefix, size, seconds = f"kgeval/evaluate/{name}/{generation}", dist.get_world_size(group), entry_timeout()
    arrived = int(store.add(f"{prefix}/arrived", 1))
    if arrived >= size:
        outcome = store.compare_set(f"{prefix}/outcome", "", "entered")
        _forget(store, f"kgeval/evaluate/{name}/{generation - 1}")  # every rank has passed the previous check
    else:
        try:
            store.wait([f"{prefix}/outcome"], timedelta(seconds=seconds))
            outcome = store.get(f"{prefix}/outcome")
        except RuntimeError:  # the wait timed out (torch.distributed.DistStoreError)
            outcome = store.compare_set(f"{prefix}/outcome", "", "abandoned")
    # the group's next evaluation meets under the next generation, moved once by whichever rank comes first (every
    # rank of this one read the generation before the last arrival or the abandonment)
    store.compare_set(generation_key, str(generation), str(generation + 1))
    if outcome.decode() != "entered":
        rank = dist.get_rank(group)
        if arrived >= size:
            raise DistributedEvaluationError(
                f"kgeval: rank {rank} entered evaluate more than {seconds:g} s after the other ranks of its process "
                "group, which stopped waiting for it: call evaluate on every rank at the same point (or set "
                f"{ENTRY_TIMEOUT_VARIABLE} to more seconds), or pass distributed=False to evaluate on one rank only. "
                "The group's next evaluation that every rank calls runs as usual"
            )
        together = int(store.add(f"{prefix}/arrived", 0))
        alone = "alone" if together == 1 else f"with {together} of the group's {size} ranks"
        raise DistributedEvaluationError(
            f"kgeval: rank {rank} evaluates {alone}: pass distributed=False to evaluate on this rank only (the other "
            f"ranks of its process group did not call evaluate within {seconds:g} s; ranks that are only late: set "
            f"{ENTRY_TIMEOUT_VARIABLE} to more seconds). The group's next evaluation that every rank calls runs as "
            "usual"
        )


def _forget(store: Any, prefix: str) -> None:
    """Delete an evaluation's keys from the store (a store that cannot delete keeps them: a few bytes each)."""
    for key in (f"{prefix}/arrived", f"{prefix}/outcome"):
        try:
            store.delete_key(key)
        except (NotImplementedError, RuntimeError):
            return


def shard(task_index: torch.Tensor, group: Any | None) -> torch.Tensor:
    """This rank's contiguous share of ``task_index`` (LongTensor (n,)); shares differ in size by at most one.

    A rank gets an empty share when the group has more ranks than tasks.
    """
    if group is None:
        return task_index
    return torch.tensor_split(task_index, dist.get_world_size(group))[dist.get_rank(group)]


def checksum(tensor: torch.Tensor) -> int:
    """A checksum of an integer tensor's values in order, computed where it lives (two scalars to the host): the two
    random-weighted sums of :func:`kgeval._engine.filter_index.content_fingerprint` as one 128-bit number. (A
    position-weighted sum with weights in arithmetic progression, before, summed few-entry edits such as +1, -1, -1,
    +1 to zero: another model's triples passed for the saved ones.)"""
    _shape, _dtype, first, second = content_fingerprint([tensor])[0]
    return (first % 2**64) << 64 | (second % 2**64)


def fingerprint(**inputs: Any) -> dict[str, Any]:
    """Cheap summary of evaluation inputs: (shape, checksum) per tensor, per tensor of a list; other values as is."""

    def describe(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return (tuple(value.shape), checksum(value))
        if isinstance(value, list | tuple):
            return tuple(describe(item) for item in value)
        return value

    return {name: describe(value) for name, value in inputs.items()}


class CollectiveCheck:
    """Context manager making every rank of ``group`` raise together when any rank fails inside it.

    At exit every rank all-gathers (its error message or None, its fingerprint). A rank whose block raised -- any
    BaseException, KeyboardInterrupt included -- re-raises its own exception; the others raise
    :class:`DistributedEvaluationError` naming the failed rank(s).
    When no rank failed but the fingerprints given to :meth:`expect_same` differ, or the score signatures given to
    :meth:`expect_same_scores` disagree, every rank raises ValueError. With ``group=None`` it does nothing.
    """

    def __init__(self, group: Any | None) -> None:
        self.group = group
        self._fingerprint: dict[str, Any] | None = None
        self._signature: ScoreSignature | None = None

    def expect_same(self, **inputs: Any) -> None:
        """Require these inputs to agree across ranks (checked at exit; see :func:`fingerprint`)."""
        if self.group is not None:
            self._fingerprint = fingerprint(**inputs)

    def expect_same_scores(self, signature: ScoreSignature | None) -> None:
        """Require every rank's model to score the probe as rank 0's does (checked at exit, within
        :data:`kgeval._fingerprints.SIGNATURE_TOLERANCE`; a rank giving None is not compared)."""
        if self.group is not None:
            self._signature = signature

    def __enter__(self) -> CollectiveCheck:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> Literal[False]:
        if self.group is None:
            return False
        # any exception, KeyboardInterrupt & co. included, is exchanged: a rank that left without telling the
        # others (its training loop may catch the interrupt and go on) would leave them waiting in a collective
        message = None if exc is None else f"{type(exc).__name__}: {exc}"
        statuses: list[Any] = [None] * dist.get_world_size(self.group)
        signature = None if self._signature is None else self._signature.to_plain()
        dist.all_gather_object(statuses, (message, self._fingerprint, signature), group=self.group)
        if exc is not None:
            return False
        failed = [(rank, error) for rank, (error, _, _) in enumerate(statuses) if error is not None]
        if failed:
            details = "; ".join(f"rank {rank}: {error}" for rank, error in failed)
            raise DistributedEvaluationError(f"distributed evaluation failed on another rank ({details})")
        _raise_on_disagreement([prints for _, prints, _ in statuses])
        _raise_on_other_models([ScoreSignature.from_plain(plain) for _, _, plain in statuses])
        return False


def _raise_on_disagreement(prints: list[dict[str, Any] | None]) -> None:
    """ValueError when the ranks' fingerprints differ, naming the inputs and each rank's summary of them."""
    first = prints[0] or {}
    names = sorted({name for p in prints for name in (p or {})})
    differing = [name for name in names if any((p or {}).get(name) != first.get(name) for p in prints)]
    if differing:
        name = differing[0]
        values = ", ".join(f"rank {rank}: {(p or {}).get(name)}" for rank, p in enumerate(prints))
        raise ValueError(
            f"the ranks disagree on the evaluation inputs {differing} (expected identical inputs on every rank; "
            f"{name} (shape, checksum) differs: {values}); every rank must call evaluate with the same triples, "
            "filter triples and options"
        )


def _raise_on_other_models(signatures: list[ScoreSignature | None]) -> None:
    """ValueError when a rank's model scores the probe otherwise than rank 0's (:class:`ScoreSignature`), naming
    the ranks that differ: a distributed evaluation shares the tasks of one model out, so ranks holding different
    models (an EMA kept on rank 0 only, per-rank hyperparameters) would be merged into the ranks of neither."""
    reference = signatures[0]
    if reference is None:
        return
    differences = {rank: reference.difference(signature) for rank, signature in enumerate(signatures) if rank > 0
                   and signature is not None}  # fmt: skip
    differing = {rank: reason for rank, reason in differences.items() if reason is not None}
    if differing:
        first, reason = next(iter(differing.items()))
        raise ValueError(
            f"the ranks hold models that score differently: rank(s) {sorted(differing)} score kgeval's probe queries "
            f"otherwise than rank 0 (rank {first}: {reason}). A distributed evaluation shares the tasks of one model "
            "out across the ranks and merges their ranks, so every rank must hold the same model (load it from one "
            "checkpoint, or broadcast rank 0's weights). To evaluate each rank's own model (an EMA kept on one rank, "
            "a hyperparameter trial per rank), pass distributed=False on every rank"
        )


def all_gather_uneven(tensor: torch.Tensor, group: Any) -> list[torch.Tensor]:
    """Every rank's ``tensor`` (shapes may differ in the first dimension): exchange sizes, pad, gather, trim."""
    world_size = dist.get_world_size(group)
    size = torch.tensor([tensor.shape[0]], dtype=torch.int64, device=tensor.device)
    sizes = [torch.zeros_like(size) for _ in range(world_size)]
    dist.all_gather(sizes, size, group=group)
    lengths = [int(s) for s in sizes]
    padded = tensor.new_zeros((max(max(lengths), 1), *tensor.shape[1:]))
    padded[: tensor.shape[0]] = tensor
    gathered = [torch.empty_like(padded) for _ in range(world_size)]
    dist.all_gather(gathered, padded, group=group)
    return [part[:length] for part, length in zip(gathered, lengths, strict=True)]


def communication_device(group: Any) -> torch.device:
    """Where collectives of ``group`` take their tensors: the current CUDA device for NCCL, else the CPU."""
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def synchronize(accumulators: dict[Target, MetricAccumulator], group: Any) -> dict[Target, MetricAccumulator]:
    """Each side's accumulator over the tasks of every rank (collective: every rank must call it, same sides)."""
    return {target: _synchronize_one(accumulator, group) for target, accumulator in accumulators.items()}


def _synchronize_one(accumulator: MetricAccumulator, group: Any) -> MetricAccumulator:
    """Gather every rank's state and merge them in rank order: shards are contiguous, so the records come out in
    the single-process task order, and the sums are the single-process sums up to float rounding."""
    state = accumulator.state_dict()
    device = state["sum:count"].device
    comm = communication_device(group)
    per_rank: list[dict[str, torch.Tensor]] = [dict(state) for _ in range(dist.get_world_size(group))]
    for name, value in state.items():
        if name.startswith("meta:"):  # ks and keep_records: the same on every rank (checked by CollectiveCheck)
            continue
        records = name.startswith("cat:")  # one row per task, a different number per rank; sums: one row per rank
        parts = all_gather_uneven((value if records else value.reshape(1, -1)).to(comm), group)
        for rank_state, part in zip(per_rank, parts, strict=True):
            rank_state[name] = part.to(device) if records else part.to(device).reshape(value.shape)
    first, *rest = (MetricAccumulator.from_trusted_state(rank_state) for rank_state in per_rank)
    return first.merge(*rest)
