"""Tests of kgeval.models.training.train_model and train_epoch."""

from __future__ import annotations

import itertools
import re

import pytest
import torch

import kgeval
from kgeval.datasets import load_shipped_dataset
from kgeval.models import DistMult
from kgeval.models.training import train_epoch, train_model


@pytest.fixture(scope="module")
def nations():
    return load_shipped_dataset("nations")


def _model(dataset, seed: int = 0) -> DistMult:
    return DistMult(dataset.num_entities, dataset.num_relations, dim=16, seed=seed)


@pytest.mark.parametrize("num_negatives", [None, 8])
def test_training_reduces_loss(nations, num_negatives: int | None) -> None:
    model = _model(nations)
    losses = train_model(model, nations.train, num_epochs=5, lr=0.05, num_negatives=num_negatives, use_tqdm=False)
    assert len(losses) == 5
    assert all(loss > 0 for loss in losses)
    assert all(later < earlier for earlier, later in itertools.pairwise(losses))
    assert losses[-1] < 0.9 * losses[0]


@pytest.mark.parametrize("num_negatives", [None, 8])
def test_training_is_reproducible(nations, num_negatives: int | None) -> None:
    runs = []
    for _ in range(2):
        model = _model(nations, seed=5)
        losses = train_model(model, nations.train, num_epochs=2, num_negatives=num_negatives, seed=7, use_tqdm=False)
        runs.append((losses, [p.detach().clone() for p in model.parameters()]))
    (losses_a, params_a), (losses_b, params_b) = runs
    assert losses_a == losses_b
    assert all(torch.equal(a, b) for a, b in zip(params_a, params_b, strict=True))
    other = _model(nations, seed=5)
    assert train_model(other, nations.train, num_epochs=2, num_negatives=num_negatives, seed=8, use_tqdm=False) != (
        losses_a
    )


def test_first_epoch_loss_of_untrained_model_is_near_log_num_entities(nations) -> None:
    # Xavier-initialised DistMult scores are close to 0, so the softmax is close to uniform over E entities.
    model = DistMult(nations.num_entities, nations.num_relations, dim=16, seed=0)
    loss = train_model(model, nations.train, num_epochs=1, lr=1e-6, use_tqdm=False)[0]
    assert loss == pytest.approx(float(torch.log(torch.tensor(nations.num_entities))), rel=0.01)


def test_zero_epochs_leave_model_unchanged_and_mode_is_restored(nations) -> None:
    model = _model(nations)
    before = [p.detach().clone() for p in model.parameters()]
    model.eval()
    assert train_model(model, nations.train, num_epochs=0, use_tqdm=False) == []
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    train_model(model, nations.train, num_epochs=1, use_tqdm=False)
    assert not model.training
    model.train()
    train_model(model, nations.train, num_epochs=1, use_tqdm=False)
    assert model.training


def test_distmult_on_umls_reaches_non_random_filtered_mrr() -> None:
    evaluator_class = getattr(kgeval, "RankBasedEvaluator", None)
    if evaluator_class is None:
        pytest.skip("kgeval.RankBasedEvaluator is not available yet")
    umls = load_shipped_dataset("umls")
    model = DistMult(umls.num_entities, umls.num_relations, dim=64, seed=0)
    train_model(model, umls.train, num_epochs=5, seed=0, use_tqdm=False)
    results = evaluator_class(filtered=True).evaluate(
        model, umls.test, additional_filter_triples=[umls.train, umls.valid], use_tqdm=False
    )
    assert results.get_metric("both.realistic.inverse_harmonic_mean_rank") > 0.3


