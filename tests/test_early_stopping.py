"""EarlyStopper (kgeval/early_stopping.py) with a model whose quality is scripted per epoch.

The scripted model scores (h, r, t) as ``noise[h, r, t] + quality * [(h, r, t) is a validation triple]``: raising
``quality`` lifts only the true answers (other validation triples are filtered), so MRR rises and MR falls with
it. Each epoch sets ``quality`` to one of a few levels and writes a fresh random ``tag`` parameter, so two epochs
of equal quality still have different weights and "restored bit for bit" is a real check. The metric value of
each level comes from the brute-force reference, never from kgeval.
"""

from __future__ import annotations

import itertools
import math
import re
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from kgeval import EarlyStopper, RankBasedEvaluator
from kgeval.metrics import iter_metrics
from tests.helpers.graphs import quantised_table, random_graph
from tests.helpers.reference import reference_metrics, reference_ranks

KS = (1, 3, 10)
LEVELS = (-5.0, -0.5, 0.5, 1.5, 6.0)
NUM_ENTITIES, NUM_RELATIONS = 15, 3


class ScriptedModel(nn.Module):
    """Scores ``noise + quality * bonus``; ``quality`` and ``tag`` are the weights the stopper saves."""

    def __init__(self, noise: torch.Tensor, bonus: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("noise", noise)
        self.register_buffer("bonus", bonus)
        self.quality = nn.Parameter(torch.zeros(()))
        self.tag = nn.Parameter(torch.zeros(8))
        self.num_entities = noise.shape[0]

    def set_epoch(self, level: int, epoch: int) -> None:
        with torch.no_grad():
            self.quality.fill_(LEVELS[level])
            self.tag.copy_(torch.randn(8, generator=torch.Generator().manual_seed(1000 + epoch)))

    def table(self) -> torch.Tensor:
        return self.noise + self.quality * self.bonus

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
        return self.table()[hr_batch[:, 0], hr_batch[:, 1], :]

    def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor:
        return self.table().permute(1, 2, 0)[rt_batch[:, 0], rt_batch[:, 1], :]


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    graph = random_graph(rng, NUM_ENTITIES, NUM_RELATIONS, 30, 40, duplicate_fraction=0.0)
    noise = quantised_table(rng, NUM_ENTITIES, NUM_RELATIONS, levels=3)
    bonus = torch.zeros_like(noise)
    valid = graph.triples
    bonus[valid[:, 0], valid[:, 1], valid[:, 2]] = 1.0
    train = graph.filter_triples[0]
    values = {}
    for level, quality in enumerate(LEVELS):
        metrics = reference_metrics(noise + quality * bonus, valid, [train], KS)
        values[level] = {
            "mrr": metrics["both", "realistic", "inverse_harmonic_mean_rank"],
            "mr": metrics["both", "realistic", "arithmetic_mean_rank"],
        }
    return {"noise": noise, "bonus": bonus, "valid": valid, "train": train, "values": values}


def _stopper(problem, model=None, **kwargs):
    model = model if model is not None else ScriptedModel(problem["noise"], problem["bonus"])
    evaluator = RankBasedEvaluator(ks=KS)
    return model, EarlyStopper(evaluator, model, problem["valid"], [problem["train"]], **kwargs)


def _run(model, stopper, script):
    """Train along the script (one level per epoch, from epoch 1); returns the stop epoch and weight snapshots."""
    snapshots = {}
    for epoch, level in enumerate(script, start=1):
        model.set_epoch(level, epoch)
        snapshots[epoch] = {name: value.clone() for name, value in model.state_dict().items()}
        if stopper.should_stop(epoch):
            return epoch, snapshots
    return None, snapshots


def _same_weights(model, snapshot) -> bool:
    state = model.state_dict()
    return state.keys() == snapshot.keys() and all(torch.equal(state[name], snapshot[name]) for name in state)


def test_the_scripted_levels_are_strictly_ordered(problem):
    mrr = [problem["values"][level]["mrr"] for level in range(len(LEVELS))]
    mr = [problem["values"][level]["mr"] for level in range(len(LEVELS))]
    assert all(a < b for a, b in itertools.pairwise(mrr))
    assert all(a > b for a, b in itertools.pairwise(mr))


# script: levels per epoch. Evaluations 1..7; best at epoch 4 (level 3); epoch 5 only ties it (no improvement),
# epoch 6 is worse: two evaluations without improvement -> stop at epoch 6, restore epoch 4.
SCRIPT = [0, 2, 1, 3, 3, 2, 4]


@pytest.mark.parametrize("metric", ["mrr", "mr"])
def test_stops_at_the_right_epoch_and_restores_the_best_weights_bit_for_bit(problem, metric):
    model, stopper = _stopper(problem, metric=metric, patience=2)
    stop_epoch, snapshots = _run(model, stopper, SCRIPT)
    assert stop_epoch == 6
    assert stopper.stopped
    assert stopper.best_epoch == 4
    assert stopper.best_metric == pytest.approx(problem["values"][3][metric], rel=1e-12)
    assert _same_weights(model, snapshots[4])
    assert not _same_weights(model, snapshots[5])  # same quality, other tag: the check is not vacuous


def test_history_records_every_evaluation_with_reference_values(problem):
    model, stopper = _stopper(problem)
    _run(model, stopper, SCRIPT)
    assert [e.epoch for e in stopper.history] == [1, 2, 3, 4, 5, 6]
    assert [e.improved for e in stopper.history] == [True, True, False, True, False, False]
    for evaluation, level in zip(stopper.history, SCRIPT, strict=False):
        assert evaluation.value == pytest.approx(problem["values"][level]["mrr"], rel=1e-12)
        assert evaluation.results.get_metric("mr") == pytest.approx(problem["values"][level]["mr"], rel=1e-12)
        assert evaluation.results.records is None
    assert stopper.best_results.records is not None


def test_direction_is_inferred_from_the_metric_metadata(problem):
    assert _stopper(problem, metric="mrr")[1].larger_is_better is True
    assert _stopper(problem, metric="tail.best.mr")[1].larger_is_better is False
    for info in iter_metrics():
        if info.increasing is not None:
            key = info.key(KS[0])
            assert _stopper(problem, metric=key)[1].larger_is_better is info.increasing, key


def test_an_explicit_direction_overrides_the_metadata(problem):
    """Treating MR as larger-is-better (PyKEEN's silent mistake) keeps the worst model: epoch 1, stop at 3."""
    model, stopper = _stopper(problem, metric="mr", larger_is_better=True, patience=2)
    stop_epoch, snapshots = _run(model, stopper, SCRIPT)
    assert (stop_epoch, stopper.best_epoch) == (3, 1)
    assert _same_weights(model, snapshots[1])


@pytest.mark.parametrize(("patience", "stop_epoch"), [(1, 2), (3, 4), (5, 6)])
def test_patience_counts_evaluations_without_improvement(problem, patience, stop_epoch):
    model, stopper = _stopper(problem, patience=patience)
    script = [3, 0, 1, 2, 2, 2, 2, 2]
    assert _run(model, stopper, script)[0] == stop_epoch
    assert stopper.best_epoch == 1
    assert stopper.remaining_patience == 0


def test_frequency_evaluates_only_at_multiples_and_patience_counts_evaluations(problem):
    # odd epochs are the best of all (level 4) but are never evaluated; even epochs: 0, 1, 0, 0
    script = [4, 0, 4, 1, 4, 0, 4, 0, 4, 4]
    model, stopper = _stopper(problem, frequency=2, patience=2)
    stop_epoch, snapshots = _run(model, stopper, script)
    assert stop_epoch == 8
    assert [e.epoch for e in stopper.history] == [2, 4, 6, 8]
    assert stopper.best_epoch == 4
    assert _same_weights(model, snapshots[4])


@pytest.mark.parametrize("metric", ["mrr", "mr"])
@pytest.mark.parametrize(("factor", "stop_epoch", "best_epoch"), [(1.01, 3, 1), (0.99, 4, 2)])
def test_relative_delta_is_the_minimal_relative_improvement(problem, metric, factor, stop_epoch, best_epoch):
    before, after = problem["values"][1][metric], problem["values"][2][metric]
    relative_change = abs(after - before) / abs(before)
    model, stopper = _stopper(problem, metric=metric, relative_delta=factor * relative_change, patience=2)
    assert _run(model, stopper, [1, 2, 2, 2, 2])[0] == stop_epoch
    assert stopper.best_epoch == best_epoch


def test_no_stop_while_improving(problem):
    model, stopper = _stopper(problem, patience=1)
    assert _run(model, stopper, [0, 1, 2, 3, 4])[0] is None
    assert stopper.best_epoch == 5
    assert not stopper.stopped


def test_after_stopping_should_stop_stays_true_without_evaluating(problem):
    model, stopper = _stopper(problem, patience=1)
    _run(model, stopper, [2, 1])
    assert stopper.should_stop(3) is True
    assert len(stopper.history) == 2


def test_nan_never_improves(problem):
    _, stopper = _stopper(problem)
    assert stopper.is_improvement(math.nan) is False
    assert stopper.is_improvement(0.0) is True  # nothing to beat yet


def test_checkpoint_path_restores_the_best_weights_bit_for_bit(problem, tmp_path):
    path = tmp_path / "best.pt"
    model, stopper = _stopper(problem, checkpoint_path=path)
    stop_epoch, snapshots = _run(model, stopper, SCRIPT)
    assert stop_epoch == 6
    assert path.is_file()
    assert _same_weights(model, snapshots[4])


def test_a_failed_save_keeps_the_previous_best_weights_and_state(problem, tmp_path, monkeypatch):
    """Disk full in the middle of a save: the previous best file survives whole, best_epoch stays where its weights
    are, and no temporary file is left behind."""
    path = tmp_path / "best.pt"
    model, stopper = _stopper(problem, checkpoint_path=path, patience=5)
    _, snapshots = _run(model, stopper, [1])  # epoch 1 is the best so far, saved
    real_save = torch.save

    def save_then_fail(obj, file, *args, **kwargs):
        real_save(obj, file, *args, **kwargs)
        file.truncate(10)  # half-written
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", save_then_fail)
    model.set_epoch(3, 2)
    with pytest.raises(OSError, match="No space left"):
        stopper.should_stop(2)  # epoch 2 improves, its save fails
    monkeypatch.setattr(torch, "save", real_save)
    assert stopper.best_epoch == 1
    assert sorted(item.name for item in tmp_path.iterdir()) == ["best.pt"]
    stopper.restore_best_weights()
    assert _same_weights(model, snapshots[1])


@pytest.mark.parametrize("where", ["missing folder", "a folder"])
def test_an_unusable_checkpoint_path_fails_at_construction(problem, tmp_path, where):
    path = tmp_path / "no" / "such" / "best.pt" if where == "missing folder" else tmp_path
    with pytest.raises(ValueError, match="checkpoint_path"):
        _stopper(problem, checkpoint_path=path)


def test_restore_best_weights_on_demand(problem):
    model, stopper = _stopper(problem, patience=3)
    _, snapshots = _run(model, stopper, [1, 3, 2])
    assert _same_weights(model, snapshots[3])
    stopper.restore_best_weights()
    assert _same_weights(model, snapshots[2])


def test_subset_ranks_equal_the_full_evaluation_ranks_of_the_sampled_triples(problem):
    model, stopper = _stopper(problem, subset=10, seed=3)
    valid = problem["valid"]
    assert stopper.triples.shape == (10, 3)
    rows = [valid.tolist().index(row) for row in stopper.triples.tolist()]
    assert rows == sorted(rows)
    model.set_epoch(2, 1)
    stopper.should_stop(1)
    frame = stopper.best_results.ranks_df()
    full = reference_ranks(model.table().detach(), valid, [problem["train"]])
    for side in ("head", "tail"):
        part = frame[frame.side == side].sort_values("task_index")
        np.testing.assert_array_equal(part.realistic.to_numpy(), full[side]["realistic"][rows])
        np.testing.assert_array_equal(part.num_candidates.to_numpy(), full[side]["num_candidates"][rows])


def test_subset_is_fixed_by_the_seed(problem):
    first = _stopper(problem, subset=10, seed=3)[1].triples
    assert torch.equal(first, _stopper(problem, subset=10, seed=3)[1].triples)
    assert not torch.equal(first, _stopper(problem, subset=10, seed=4)[1].triples)
    assert torch.equal(_stopper(problem, subset=1000)[1].triples, problem["valid"])


def test_works_with_a_trained_distmult_and_the_evaluator_restores_training_mode():
    from kgeval.datasets import load_shipped_dataset
    from kgeval.models import DistMult
    from kgeval.models.training import train_epoch

    data = load_shipped_dataset("nations")
    model = DistMult(data.num_entities, data.num_relations, dim=8, seed=0)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    stopper = EarlyStopper(RankBasedEvaluator(ks=(1, 10)), model, **data.evaluation_kwargs("valid"), patience=1)
    generator = torch.Generator().manual_seed(0)
    for epoch in range(1, 4):
        train_epoch(model, data.train, optimizer, generator=generator)
        model.train()
        if stopper.should_stop(epoch):
            break
        assert model.training
    assert stopper.best_epoch is not None
    assert 0 < stopper.best_metric <= 1


# -- errors ------------------------------------------------------------------------------------------------------
def raises_exactly(error, message):
    return pytest.raises(error, match=f"^{re.escape(message)}$")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"patience": 0}, ValueError, "patience must be a positive integer, got 0"),
        ({"frequency": 1.5}, ValueError, "frequency must be a positive integer, got 1.5"),
        ({"subset": 0}, ValueError, "subset must be a positive integer, got 0"),
        ({"relative_delta": -0.1}, ValueError, "relative_delta must be a finite number >= 0, got -0.1"),
        ({"relative_delta": math.nan}, ValueError, "relative_delta must be a finite number >= 0, got nan"),
        ({"larger_is_better": "yes"}, TypeError, "larger_is_better must be a bool or None, got 'yes'"),
        (
            {"metric": "count"},
            ValueError,
            "metric 'both.realistic.count' has no direction (it is not a quality measure); pass larger_is_better",
        ),
        (
            {"metric": "hits@5"},
            ValueError,
            "metric 'hits@5' (both.realistic.hits_at_5) is not reported by the evaluator "
            "(ks=(1, 3, 10), keep_records=True)",
        ),
    ],
)
def test_invalid_arguments(problem, kwargs, error, message):
    with raises_exactly(error, message):
        _stopper(problem, **kwargs)


