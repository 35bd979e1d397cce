"""Scorers that are not torch modules and reach their network in ways kgeval did not look (docs/models.md,
"Contexts and model forms"): bound methods (``SimpleNamespace(score_t=net.score_t)``), ``functools.partial``, a
closure, a lambda over a module-level network, a class attribute, an Enum- or tuple-keyed dict, a set, a
frozenset, ``__slots__``, a weak reference. Each network has Dropout(0.5): left in training mode, its scores are
random (before: most ranks differed from the eval-mode scores, two runs disagreed and the caller's RNG advanced).

Every expectation is the brute-force reference over the network's own eval-mode scores, computed outside kgeval;
where kgeval cannot look (a callable object of a C type, a closure deeper than its search), it says so.
"""

from __future__ import annotations

import enum
import functools
import types
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import pytest
import torch

from tests.helpers.ranks import assert_same_ranks
from tests.integrations.test_contexts import differing_ranks, expected_ranks
from tests.integrations.test_contexts_models import GRAPH, DropoutNet, E, R
from tests.integrations.test_contexts_models import evaluate as evaluate_quietly


class Side(enum.Enum):
    TAIL = "tail"
    HEAD = "head"


def score_with(net: DropoutNet, side: str, batch: torch.Tensor) -> torch.Tensor:
    """A module-level scoring function taking its network as an argument (what a partial binds)."""
    return net.score_t(batch) if side == "tail" else net.score_h(batch)


def score_by_keywords(batch: torch.Tensor, *, net: DropoutNet, side: str) -> torch.Tensor:
    """The same, the network a keyword."""
    return score_with(net, side, batch)


#: a module-level network, named by a lambda's code (not a closure cell): replaced per test
GLOBAL_NET = DropoutNet()


class ClassHeld:
    """The network is a class attribute (set per test)."""

    net: DropoutNet
    num_entities = E

    def score_t(self, hr: torch.Tensor) -> torch.Tensor:
        return type(self).net.score_t(hr)

    def score_h(self, rt: torch.Tensor) -> torch.Tensor:
        return type(self).net.score_h(rt)


class Slotted:
    """The network is held in ``__slots__`` (no instance dictionary)."""

    __slots__ = ("net", "num_entities")

    def __init__(self, net: DropoutNet) -> None:
        self.net, self.num_entities = net, E

    def score_t(self, hr: torch.Tensor) -> torch.Tensor:
        return self.net.score_t(hr)

    def score_h(self, rt: torch.Tensor) -> torch.Tensor:
        return self.net.score_h(rt)


class InContainer:
    """The network is an item of ``holder`` (a dict with any hashable key, a set, a frozenset)."""

    def __init__(self, holder: Any) -> None:
        self.holder, self.num_entities = holder, E

    def network(self) -> DropoutNet:
        values = self.holder.values() if isinstance(self.holder, dict) else self.holder
        return next(iter(values))

    def score_t(self, hr: torch.Tensor) -> torch.Tensor:
        return self.network().score_t(hr)

    def score_h(self, rt: torch.Tensor) -> torch.Tensor:
        return self.network().score_h(rt)


def closure_scorer(net: DropoutNet) -> Any:
    def make(side: str) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda batch: score_with(net, side, batch)

    return types.SimpleNamespace(score_t=make("tail"), score_h=make("head"), num_entities=E)


def global_scorer(net: DropoutNet) -> Any:
    global GLOBAL_NET
    GLOBAL_NET = net
    return types.SimpleNamespace(score_t=lambda hr: GLOBAL_NET.score_t(hr), score_h=lambda rt: GLOBAL_NET.score_h(rt),
                                 num_entities=E)  # fmt: skip


def class_scorer(net: DropoutNet) -> Any:
    ClassHeld.net = net
    return ClassHeld()


def weak_scorer(net: DropoutNet) -> Any:
    """Scoring through a weak reference to the network (the closure holds the reference only)."""
    reference = weakref.ref(net)
    return types.SimpleNamespace(score_t=lambda hr: reference().score_t(hr), score_h=lambda rt: reference().score_h(rt),
                                 num_entities=E)  # type: ignore[union-attr]  # fmt: skip