@pytest.mark.parametrize(
    ("triples", "kwargs", "error", "message"),
    [
        (
            torch.zeros(3, dtype=torch.long),
            {},
            ValueError,
            "the training triples must be a tensor of shape (n, 3), got (3,)",
        ),
        ([[0, 0, 0]], {}, ValueError, "the training triples must be a tensor of shape (n, 3), got list"),
        (torch.zeros((1, 3)), {}, TypeError, "triples must have dtype torch.int64, got torch.float32"),
        (torch.zeros((0, 3), dtype=torch.long), {}, ValueError, "triples is empty: nothing to train on"),
        (torch.tensor([[0, 0, 4]]), {}, ValueError, "triples has tail ids in [4, 4], outside [0, 3]"),
        (torch.tensor([[-2, 0, 0]]), {}, ValueError, "triples has head ids in [-2, -2], outside [0, 3]"),
        (torch.tensor([[0, 2, 0]]), {}, ValueError, "triples has relation ids in [2, 2], outside [0, 1]"),
        (None, {"num_epochs": -1}, ValueError, "num_epochs must be an int >= 0, got -1"),
        (None, {"batch_size": 0}, ValueError, "batch_size must be an int >= 1, got 0"),
        (None, {"batch_size": 2.0}, ValueError, "batch_size must be an int >= 1, got 2.0"),
        (None, {"lr": 0.0}, ValueError, "lr must be > 0, got 0.0"),
        (None, {"num_negatives": 0}, ValueError, "num_negatives must be None or an int >= 1, got 0"),
    ],
)
def test_invalid_arguments(triples, kwargs: dict, error: type[Exception], message: str) -> None:
    model = DistMult(4, 2, dim=3, seed=0)
    triples = torch.tensor([[0, 1, 2]]) if triples is None else triples
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        train_model(model, triples, use_tqdm=False, **kwargs)


@pytest.mark.parametrize("num_negatives", [None, 8])
def test_train_epoch_in_a_hand_written_loop_equals_train_model(nations, num_negatives: int | None) -> None:
    reference = _model(nations)
    expected = train_model(reference, nations.train, num_epochs=2, lr=0.05, num_negatives=num_negatives, use_tqdm=False)
    model = _model(nations)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    generator = torch.Generator().manual_seed(0)
    losses = [train_epoch(model, nations.train, optimizer, num_negatives=num_negatives, generator=generator)]
    losses.append(train_epoch(model, nations.train, optimizer, num_negatives=num_negatives, generator=generator))
    assert losses == expected
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), reference.parameters(), strict=True))


def test_train_epoch_restores_the_mode(nations) -> None:
    model = _model(nations).eval()
    train_epoch(model, nations.train[:64], torch.optim.SGD(model.parameters(), lr=0.1))
    assert not model.training


def test_train_epoch_raises_for_a_bad_batch_size(nations) -> None:
    model = _model(nations)
    with pytest.raises(ValueError, match=r"^batch_size must be an int >= 1, got 0$"):
        train_epoch(model, nations.train, torch.optim.SGD(model.parameters(), lr=0.1), batch_size=0)


def test_the_progress_bar_moves_with_every_batch(nations, monkeypatch: pytest.MonkeyPatch) -> None:
    """One bar over every batch of every epoch (a long epoch moves it), described by its epoch, closed at the end."""
    import kgeval.models.training as training

    bars = []

    class Recorder:
        def __init__(self, *, total: int, **kwargs) -> None:
            self.total, self.n, self.descriptions, self.closed = total, 0, [], False
            bars.append(self)

        def update(self, n: int = 1) -> None:
            self.n += n

        def set_description(self, text: str) -> None:
            self.descriptions.append((text, self.n))

        def set_postfix(self, **kwargs) -> None:
            pass

        def close(self) -> None:
            self.closed = True

    monkeypatch.setattr(training, "tqdm", Recorder)
    batches = -(-len(nations.train) // 100)  # ceil: the last batch is partial
    train_model(_model(nations), nations.train, num_epochs=3, batch_size=100)
    (bar,) = bars
    assert bar.total == bar.n == 3 * batches and bar.closed
    assert bar.descriptions == [(f"Training epoch {epoch + 1}/3", epoch * batches) for epoch in range(3)]