def test_unknown_metric(problem):
    with pytest.raises(KeyError, match="unknown metric 'mrrr'; did you mean"):
        _stopper(problem, metric="mrrr")


def test_mapped_triples_must_be_a_tensor(problem):
    with raises_exactly(TypeError, "mapped_triples must be a torch.Tensor of shape (n, 3), got list"):
        EarlyStopper(RankBasedEvaluator(), ScriptedModel(problem["noise"], problem["bonus"]), [[0, 0, 1]])


def test_epochs_must_increase(problem):
    model, stopper = _stopper(problem)
    _run(model, stopper, [1, 2])
    with raises_exactly(ValueError, "epoch must increase from call to call: got 2 after 2"):
        stopper.should_stop(2)


@pytest.mark.parametrize("epoch", [-1, 0])
def test_epochs_count_from_one(problem, epoch: int):
    """Epoch 0 was accepted and evaluated (0 is a multiple of every frequency): a 0-based loop then evaluated once
    more than PyKEEN's stopper (epoch > 0), and its patience ran out an evaluation earlier."""
    message = ("epoch must be an int >= 1 (epochs are counted from 1, as in PyKEEN: in a loop over range(n), pass "
               f"epoch + 1), got {epoch}")  # fmt: skip
    with raises_exactly(ValueError, message):
        _stopper(problem)[1].should_stop(epoch)


