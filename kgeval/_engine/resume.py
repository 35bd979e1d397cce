"""Resumable evaluations: the counts of the batches done so far, saved atomically to a progress file and read back by
a later call with the same inputs, which then ranks only the tasks left.

Each side's loop (:func:`kgeval._engine.loop.rank_side`) runs its batches in a fixed order of its tasks (the plan's),
so what is done is always a prefix of that order: a :class:`SideProgress` holds the prefix's length and its counts.
:class:`EvaluationProgress` holds one per (target, candidate group) and a fingerprint of everything the counts
depend on (the model's weights, the triples, the filter, the candidates, the options); a progress file whose
fingerprint differs is refused, never mixed in. Saving writes a temporary file and renames it over the previous one
(``os.replace`` is atomic), so a process killed while saving leaves the previous progress intact. Under
``torch.distributed`` every rank keeps its own file (``PATH.rank{r}-of-{w}``): each rank's share of the tasks is fixed
by the inputs and the world size.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch

from kgeval._engine.counting import BatchCounts, SideCounts

#: the progress file format this module writes and reads
FORMAT = "kgeval-progress-1"
#: bytes hashed per step when fingerprinting a tensor
HASH_CHUNK = 2**26


def model_fingerprint(model: Any) -> dict[str, Any]:
    """The class of ``model`` and a hash of every tensor of its ``state_dict`` (name, dtype, shape, bytes); a model
    without a ``state_dict`` is described by its class only."""
    description: dict[str, Any] = {"class": f"{type(model).__module__}.{type(model).__qualname__}"}
    state_dict = getattr(model, "state_dict", None)
    if callable(state_dict):
        digest = hashlib.blake2b(digest_size=16)
        for name, tensor in state_dict().items():
            if isinstance(tensor, torch.Tensor):
                digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
                _hash_tensor(digest, tensor)
        description["weights"] = digest.hexdigest()
    return description


def _hash_tensor(digest: Any, tensor: torch.Tensor) -> None:
    data = tensor.detach().contiguous().reshape(-1)
    if data.numel() == 0:
        return
    raw = data.view(torch.uint8) if data.dtype != torch.bool else data.to(torch.uint8)
    for start in range(0, raw.numel(), HASH_CHUNK):
        digest.update(raw[start : start + HASH_CHUNK].cpu().numpy().tobytes())


@dataclass
class SideProgress:
    """The tasks of one side's loop done so far: the first ``done`` tasks of its plan order and their counts, the
    checksum of that order, and the owner to notify after each batch."""

    done: int = 0
    parts: list[SideCounts] = field(default_factory=list)
    plan: int | None = None  #: checksum of the plan order the prefix refers to
    owner: EvaluationProgress | None = field(default=None, repr=False)

    def start(self, plan: int) -> int:
        """The first task of the plan order left to do, for a loop whose order has checksum ``plan``; a saved prefix
        of another order (other sizes chose other slices) is dropped and the side starts over."""
        if self.plan != plan:
            self.done, self.parts, self.plan = 0, [], plan
        return self.done

    def record(self, end: int, counts: SideCounts) -> None:
        """Tasks up to ``end`` of the plan order are done, the last batch's counts being ``counts``."""
        self.parts.append(counts)
        self.done = end
        if self.owner is not None:
            self.owner.batch_done()


