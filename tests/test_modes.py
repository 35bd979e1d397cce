"""The training mode of every submodule is exactly as it was after an evaluation -- evaluate, predict_top_k, the
sampled evaluator, the early stopper, the Lightning callback -- also when the evaluation raises: a submodule the
user froze with ``.eval()`` (a pretrained encoder, a BatchNorm) stays frozen, one in training mode stays in it."""

from __future__ import annotations

import types
from typing import Any

import pytest
from torch import nn

from kgeval import EarlyStopper, RankBasedEvaluator, SampledRankBasedEvaluator, predict_top_k
from kgeval._modes import evaluation_mode
from kgeval.models import DistMult
from tests.helpers.graphs import random_graph

E, R = 10, 3
GRAPH = random_graph(5, num_entities=E, num_relations=R, num_triples=20, num_filter=30)


class WithSubmodules(DistMult):
    """A DistMult holding submodules at three depths (they do not change its scores)."""

    def __init__(self) -> None:
        super().__init__(E, R, dim=4, seed=0)
        self.encoder = nn.Sequential(
            nn.Linear(4, 4),
            nn.Dropout(0.5),
            nn.Sequential(nn.BatchNorm1d(4), nn.Sequential(nn.Dropout(0.1), nn.BatchNorm1d(4))),
        )
        self.head = nn.Dropout(0.2)


def mixed_modes() -> WithSubmodules:
    """Training mode at the top, a frozen encoder with one submodule in training mode three levels down, and the
    mirror image: every combination of a parent's and a child's mode occurs."""
    model = WithSubmodules().train()
    model.encoder.eval()
    model.encoder[2][1].train()  # depth 3 in training mode under a frozen parent
    model.encoder[2][1][1].eval()  # depth 4 frozen again
    return model


def modes(model: nn.Module) -> dict[str, bool]:
    return {name: module.training for name, module in model.named_modules()}


def evaluate(model: Any) -> Any:
    return RankBasedEvaluator().evaluate(
        model, GRAPH.triples, additional_filter_triples=GRAPH.filter_triples, use_tqdm=False
    )


def sampled(model: Any) -> Any:
    return SampledRankBasedEvaluator(num_negatives=3, additional_filter_triples=GRAPH.filter_triples).evaluate(
        model, GRAPH.triples
    )


def top_k(model: Any) -> Any:
    return predict_top_k(model, GRAPH.triples[:, :2], k=3)


def stopper(model: Any) -> Any:
    early = EarlyStopper(RankBasedEvaluator(), model, GRAPH.triples, GRAPH.filter_triples, patience=1)
    return early.should_stop(1)


def lightning_callback(model: Any) -> Any:
    lightning = pytest.importorskip("kgeval.integrations.lightning")
    callback = lightning.KGEvalCallback(GRAPH.triples, additional_filter_triples=GRAPH.filter_triples)
    model.log = lambda *args, **kwargs: None  # no trainer to log to: the evaluation is what is tested
    trainer = types.SimpleNamespace(current_epoch=0, global_step=0)
    callback.on_train_epoch_end(trainer, model)
    return callback.history


CALLS = {"evaluate": evaluate, "sampled": sampled, "predict_top_k": top_k, "EarlyStopper": stopper,
         "KGEvalCallback": lightning_callback}  # fmt: skip


@pytest.mark.parametrize("call", list(CALLS))
def test_every_submodules_mode_is_restored(call: str) -> None:
    model = mixed_modes()
    before = modes(model)
    assert len(set(before.values())) == 2
    CALLS[call](model)
    assert modes(model) == before


def test_modes_are_restored_when_the_evaluation_raises() -> None:
    class Failing(WithSubmodules):
        def score_t(self, hr_batch, tails=None):
            assert not self.training and not self.encoder[2][1].training  # evaluated in eval mode throughout
            raise RuntimeError("the model fails")

    model = Failing().train()
    model.encoder.eval()
    model.encoder[2][1].train()
    before = modes(model)
    with pytest.raises(RuntimeError, match="the model fails"):
        RankBasedEvaluator(fast_path=False).evaluate(model, GRAPH.triples, use_tqdm=False)
    assert modes(model) == before


def test_a_class_that_overrides_train_gets_its_call_and_the_flags_are_set_back_after_it() -> None:
    class FreezesItsEncoder(WithSubmodules):
        """Its train() puts the encoder in eval mode whatever it is asked (a common way to freeze a part)."""

        def train(self, mode: bool = True) -> FreezesItsEncoder:
            self.__dict__.setdefault("calls", []).append(mode)
            super().train(mode)
            self.encoder.eval()
            return self

    model = FreezesItsEncoder()
    model.train()
    model.encoder[0].train()  # the user unfroze one layer after train()
    before = modes(model)
    with evaluation_mode(model):
        assert not any(modes(model).values())
    assert model.calls[-1] is True  # the model's own train(True) ran
    assert modes(model) == before


def test_objects_that_are_not_modules_are_never_switched() -> None:
    """``eval`` of an object that is not a torch module may mean anything (run the user's own evaluation, say): kgeval
    calls it with no argument never, with defaults never either, and leaves its flag alone -- and, as the object holds
    no torch module to switch instead, says so."""

    class Plain:
        def __init__(self) -> None:
            self.training = True
            self.calls: list[Any] = []

        def eval(self, data: Any = None) -> None:  # a user's own evaluation routine, with a default
            self.calls.append(data)
            self.training = False

        def train(self, mode: bool = True) -> None:
            self.calls.append(mode)
            self.training = mode

    plain = Plain()
    warned = pytest.warns(UserWarning, match=r"Plain is not a torch module and holds none kgeval can find")
    with warned, evaluation_mode(plain):
        assert plain.training is True
    assert plain.training is True
    assert plain.calls == []


def test_a_module_that_replaced_eval_on_the_instance_is_not_switched() -> None:
    """torch.export's modules replace ``eval`` / ``train`` on the instance with functions that raise (their mode was
    fixed when exported): kgeval leaves them, and every flag, alone."""
    model = WithSubmodules().train()

    def refuse(*args: Any) -> None:
        raise NotImplementedError("Calling eval() is not supported yet.")

    model.eval = refuse  # type: ignore[method-assign]
    model.train = refuse  # type: ignore[method-assign]
    before = modes(model)
    with evaluation_mode(model):
        assert modes(model) == before
    assert modes(model) == before