def test_restore_before_any_improvement(problem):
    with raises_exactly(ValueError, "there are no best weights yet: no evaluation has improved the metric"):
        _stopper(problem)[1].restore_best_weights()


# -- what scoring reads, restored (issue 58) ----------------------------------------------------------------------
class LooseQualityModel(ScriptedModel):
    """``quality`` outside the ``state_dict``: a non-persistent buffer written in place, or a plain tensor attribute
    replaced at every epoch (``tag`` stays a parameter)."""

    def __init__(self, noise: torch.Tensor, bonus: torch.Tensor, where: str) -> None:
        super().__init__(noise, bonus)
        del self.quality
        self.where = where
        if where == "buffer":
            self.register_buffer("quality", torch.zeros(()), persistent=False)
        else:
            self.quality = torch.zeros(())

    def set_epoch(self, level: int, epoch: int) -> None:
        with torch.no_grad():
            self.tag.copy_(torch.randn(8, generator=torch.Generator().manual_seed(1000 + epoch)))
            if self.where == "buffer":
                self.quality.fill_(LEVELS[level])
            else:
                self.quality = torch.tensor(LEVELS[level])


def _fresh_mrr(model, problem) -> float:
    results = RankBasedEvaluator(ks=KS).evaluate(
        model, problem["valid"], additional_filter_triples=[problem["train"]], use_tqdm=False
    )
    return float(results.get_metric("mrr"))


