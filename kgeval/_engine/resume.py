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

import math
import os
import time
import warnings
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch

from kgeval._engine.counting import BatchCounts, SideCounts
from kgeval._files import replace_atomically
from kgeval._fingerprints import ScoreSignature
from kgeval.exceptions import ResumeWarning

#: the progress file format this module writes and reads
FORMAT = "kgeval-progress-1"


@dataclass
class SideProgress:
    """The tasks of one side's loop done so far: the first ``done`` tasks of its plan order and their counts, the
    checksum of that order, and the owner to notify after each batch."""

    done: int = 0
    parts: list[SideCounts] = field(default_factory=list)
    plan: int | None = None  #: checksum of the plan order the prefix refers to
    owner: EvaluationProgress | None = field(default=None, repr=False)

    def start(self, plan: int, device: torch.device | None = None) -> int:
        """The first task of the plan order left to do, for a loop whose order has checksum ``plan``; a saved prefix
        of another order (other sizes chose other slices) is dropped and the side starts over. The counts read back
        (on the CPU) are moved to ``device``, where the loop counts."""
        if self.plan != plan:
            self.done, self.parts, self.plan = 0, [], plan
        if device is not None:
            self.parts = [part.to(device) for part in self.parts]
        return self.done

    def record(self, end: int, counts: SideCounts) -> None:
        """Tasks up to ``end`` of the plan order are done, the last batch's counts being ``counts``. A batch that
        ends where a recorded one did or before is not recorded again: an out-of-memory retry re-runs the halves of
        a batch whose save (after its counts were recorded) ran out of memory."""
        if end <= self.done:
            return
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
    settings : mapping, optional
        The model's plain attributes (kgeval._fingerprints.model_settings), compared with a warning only.
    signature : ScoreSignature, optional
        What the model scores (kgeval._engine.identity). A file whose model differs -- its ``"model"`` entry (the
        weight digest) or its signature -- holds the ranks of another model (retrained since, or a plain object whose
        state no weight digest sees): it is not resumed but started over, with a :class:`ResumeWarning` saying why,
        never mixed in.

    Raises
    ------
    ValueError
        When the file holds the progress of another evaluation (other triples, filter or options: naming the
        entries that differ) or is not a kgeval progress file.
    """

    def __init__(
        self, path: str | os.PathLike[str], fingerprint: Mapping[str, Any], save_every: float,
        settings: Mapping[str, str] | None = None, signature: ScoreSignature | None = None,
    ) -> None:  # fmt: skip
        if (not isinstance(save_every, int | float) or isinstance(save_every, bool) or not math.isfinite(save_every)
                or save_every < 0):  # fmt: skip
            raise ValueError(f"save_every must be a finite number of seconds >= 0, got {save_every!r}")
        self.path = Path(path)
        if not self.path.parent.is_dir():
            raise ValueError(f"the progress file's folder {str(self.path.parent)!r} does not exist")
        self.fingerprint = dict(fingerprint)
        self.settings = dict(settings or {})
        self.signature = signature
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
            "settings": self.settings,
            "scores": None if self.signature is None else self.signature.to_plain(),
            "sides": {key: _side_state(progress) for key, progress in self.sides.items()},
        }
        replace_atomically(self.path, lambda handle: torch.save(state, handle))
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
        saved = state.get("fingerprint")
        if not isinstance(saved, dict) or not isinstance(state.get("sides"), dict):
            raise ValueError(f"{str(self.path)!r} is not a kgeval progress file (no fingerprint or sides); remove it "
                             "or pass another progress path")  # fmt: skip
        names = {*saved, *self.fingerprint}
        differing = sorted(name for name in names if saved.get(name) != self.fingerprint.get(name))
        other_model = self._other_model(saved, state.get("scores"))
        if differing and differing != ["model"]:
            raise ValueError(
                f"the progress file {str(self.path)!r} belongs to another evaluation: {', '.join(differing)} "
                "differ(s) from this call's; resume with the same model, triples, filter and options, or remove the "
                "file to start over"
            )
        if other_model is not None:
            warnings.warn(
                f"the progress file {str(self.path)!r} holds the ranks of another model ({other_model}): they are "
                "not resumed; the evaluation starts over and replaces the file (ranks of two models are never "
                "mixed)",
                ResumeWarning,
                stacklevel=2,
            )
            return
        if self.signature is None:  # else the model scores the probe as the saved one did: a changed plain
            self._compare_settings(state.get("settings", {}))  # attribute is a counter, not a setting of its scores
        for key, side_state in state["sides"].items():
            progress = _side_progress(side_state)
            self.sides[key] = progress
            self.resumed_tasks += progress.done

    def _other_model(self, saved: Mapping[str, Any], scores: Any) -> str | None:
        """How the saved model differs from this call's, in words (its weight digest, or what it scores), or None
        when it is the same."""
        if saved.get("model") != self.fingerprint.get("model"):
            return "its weights or buffers differ"
        if self.signature is None:
            return None
        difference = self.signature.difference(ScoreSignature.from_plain(scores))
        return None if difference is None else f"it scores otherwise: {difference}"

    def _compare_settings(self, saved: Mapping[str, str]) -> None:
        """Warn, naming them, about plain model attributes that differ from the saved progress's: a setting (TransE's
        ``p``) changes the scores and would mix two models' counts, while a counter the model keeps changes on every
        call -- kgeval cannot tell one from the other, so it resumes and says so."""
        differing = [name for name in sorted({*saved, *self.settings}) if saved.get(name) != self.settings.get(name)]
        if differing:
            shown = "; ".join(f"{name}: {saved.get(name, '(none)')} then, {self.settings.get(name, '(none)')} now"
                              for name in differing[:5])  # fmt: skip
            warnings.warn(
                f"resuming {str(self.path)!r} although the model's plain attributes differ from the saved progress's "
                f"({shown}{' ...' if len(differing) > 5 else ''}): if one is a setting that changes the scores, the "
                "results would mix two models -- remove the file to start over",
                ResumeWarning,
                stacklevel=2,
            )


def _counts_state(counts: BatchCounts | None) -> dict[str, torch.Tensor] | None:
    if counts is None:
        return None
    cpu = counts.to("cpu")
    return {f.name: getattr(cpu, f.name) for f in fields(BatchCounts)}


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
