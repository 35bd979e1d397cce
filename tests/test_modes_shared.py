"""Modes are per module, not per handle: one model evaluated at the same time through two handles (the model and
``DataParallel(model)``, ``torch.compile(model)``, a plain object holding it), or two models sharing a submodule,
evaluated in two threads, ends with every ``training`` flag as it was before both evaluations.

Before, the lock was per object handed over: the second evaluation recorded the first one's eval mode as the
model's own and restored it, so the model (or the shared encoder) was left in eval mode."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from kgeval import RankBasedEvaluator
from kgeval._modes import evaluation_mode
from tests.helpers.graphs import random_graph

E, R, DIM = 30, 3, 8
GRAPH = random_graph(7, num_entities=E, num_relations=R, num_triples=24, num_filter=30)
REPETITIONS = 20


class Encoder(nn.Module):
    """A dropout encoder (two levels, one frozen)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(DIM, DIM)
        self.dropout = nn.Dropout(0.5)
        self.frozen = nn.Sequential(nn.Dropout(0.1), nn.BatchNorm1d(DIM))


class Scorer(nn.Module):
    """A DistMult-like scorer over an encoder it may share with another scorer; each scoring call sleeps a little,
    so two evaluations overlap."""

    def __init__(self, encoder: Encoder | None = None, seed: int = 0) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.entity = nn.Parameter(torch.randn(E, DIM, generator=generator))
        self.relation = nn.Parameter(torch.randn(R, DIM, generator=generator))
        self.encoder = encoder if encoder is not None else Encoder()
        self.head = nn.Dropout(0.2)
        self.num_entities = E

    def score_t(self, hr: torch.Tensor, tails: torch.Tensor | None = None) -> torch.Tensor:
        time.sleep(0.001)
        return (self.entity[hr[:, 0]] * self.relation[hr[:, 1]]) @ self.entity.T

    def score_h(self, rt: torch.Tensor, heads: torch.Tensor | None = None) -> torch.Tensor:
        time.sleep(0.001)
        return (self.relation[rt[:, 0]] * self.entity[rt[:, 1]]) @ self.entity.T


class Holder:
    """A plain object scoring through the network it holds."""

    def __init__(self, net: Scorer) -> None:
        self.net = net
        self.num_entities = E

    def score_t(self, hr: torch.Tensor) -> torch.Tensor:
        return self.net.score_t(hr)

    def score_h(self, rt: torch.Tensor) -> torch.Tensor:
        return self.net.score_h(rt)


def mixed(model: Scorer) -> Scorer:
    """Training mode with a frozen part (one module under it in training mode again)."""
    model.train()
    model.encoder.frozen.eval()
    model.encoder.frozen[1].train()
    return model


def evaluate(model: Any) -> Any:
    evaluator = RankBasedEvaluator(batch_size=4, fast_path=False)
    return evaluator.evaluate(model, GRAPH.triples, additional_filter_triples=GRAPH.filter_triples, use_tqdm=False)


def in_eval_mode(model: Any) -> Any:
    """kgeval's own mode switch over a block as long as an evaluation, without the engine."""
    with evaluation_mode(model):
        time.sleep(0.01)


def two_handles(form: str) -> tuple[list[nn.Module], Any, Any]:
    """(the modules whose flags are checked, the first handle, the second handle)."""
    model = mixed(Scorer())
    if form == "DataParallel":
        return list(model.modules()), model, nn.DataParallel(model)
    if form == "torch.compile":
        return list(model.modules()), model, torch.compile(model)
    if form == "holder":
        return list(model.modules()), model, Holder(model)
    shared = Encoder()
    first, second = mixed(Scorer(shared, seed=0)), mixed(Scorer(shared, seed=1))
    return [*first.modules(), *second.modules()], first, second


def run_both(first: Any, second: Any, call: Callable[[Any], Any]) -> None:
    """``call`` each handle in its own thread, started together at a barrier; errors re-raised."""
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def run(handle: Any) -> None:
        try:
            barrier.wait(timeout=30)
            call(handle)
        except BaseException as error:  # re-raised in the main thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(handle,)) for handle in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert not any(thread.is_alive() for thread in threads)


FORMS = ["DataParallel", "torch.compile", "holder", "shared submodule"]