@pytest.mark.parametrize("where", ["buffer", "attribute"])
@pytest.mark.parametrize("in_file", [False, True])
def test_a_quality_outside_the_state_dict_is_restored(problem, tmp_path, where, in_file):
    """Before, only the state_dict was restored: the model kept the quality of the epoch it stopped at (level 2)
    while the stopper reported the best one's (level 3)."""
    model = LooseQualityModel(problem["noise"], problem["bonus"], where)
    path = tmp_path / "best.pt" if in_file else None
    _, stopper = _stopper(problem, model=model, patience=2, checkpoint_path=path)
    buffer = model.quality
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="kgeval: EarlyStopper restored")
        stop_epoch, _ = _run(model, stopper, SCRIPT)
    assert (stop_epoch, stopper.best_epoch) == (6, 4)
    assert float(model.quality) == LEVELS[3]
    assert _fresh_mrr(model, problem) == stopper.best_metric
    assert stopper.best_metric == pytest.approx(problem["values"][3]["mrr"], rel=1e-12)
    if where == "buffer":
        assert model.quality is buffer  # restored in place


class CachedDistMult(nn.Module):
    """A DistMult trained through its parameters and scored from a copy of its entity table refreshed after each
    epoch: a non-persistent buffer written in place, or a plain tensor attribute replaced."""

    def __init__(self, num_entities: int, num_relations: int, where: str, dim: int = 8) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.num_entities, self.where = num_entities, where
        self.entity = nn.Parameter(0.3 * torch.randn(num_entities, dim, generator=generator))
        self.relation = nn.Parameter(0.3 * torch.randn(num_relations, dim, generator=generator))
        if where == "buffer":
            self.register_buffer("cache", self.entity.detach().clone(), persistent=False)
        else:
            self.cache = self.entity.detach().clone()

    def refresh(self) -> None:
        with torch.no_grad():
            if self.where == "buffer":
                self.cache.copy_(self.entity)
            else:
                self.cache = self.entity.detach().clone()

    def training_scores(self, hr_batch: torch.Tensor) -> torch.Tensor:
        return (self.entity[hr_batch[:, 0]] * self.relation[hr_batch[:, 1]]) @ self.entity.T

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
        return (self.cache[hr_batch[:, 0]] * self.relation[hr_batch[:, 1]]) @ self.cache.T

    def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor:
        return (self.relation[rt_batch[:, 0]] * self.cache[rt_batch[:, 1]]) @ self.cache.T


