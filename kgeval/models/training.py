"""A tiny seeded trainer for the reference models, enough to make demos and tests meaningful: softmax cross-entropy
over 1-N scoring or sampled negatives (Lacroix et al. 2018, Ruffinelli et al. 2020), Adam, shuffled mini-batches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal, TypeAlias

import torch
from torch.nn import functional
from tqdm.auto import tqdm

from kgeval import _machine
from kgeval.datasets.labelled import check_id_ranges

__all__ = ["Threads", "free_threads", "train_epoch", "train_model", "training_threads"]

#: the CPU threads of a training run (:func:`train_model`'s ``threads``): None, "free" or a count
Threads: TypeAlias = int | Literal["free"] | None


def free_threads(requested: int) -> int:
    """Of ``requested`` threads (the caller's count), those the machine has cores free for now, by the rule an
    evaluation picks its threads with (kgeval._engine.threads): ``requested`` where the cores are idle or their load
    cannot be read (not Linux), else the cores other processes' runnable threads leave idle
    (``kgeval._machine.others_running`` on ``kgeval._machine.usable_cores``), at least 1 and never more than
    ``requested``. The machine is read only where ``requested`` > 1."""
    if requested <= 1:
        return requested
    idle = _machine.idle_cores(_machine.others_running(), _machine.usable_cores())
    return requested if idle is None else max(1, min(requested, idle))


@contextmanager
def training_threads(threads: Threads) -> Iterator[int]:
    """Run the block on PyTorch's CPU threads as ``threads`` says (the count is yielded), then give the caller its
    count back, also on an error (PyTorch keeps the count per calling thread under OpenMP).

    Parameters
    ----------
    threads : int, "free" or None
        None: the caller's count (``torch.get_num_threads()``), unchanged. ``"free"``: the cores the machine has
        free now (:func:`free_threads`). An int >= 1: that many.
    """
    before = torch.get_num_threads()
    wanted = before if threads is None else free_threads(before) if threads == "free" else threads
    if wanted != before:
        torch.set_num_threads(wanted)
    try:
        yield wanted
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def train_model(
    model: Any,
    triples: torch.Tensor,
    *,
    num_epochs: int = 10,
    batch_size: int = 256,
    lr: float = 0.01,
    num_negatives: int | None = None,
    seed: int = 0,
    use_tqdm: bool = True,
    threads: Threads = None,
) -> list[float]:
    """Train ``model`` on ``triples`` with softmax cross-entropy over candidate heads and tails.

    Parameters
    ----------
    model : nn.Module
        A model with ``score_t(hr_batch, tails=None)``, ``score_h(rt_batch, heads=None)`` and ``num_entities``
        (e.g. :class:`kgeval.models.DistMult`); with ``num_negatives`` set, ``score_hrt`` is used instead.
        Trained in place on its own device.
    triples : LongTensor of shape (n, 3), or (n, 4) for a temporal model (one with ``num_times``)
        (head, relation, tail) ids of the training triples; (head, relation, tail, time) quadruples for a temporal
        model, whose queries are then (h, r, τ) for ``score_t`` and (r, t, τ) for ``score_h`` (1-N scoring only).
    num_epochs : int, default=10
        Passes over ``triples``; 0 returns an empty list and leaves the model unchanged.
    batch_size : int, default=256
        Training triples per optimiser step (each gives one head and one tail task).
    lr : float, default=0.01
        Adam learning rate.
    num_negatives : int, default=None
        None scores every entity as a candidate (1-N scoring). An int k scores the true entity against k
        entities drawn uniformly at random (they may include the true one or other known answers).
    seed : int, default=0
        Seed of the batch order and negative sampling; with a model initialised from a seed, the run is
        reproducible.
    use_tqdm : bool, default=True
        Show a progress bar over epochs.
    threads : int, "free" or None, default=None
        PyTorch's CPU threads while training (:func:`training_threads`), the caller's count restored afterwards,
        also on an error: None keeps the caller's count; ``"free"`` runs on the cores the machine has free when
        training starts, as an evaluation does (``kgeval demo`` trains so unless ``--threads`` is given: beside
        other work, a training run on every core waits for the busy ones at every operation); an int runs on that
        many. On CPU, float sums may group differently with another count, so the last digits of a loss can
        differ between counts; pass an int for runs that repeat bit for bit.

    Returns
    -------
    list of float, length num_epochs
        Mean loss per epoch (the average over the epoch's tasks of the cross-entropy).

    Notes
    -----
    Every call creates a fresh Adam optimiser, so calling it repeatedly with ``num_epochs=1`` (e.g. to evaluate
    between epochs) restarts Adam's moment estimates each time; it still trains, just not identically to one call.
    For a loop that evaluates between epochs, call :func:`train_epoch` with one optimiser you keep.

    Raises
    ------
    ValueError
        If ``triples`` is not an (n, 3) tensor with ids inside the model's range, or an argument is out of
        range.
    """
    _check_arguments(model, triples, num_epochs, batch_size, lr, num_negatives)
    if threads is not None and threads != "free" and (isinstance(threads, bool) or not isinstance(threads, int)
                                                      or threads < 1):  # fmt: skip
        raise ValueError(f"threads must be None, 'free' or an int >= 1, got {threads!r}")
    device = next(model.parameters()).device
    triples = triples.to(device)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    was_training = model.training
    model.train()
    losses: list[float] = []
    # one bar over every batch of every epoch, so a long epoch moves it (ICEWS14s: ~1 minute per epoch on 2 cores);
    # a terminal only (disable=None): in a log file the bar's carriage-return updates would run into other lines
    batches = -(-len(triples) // batch_size)
    bar = tqdm(total=num_epochs * batches, desc="Training", unit="batch", disable=None if use_tqdm else True)
    try:
        with training_threads(threads):
            for epoch in range(num_epochs):
                bar.set_description(f"Training epoch {epoch + 1}/{num_epochs}")
                losses.append(_run_epoch(model, triples, optimizer, batch_size, num_negatives, generator, bar.update))
                bar.set_postfix(loss=f"{losses[-1]:.4f}")
    finally:
        bar.close()
        model.train(was_training)
    return losses


def train_epoch(
    model: Any,
    triples: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    *,
    batch_size: int = 256,
    num_negatives: int | None = None,
    generator: torch.Generator | None = None,
) -> float:
    """One pass over ``triples`` with the loss of :func:`train_model`, for a training loop you write yourself.

    Parameters
    ----------
    model : nn.Module
        As in :func:`train_model`; put in training mode for the epoch, its previous mode restored afterwards.
    triples : LongTensor of shape (n, 3), or (n, 4) quadruples for a temporal model
    optimizer : torch.optim.Optimizer
        Over the model's parameters; kept by the caller across epochs (so Adam keeps its moments).
    batch_size : int, default=256
    num_negatives : int, default=None
        None: 1-N scoring; an int: that many uniformly sampled negatives per task.
    generator : torch.Generator, default=None
        Random source of the batch order and negatives (None: the global torch generator); pass one seeded
        generator to every epoch for a reproducible run.

    Returns
    -------
    float
        Mean loss over the epoch's tasks.
    """
    _check_arguments(model, triples, 1, batch_size, 1.0, num_negatives)
    was_training = model.training
    model.train()
    try:
        device = next(model.parameters()).device
        return _run_epoch(model, triples.to(device), optimizer, batch_size, num_negatives, generator)
    finally:
        model.train(was_training)


def _run_epoch(
    model: Any,
    triples: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    batch_size: int,
    num_negatives: int | None,
    generator: torch.Generator | None,
    after_batch: Callable[[], Any] | None = None,
) -> float:
    """Shuffled mini-batch steps over ``triples`` (on the model's device), calling ``after_batch`` after each (a
    progress bar's update); the mean loss per task."""
    order = torch.randperm(len(triples), generator=generator, device=_device_of(generator)).to(triples.device)
    total = torch.zeros((), dtype=torch.float64, device=triples.device)
    for start in range(0, len(triples), batch_size):
        batch = triples[order[start : start + batch_size]]
        loss = _batch_loss(model, batch, num_negatives, generator)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        total += loss.detach().double() * len(batch)
        if after_batch is not None:
            after_batch()
    return float(total) / len(triples)


def _batch_loss(
    model: Any, batch: torch.Tensor, num_negatives: int | None, generator: torch.Generator | None
) -> torch.Tensor:
    """Mean cross-entropy of the batch's tail and head tasks (scalar FloatTensor)."""
    heads, relations, tails = batch[:, 0], batch[:, 1], batch[:, 2]
    if num_negatives is None:
        timed = batch.shape[1] == 4  # quadruples: the queries carry the time, (h, r, τ) and (r, t, τ)
        tail_scores = model.score_t(batch[:, [0, 1, 3]] if timed else batch[:, :2])  # (B, E)
        head_scores = model.score_h(batch[:, [1, 2, 3]] if timed else batch[:, 1:])  # (B, E)
        targets = torch.cat([tails, heads])
        return functional.cross_entropy(torch.cat([tail_scores, head_scores]), targets)
    # Column 0 holds the true entity, columns 1..k the sampled ones: (B, 1 + k) candidates per task.
    size = (len(batch), num_negatives)
    device = _device_of(generator)
    sampled = torch.randint(model.num_entities, size, generator=generator, device=device).to(batch.device)
    tail_candidates = torch.cat([tails[:, None], sampled], dim=1)
    sampled = torch.randint(model.num_entities, size, generator=generator, device=device).to(batch.device)
    head_candidates = torch.cat([heads[:, None], sampled], dim=1)
    tail_scores = _score_candidates(model, heads, relations, tail_candidates, side="tail")
    head_scores = _score_candidates(model, tails, relations, head_candidates, side="head")
    targets = torch.zeros(2 * len(batch), dtype=torch.long, device=batch.device)
    return functional.cross_entropy(torch.cat([tail_scores, head_scores]), targets)


def _device_of(generator: torch.Generator | None) -> torch.device:
    """Where ``generator`` draws (the global generator: the CPU's), whatever the caller's default device."""
    return generator.device if generator is not None else torch.device("cpu")


def _score_candidates(
    model: Any, fixed: torch.Tensor, relations: torch.Tensor, candidates: torch.Tensor, side: str
) -> torch.Tensor:
    """Scores of shape (B, k) of per-row candidate entities (B, k) for the given side, via ``score_hrt``."""
    fixed = fixed[:, None].expand_as(candidates)
    relations = relations[:, None].expand_as(candidates)
    if side == "tail":
        hrt = torch.stack([fixed, relations, candidates], dim=-1)
    else:
        hrt = torch.stack([candidates, relations, fixed], dim=-1)
    return model.score_hrt(hrt.reshape(-1, 3)).reshape(candidates.shape)


def _check_arguments(
    model: Any,
    triples: torch.Tensor,
    num_epochs: int,
    batch_size: int,
    lr: float,
    num_negatives: int | None,
) -> None:
    """Raise ValueError / TypeError for arguments :func:`train_model` cannot use."""
    width = 4 if hasattr(model, "num_times") else 3  # a temporal model trains on (h, r, t, τ) quadruples
    if not isinstance(triples, torch.Tensor) or triples.ndim != 2 or triples.shape[1] != width:
        shape = tuple(triples.shape) if isinstance(triples, torch.Tensor) else type(triples).__name__
        what = "quadruples of a temporal model" if width == 4 else "triples"
        raise ValueError(f"the training {what} must be a tensor of shape (n, {width}), got {shape}")
    if width == 4 and num_negatives is not None:
        raise ValueError("a temporal model is trained with 1-N scoring only: pass num_negatives=None")
    if triples.dtype != torch.long:
        raise TypeError(f"triples must have dtype torch.int64, got {triples.dtype}")
    if len(triples) == 0:
        raise ValueError("triples is empty: nothing to train on")
    columns = [("head", model.num_entities), ("relation", model.num_relations), ("tail", model.num_entities)]
    check_id_ranges("triples", triples, columns + ([("time", model.num_times)] if width == 4 else []))
    for name, value, minimum in (("num_epochs", num_epochs, 0), ("batch_size", batch_size, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr!r}")
    if num_negatives is not None and (
        isinstance(num_negatives, bool) or not isinstance(num_negatives, int) or num_negatives < 1
    ):
        raise ValueError(f"num_negatives must be None or an int >= 1, got {num_negatives!r}")