@pytest.mark.parametrize("call", [evaluate, in_eval_mode], ids=["evaluate", "evaluation_mode"])
@pytest.mark.parametrize("form", FORMS)
def test_every_flag_ends_as_it_was_after_two_threads_evaluate_through_two_handles(form: str, call: Any) -> None:
    """Over :data:`REPETITIONS` runs of two overlapping threads, every ``training`` flag of every module ends as it
    was before both evaluations (before, with ``evaluation_mode``: left in eval mode in most runs for each form)."""
    left_in_eval = 0
    for _ in range(REPETITIONS):
        modules, first, second = two_handles(form)
        before = [module.training for module in modules]
        run_both(first, second, call)
        left_in_eval += [module.training for module in modules] != before
    assert left_in_eval == 0, f"flags changed in {left_in_eval} of {REPETITIONS} runs"


def test_a_thread_evaluating_inside_its_own_evaluation_does_not_wait_on_itself() -> None:
    """Re-entrant in one thread: an evaluation inside an evaluation of an overlapping set of modules (a scorer
    that evaluates its shared encoder's other user while scored) runs, and the flags end as they were."""
    shared = Encoder()
    first, second = mixed(Scorer(shared, seed=0)), mixed(Scorer(shared, seed=1))
    before = [module.training for module in [*first.modules(), *second.modules()]]
    with evaluation_mode(first), evaluation_mode(Holder(second)), evaluation_mode(first):
        assert not any(module.training for module in [*first.modules(), *second.modules()])
    assert [module.training for module in [*first.modules(), *second.modules()]] == before


class FunctionalDropout(nn.Module):
    """Dropout through ``F.dropout(x, training=self.training)``: no Dropout module, so no module's ``forward`` runs
    when it is trained through :meth:`loss`. Its ``score_t`` in the main thread (the evaluation) waits, at its first
    call, until the trainer thread has taken some steps, so the two overlap."""

    def __init__(self) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.entity = nn.Parameter(torch.randn(E, DIM, generator=generator))
        self.relation = nn.Parameter(torch.randn(R, DIM, generator=generator))
        self.num_entities = E
        self.evaluating, self.trained = threading.Event(), threading.Event()
        self.modes_trained_in: list[bool] = []

    def _overlap(self) -> None:
        if threading.current_thread() is threading.main_thread() and not self.evaluating.is_set():
            self.evaluating.set()
            assert self.trained.wait(timeout=60)

    def score_t(self, hr: torch.Tensor, tails: torch.Tensor | None = None) -> torch.Tensor:
        self._overlap()
        query = nn.functional.dropout(self.entity[hr[:, 0]] * self.relation[hr[:, 1]], 0.5, training=self.training)
        return query @ self.entity.T

    def score_h(self, rt: torch.Tensor, heads: torch.Tensor | None = None) -> torch.Tensor:
        self._overlap()
        query = nn.functional.dropout(self.relation[rt[:, 0]] * self.entity[rt[:, 1]], 0.5, training=self.training)
        return query @ self.entity.T

    def loss(self, triples: torch.Tensor) -> torch.Tensor:
        self.modes_trained_in.append(self.training)
        return nn.functional.cross_entropy(self.score_t(triples[:, :2]), triples[:, 2])


def test_a_trainer_thread_using_functional_dropout_is_told_the_model_is_in_eval_mode() -> None:
    """A thread training the model during an evaluation through a method other than ``forward``, its dropout
    functional: it calls no module, so the forward pre-hook never told it (before: no ModelInUseWarning, its steps
    ran with dropout off). kgeval hooks the parameters' gradients for the evaluation: one ModelInUseWarning naming the
    model, in the trainer's thread; the hooks removed after."""
    import warnings

    from kgeval.exceptions import ModelInUseWarning

    model = FunctionalDropout().train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    errors: list[BaseException] = []

    def train() -> None:
        try:
            assert model.evaluating.wait(timeout=60)
            for _ in range(5):
                optimizer.zero_grad()
                model.loss(GRAPH.triples).backward()
                optimizer.step()
        except BaseException as error:  # re-raised in the main thread
            errors.append(error)
        finally:
            model.trained.set()

    trainer = threading.Thread(target=train)
    trainer.start()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        evaluate(model)
    trainer.join(timeout=60)
    assert not errors, errors
    assert model.modes_trained_in == [False] * 5  # the case: every step ran with dropout off
    told = [warning for warning in caught if issubclass(warning.category, ModelInUseWarning)]
    assert len(told) == 1, [str(warning.message) for warning in caught]
    assert "FunctionalDropout is in evaluation mode" in str(told[0].message)
    assert "computed gradients through its parameters" in str(told[0].message)
    assert model.training and all(not parameter._backward_hooks for parameter in model.parameters())