def _train_until_stopped(model, stopper, train: torch.Tensor, epochs: int) -> int | None:
    """1-N cross-entropy with Adam (lr 0.5), a seeded batch order, the cache refreshed after each epoch."""
    optimizer = torch.optim.Adam(model.parameters(), lr=0.5)
    generator = torch.Generator().manual_seed(1)
    for epoch in range(1, epochs + 1):
        for rows in torch.randperm(len(train), generator=generator).split(256):
            batch = train[rows]
            loss = nn.functional.cross_entropy(model.training_scores(batch[:, :2]), batch[:, 2])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.refresh()
        if stopper.should_stop(epoch):
            return epoch
    return None


@pytest.mark.parametrize("where", ["buffer", "attribute"])
def test_a_trained_cache_outside_the_state_dict_scores_the_best_metric_after_the_stop(where):
    """Nations: the best MRR 0.4698 at epoch 3, stopped at 5. Before, the restored parameters were scored through
    the cache of epoch 5: a fresh evaluation gave MRR 0.4681."""
    from kgeval.datasets import load_shipped_dataset

    data = load_shipped_dataset("nations")
    model = CachedDistMult(data.num_entities, data.num_relations, where)
    evaluator = RankBasedEvaluator()
    stopper = EarlyStopper(evaluator, model, **data.evaluation_kwargs("valid"), patience=2)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="kgeval: EarlyStopper restored")
        stop_epoch = _train_until_stopped(model, stopper, data.train, epochs=30)
    assert (stop_epoch, stopper.best_epoch) == (5, 3)
    assert stopper.history[-1].value != stopper.best_metric  # the check is not vacuous
    fresh = evaluator.evaluate(model, **data.evaluation_kwargs("valid"), use_tqdm=False)
    assert fresh["mrr"] == stopper.best_metric
    assert torch.equal(model.cache, model.entity.detach())  # the cache of the best epoch: its table's copy


class Holder:
    """A scorer that is not a torch module: its network in an attribute, and a plain tensor of its own (a
    per-entity bias, set after each epoch) that scoring reads."""

    def __init__(self, network: nn.Module, num_entities: int) -> None:
        self.network = network
        self.num_entities = num_entities
        self.bias = torch.zeros(num_entities)

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
        return self.network.score_t(hr_batch) + self.bias

    def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor:
        return self.network.score_h(rt_batch) + self.bias