#: form -> the scorer holding ``net`` that way
FORMS: dict[str, Callable[[DropoutNet], Any]] = {
    "bound methods": lambda net: types.SimpleNamespace(score_t=net.score_t, score_h=net.score_h, num_entities=E),
    "partial args": lambda net: types.SimpleNamespace(
        score_t=functools.partial(score_with, net, "tail"),
        score_h=functools.partial(score_with, net, "head"),
        num_entities=E,
    ),
    "partial keywords": lambda net: types.SimpleNamespace(
        score_t=functools.partial(score_by_keywords, net=net, side="tail"),
        score_h=functools.partial(score_by_keywords, net=net, side="head"),
        num_entities=E,
    ),
    "closure": closure_scorer,
    "global": global_scorer,
    "class attribute": class_scorer,
    "Enum-keyed dict": lambda net: InContainer({Side.TAIL: net}),
    "tuple-keyed dict": lambda net: InContainer({("encoder", 0): net}),
    "set": lambda net: InContainer({net}),
    "frozenset": lambda net: InContainer(frozenset([net])),
    "__slots__": Slotted,
    "weak reference": weak_scorer,
}


def evaluate(scorer: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no "may hold modules it cannot switch" for a form it sees
        return evaluate_quietly(scorer, GRAPH.triples, GRAPH.filter_triples)


@pytest.mark.parametrize("form", list(FORMS))
def test_a_scorer_reaching_its_network_this_way_is_scored_in_eval_mode(form: str) -> None:
    """The eval-mode brute force over the network's own scores, twice the same, the caller's RNG untouched (dropout
    on draws from it), every training flag restored (the network in training mode, its frozen part frozen)."""
    net = DropoutNet().train()
    frozen = torch.nn.Dropout(0.5).eval()
    net.frozen = frozen
    scorer = FORMS[form](net)
    modes = [module.training for module in net.modules()]
    rng = torch.get_rng_state()
    first = evaluate(scorer)
    second = evaluate(scorer)
    rng_unchanged = torch.equal(torch.get_rng_state(), rng)
    after = [module.training for module in net.modules()]
    net.eval()
    expected = expected_ranks(net, GRAPH.triples, GRAPH.filter_triples, num_entities=E, num_relations=R)
    wrong = [differing_ranks(first.records, expected), differing_ranks(second.records, expected)]
    assert wrong == [0, 0], f"{wrong} of {2 * len(first.records.side)} ranks differ in the two runs"
    assert_same_ranks(first.records, expected)
    assert_same_ranks(second.records, expected)
    assert rng_unchanged
    assert after == modes == [True, True, False]


class CScorer:
    """Stands for a callable object of a C type (a pybind / Cython scorer): no instance dictionary, no slots."""

    __slots__ = ()

    def __call__(self, batch: torch.Tensor) -> torch.Tensor:
        return _HIDDEN[0].score_t(batch)


_HIDDEN: list[DropoutNet] = []


def test_a_callable_kgeval_cannot_look_into_is_warned() -> None:
    """A scorer whose ``score_t`` is an object with no readable state: kgeval cannot find the network behind it, and
    says the scorer may hold modules it cannot switch."""
    net = DropoutNet().eval()
    _HIDDEN[:] = [net]
    scorer = types.SimpleNamespace(score_t=CScorer(), score_h=net.score_h, num_entities=E)
    with pytest.warns(UserWarning, match=r"may hold torch modules kgeval cannot switch.*\(score_t: a callable object"):
        evaluate_quietly(scorer, GRAPH.triples, GRAPH.filter_triples)


def test_a_closure_deeper_than_the_search_is_warned() -> None:
    """Closures within closures, deeper than kgeval looks: the innermost is named as a callable it did not look into."""
    net = DropoutNet().eval()

    def wrap(function: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda batch: function(batch)

    deep_t, deep_h = net.score_t, net.score_h
    for _ in range(5):
        deep_t, deep_h = wrap(deep_t), wrap(deep_h)
    scorer = types.SimpleNamespace(score_t=deep_t, score_h=deep_h, num_entities=E)
    with pytest.warns(UserWarning, match=r"may hold torch modules kgeval cannot switch.*score_t\.function\.function"):
        evaluate_quietly(scorer, GRAPH.triples, GRAPH.filter_triples)


def test_plain_helpers_and_numpy_functions_are_not_warned() -> None:
    """No false alarm: a scorer holding torch's and numpy's functions, a module-level helper and data."""
    import numpy as np

    net = DropoutNet().train()
    config = {"dim": 16, ("a", 1): [1, 2]}
    scorer = types.SimpleNamespace(score_t=net.score_t, score_h=net.score_h, num_entities=E, activation=torch.sigmoid,
                                   transform=np.exp, helper=score_with, config=config)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        evaluate_quietly(scorer, GRAPH.triples, GRAPH.filter_triples)
    assert net.training