class EvaluationProgress:
    """The progress of one evaluation, saved to ``path`` at most every ``save_every`` seconds (0: after every batch).

    Parameters
    ----------
    path : path-like
        The progress file. If it exists, it must hold an unfinished evaluation with the same ``fingerprint``.
    fingerprint : mapping
        Everything the counts depend on (plain values, tuples and strings; compared for equality).
    save_every : float
        Seconds between saves.

    Raises
    ------
    ValueError
        When the file holds the progress of another evaluation (naming the entries that differ) or is not a kgeval
        progress file.
    """

    def __init__(self, path: str | os.PathLike[str], fingerprint: Mapping[str, Any], save_every: float) -> None:
        if not isinstance(save_every, int | float) or isinstance(save_every, bool) or save_every < 0:
            raise ValueError(f"save_every must be a number of seconds >= 0, got {save_every!r}")
        self.path = Path(path)
        if not self.path.parent.is_dir():
            raise ValueError(f"the progress file's folder {str(self.path.parent)!r} does not exist")
        self.fingerprint = dict(fingerprint)
        self.save_every = float(save_every)
        self.sides: dict[Hashable, SideProgress] = {}
        self.resumed_tasks = 0  #: tasks read back from the file (done by an earlier call)
        self._last_save = time.monotonic()
        if self.path.exists():
            self._load()

    def side(self, key: Hashable) -> SideProgress:
        """The progress of one side's loop (``key``: the target and candidate group), created empty if new."""
        progress = self.sides.get(key)
        if progress is None:
            progress = self.sides[key] = SideProgress()
        progress.owner = self
        return progress

    def batch_done(self) -> None:
        """Called after every batch: saves when ``save_every`` seconds have passed since the last save."""
        if time.monotonic() - self._last_save >= self.save_every:
            self.save()

    def save(self) -> None:
        """Write the progress to a temporary file beside ``path`` and rename it over ``path`` (atomic)."""
        state = {
            "format": FORMAT,
            "fingerprint": self.fingerprint,
            "sides": {key: _side_state(progress) for key, progress in self.sides.items()},
        }
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            torch.save(state, temporary)
            os.replace(temporary, self.path)
        finally:
            temporary.unlink(missing_ok=True)
        self._last_save = time.monotonic()

    def finish(self) -> None:
        """The evaluation succeeded: remove the progress file."""
        self.path.unlink(missing_ok=True)

    def _load(self) -> None:
        try:
            state = torch.load(self.path, map_location="cpu", weights_only=True)
        except Exception as error:
            raise ValueError(f"{str(self.path)!r} is not a kgeval progress file ({type(error).__name__}: {error}); "
                             "remove it or pass another progress path") from error  # fmt: skip
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise ValueError(f"{str(self.path)!r} is not a kgeval progress file ({FORMAT}); remove it or pass "
                             "another progress path")  # fmt: skip
        saved = state["fingerprint"]
        names = {*saved, *self.fingerprint}
        differing = sorted(name for name in names if saved.get(name) != self.fingerprint.get(name))
        if differing:
            raise ValueError(
                f"the progress file {str(self.path)!r} belongs to another evaluation: {', '.join(differing)} "
                "differ(s) from this call's; resume with the same model, triples, filter and options, or remove the "
                "file to start over"
            )
        for key, side_state in state["sides"].items():
            progress = _side_progress(side_state)
            self.sides[key] = progress
            self.resumed_tasks += progress.done


def _counts_state(counts: BatchCounts | None) -> dict[str, torch.Tensor] | None:
    if counts is None:
        return None
    return {f.name: getattr(counts, f.name).cpu() for f in fields(BatchCounts)}


def _side_state(progress: SideProgress) -> dict[str, Any]:
    """One side's progress as tensors: its prefix length and the prefix's counts concatenated."""
    if progress.parts:
        order = torch.arange(progress.done, device=progress.parts[0].counts.greater.device)
        merged = SideCounts.cat(progress.parts, order)
        progress.parts = [merged]  # concatenate once
        return {"done": progress.done, "plan": progress.plan, "counts": _counts_state(merged.counts),
                "raw": _counts_state(merged.raw), "fine": _counts_state(merged.fine)}  # fmt: skip
    return {"done": 0, "plan": progress.plan, "counts": None, "raw": None, "fine": None}


def _side_progress(state: Mapping[str, Any]) -> SideProgress:
    done = int(state["done"])
    if done == 0 or state["counts"] is None:
        return SideProgress(plan=state["plan"])
    counts = BatchCounts(**state["counts"])
    raw, fine = (BatchCounts(**state[name]) if state.get(name) is not None else None for name in ("raw", "fine"))
    if any(getattr(part, f.name).shape != (done,) for part in (counts, raw, fine) if part is not None
           for f in fields(BatchCounts)):  # fmt: skip
        raise ValueError("the progress file's counts do not match its number of done tasks")
    return SideProgress(done=done, parts=[SideCounts(counts, raw, None, fine)], plan=state["plan"])


def rank_file(path: str | os.PathLike[str], rank: int, world_size: int) -> Path:
    """The progress file of one rank of a distributed evaluation."""
    path = Path(path)
    return path.with_name(f"{path.name}.rank{rank}-of-{world_size}")