def test_a_plain_object_holding_a_module_is_restored():
    """Before, EarlyStopper took it and raised AttributeError ('Holder' object has no attribute 'state_dict') at
    its first improvement, after an epoch of training."""
    from kgeval.datasets import load_shipped_dataset
    from kgeval.models import DistMult
    from kgeval.models.training import train_epoch

    data = load_shipped_dataset("nations")
    holder = Holder(DistMult(data.num_entities, data.num_relations, dim=8, seed=0), data.num_entities)
    optimizer = torch.optim.Adam(holder.network.parameters(), lr=0.1)
    evaluator = RankBasedEvaluator()
    stopper = EarlyStopper(evaluator, holder, **data.evaluation_kwargs("valid"), patience=50)
    generator = torch.Generator().manual_seed(0)
    weight = holder.network.entity_embeddings.weight
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="kgeval: EarlyStopper restored")
        for epoch in range(1, 6):
            train_epoch(holder.network, data.train, optimizer, generator=generator)
            holder.bias = torch.randn(data.num_entities, generator=generator)
            stopper.should_stop(epoch)
        assert stopper.best_epoch != 5  # the restore undoes something
        stopper.restore_best_weights()
    fresh = evaluator.evaluate(holder, **data.evaluation_kwargs("valid"), use_tqdm=False)
    assert fresh["mrr"] == stopper.best_metric
    assert holder.network.entity_embeddings.weight is weight  # in place: the optimizer still trains it


class NumpyScorer:
    """Scores from a numpy table: no tensor kgeval could save."""

    def __init__(self, table: np.ndarray) -> None:
        self.table = table
        self.num_entities = table.shape[0]

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(self.table[hr_batch[:, 0].numpy(), hr_batch[:, 1].numpy()])

    def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(self.table.transpose(1, 2, 0)[rt_batch[:, 0].numpy(), rt_batch[:, 1].numpy()])


class NumpyModule(nn.Module, NumpyScorer):
    def __init__(self, table: np.ndarray) -> None:
        nn.Module.__init__(self)
        NumpyScorer.__init__(self, table)


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        (NumpyScorer, "it is not a torch module, and holds no torch module or tensor in its attributes"),
        (NumpyModule, "it has no parameter, buffer or tensor attribute"),
    ],
)
def test_a_model_without_tensors_is_refused_at_construction(problem, kind, reason):
    """Before, NumpyScorer was taken and failed at its first improvement; NumpyModule was taken and 'restored' to
    whatever its table held at the end."""
    model = kind(problem["noise"].numpy().copy())
    message = f"EarlyStopper cannot keep the best weights of {kind.__name__}: {reason}"
    with pytest.raises(TypeError, match=re.escape(message)) as raised:
        _stopper(problem, model=model)
    assert "Pass the torch module that holds the weights" in str(raised.value)


class ListedQualityModel(ScriptedModel):
    """``quality`` in a list: state kgeval does not save, which the check after a restore sees."""

    def __init__(self, noise: torch.Tensor, bonus: torch.Tensor) -> None:
        super().__init__(noise, bonus)
        del self.quality
        self.held = [torch.zeros(())]

    def set_epoch(self, level: int, epoch: int) -> None:
        with torch.no_grad():
            self.tag.copy_(torch.randn(8, generator=torch.Generator().manual_seed(1000 + epoch)))
        self.held[0] = torch.tensor(LEVELS[level])

    def table(self) -> torch.Tensor:
        return self.noise + self.held[0] * self.bonus


def test_a_restore_that_does_not_score_as_the_best_model_did_is_warned(problem):
    model = ListedQualityModel(problem["noise"], problem["bonus"])
    _, stopper = _stopper(problem, model=model, patience=2)
    message = r"kgeval: EarlyStopper restored the best weights of ListedQualityModel \(epoch 4, both.realistic."
    with pytest.warns(UserWarning, match=message) as record:
        assert _run(model, stopper, SCRIPT)[0] == 6
    text = str(next(item.message for item in record if "EarlyStopper restored" in str(item.message)))
    assert "does not score as it did then" in text
    assert "holds state kgeval did not save" in text
    assert _fresh_mrr(model, problem) != stopper.best_metric  # what the warning is about
