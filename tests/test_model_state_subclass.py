"""A parameter of a tensor subclass written through ``.data`` while scored is reported (ModelChangedWarning), as a
plain parameter's is: the content checksum reads the subclass's own storage through a plain alias (before: no
checksum for a subclass, so ``param.data.mul_(...)`` went unseen -- the table moved and the ranks with it)."""

from __future__ import annotations

import warnings

import pytest
import torch

from kgeval._model_state import content_checksum
from kgeval.exceptions import ModelChangedWarning
from tests.integrations.test_contexts import E, R, evaluate

DIM = 8


class Tagged(torch.Tensor):
    """A tensor subclass that keeps its data in its own storage (``__torch_function__`` only, torch's default)."""


class TaggedModel(torch.nn.Module):
    """A DistMult-like model whose entity table is an ``nn.Parameter`` of :class:`Tagged`; ``writes`` makes its
    ``score_t`` scale the relation table through ``.data`` (no version counter sees it)."""

    def __init__(self, writes: bool) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.entity = torch.nn.Parameter(Tagged(torch.randn(E, DIM, generator=generator)))
        self.relation = torch.nn.Parameter(Tagged(torch.randn(R, DIM, generator=generator)))
        self.num_entities, self.writes = E, writes

    def score_t(self, hr: torch.Tensor) -> torch.Tensor:
        if self.writes:
            self.relation.data.mul_(1.0 + 2.0**-20)
        return ((self.entity[hr[:, 0]] * self.relation[hr[:, 1]]) @ self.entity.T).as_subclass(torch.Tensor)

    def score_h(self, rt: torch.Tensor) -> torch.Tensor:
        return ((self.relation[rt[:, 0]] * self.entity[rt[:, 1]]) @ self.entity.T).as_subclass(torch.Tensor)


def test_the_parameters_are_of_the_subclass() -> None:
    model = TaggedModel(writes=False)
    assert type(model.relation) is Tagged and type(model.relation.data) is Tagged


def test_a_data_write_to_a_subclass_parameter_is_reported() -> None:
    with pytest.warns(ModelChangedWarning, match=r"TaggedModel changed its own state.*\(relation: written in place"):
        evaluate(TaggedModel(writes=True))


def test_an_unchanged_subclass_parameter_is_not_reported() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", ModelChangedWarning)
        evaluate(TaggedModel(writes=False))
        evaluate(TaggedModel(writes=False))


def test_the_checksum_of_a_subclass_is_its_plain_datas() -> None:
    """The same checksum as the plain tensor of the same content; a one-ulp change through ``.data`` changes it."""
    plain = torch.randn(5, 3, generator=torch.Generator().manual_seed(1))
    tagged = torch.nn.Parameter(Tagged(plain.clone()))
    before = content_checksum(tagged)
    assert before is not None and bool(before == content_checksum(plain))
    tagged.data[2, 1] = torch.nextafter(tagged.data[2, 1], torch.tensor(1e9))
    assert bool(content_checksum(tagged) != before)


def test_a_wrapper_subclass_still_has_no_checksum() -> None:
    """A subclass that overrides ``__torch_dispatch__`` (a wrapper, as DTensor is) is not read: its storage is not
    its data."""
    from torch.testing._internal.two_tensor import TwoTensor

    wrapper = TwoTensor(torch.randn(3, 2), torch.randn(3, 2))
    assert content_checksum(wrapper) is None
