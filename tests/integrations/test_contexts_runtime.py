"""Exact in the runtime contexts of docs/models.md, "Contexts and model forms": a default device set by the caller.

- ``torch.set_default_device(...)``: kgeval places every tensor it creates on the device it belongs to (the
  model's, the triples', or the CPU for host-side work), so an evaluation under another default device -- "meta"
  here, which holds no data and so fails at the first tensor kgeval would have left to it -- ranks as without one.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._device import _device_constructors

import kgeval
from kgeval import RankBasedEvaluator
from kgeval.metrics.registry import summarize
from kgeval.models import DistMult
from kgeval.sampled import SampledRankBasedEvaluator
from tests.integrations.test_contexts import GRAPH, Bilinear, differing_ranks, expected_ranks

E, R = 40, 4
KGEVAL_ROOT = str(Path(kgeval.__file__).parent)


@pytest.fixture
def default_device() -> Iterator[Callable[[str | None], None]]:
    """``torch.set_default_device`` for the test, the caller's default device restored after it (also on failure)."""
    before = torch.get_default_device()
    try:
        yield torch.set_default_device
    finally:
        torch.set_default_device(None if before == torch.device("cpu") else before)


def evaluate(model: Any, **options: Any) -> Any:
    settings = {key: options.pop(key) for key in ("fast_path",) if key in options}
    return RankBasedEvaluator(**settings).evaluate(model, GRAPH.triples, additional_filter_triples=GRAPH.filter_triples,
                                                   use_tqdm=False, **options)  # fmt: skip


# -- a default device --------------------------------------------------------------------------------------------

MODELS: dict[str, Callable[[], Any]] = {
    "own methods": Bilinear,
    "kgeval DistMult, fast path": lambda: DistMult(E, R, dim=16, seed=3),
    "kgeval DistMult, no fast path": lambda: DistMult(E, R, dim=16, seed=3),
}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("restricted", [False, True])
def test_a_meta_default_device_ranks_as_the_models_own_scores(default_device, name: str, restricted: bool) -> None:
    """A CPU model evaluated under ``torch.set_default_device("meta")``: every rank is the brute-force rank over the
    model's own scores, and every metric (the adjusted ones, from the null model, included) is the one without a
    default device. (Before: NotImplementedError "Cannot copy out of meta tensor" in the filter fingerprint.)"""
    model = MODELS[name]()
    options: dict[str, Any] = {"fast_path": "no fast path" not in name}
    if restricted:
        options.update(restrict_entities_to=torch.arange(0, E, 2), drop_outside_restriction=True)
    plain = evaluate(model, **options)
    default_device("meta")
    under_meta = evaluate(model, **options)
    default_device(None)
    if not restricted:
        assert differing_ranks(under_meta.records, expected_ranks(model, GRAPH.triples, GRAPH.filter_triples)) == 0
    assert under_meta.to_flat_dict() == plain.to_flat_dict()
    assert under_meta.get_metric("both.realistic.adjusted_arithmetic_mean_rank_index") == pytest.approx(
        plain.get_metric("both.realistic.adjusted_arithmetic_mean_rank_index"), abs=0)


def test_a_meta_default_device_leaves_sampled_negatives_and_summaries_as_they_are(default_device) -> None:
    """The sampled evaluator's draws (a CPU generator) and the null model's tables of :func:`summarize` do not
    follow the default device: the same negatives and metrics as without one."""
    model = DistMult(E, R, dim=16, seed=5)
    sampler = SampledRankBasedEvaluator(num_negatives=10, additional_filter_triples=GRAPH.filter_triples, seed=1)
    ranks, candidates = np.array([1.0, 2.5, 7.0, 40.0]), np.array([40, 20, 10, 40])
    plain, plain_summary = sampler.evaluate(model, GRAPH.triples), summarize(ranks, candidates)
    default_device("meta")
    under_meta, meta_summary = sampler.evaluate(model, GRAPH.triples), summarize(ranks, candidates)
    default_device(None)
    assert under_meta.to_flat_dict() == plain.to_flat_dict()
    assert meta_summary.sums.keys() == plain_summary.sums.keys()
    for key, value in plain_summary.sums.items():
        np.testing.assert_array_equal(meta_summary.sums[key], value)


class UnplacedFactories(TorchFunctionMode):
    """Records each tensor factory (``torch.arange``, ``zeros``, ``tensor``, ``randint``, ...) that kgeval's own code
    calls without ``device=``: the tensors a caller's default device would receive -- a default device that differs
    from the model's, emulated on a machine with one device."""

    def __init__(self) -> None:
        super().__init__()
        self.unplaced: list[str] = []

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func in _device_constructors() and kwargs.get("device") is None:
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_filename.startswith(str(Path(torch.__file__).parent)):
                frame = frame.f_back  # type: ignore[assignment]
            if frame is not None and frame.f_code.co_filename.startswith(KGEVAL_ROOT):
                self.unplaced.append(f"{func.__name__} at {frame.f_code.co_filename}:{frame.f_lineno}")
        return func(*args, **kwargs)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_kgeval_places_every_tensor_it_creates(name: str) -> None:
    """No tensor factory in kgeval's evaluation path is left to the default device (before: the filter fingerprint's
    ``randint``, the denormal probe, the null model's harmonic table, the count kernels' buffers)."""
    model = MODELS[name]()
    recorder = UnplacedFactories()
    with recorder:
        results = evaluate(model, fast_path="no fast path" not in name)
        results.to_flat_dict()
        summarize(np.array([1.0, 3.0]), np.array([E, E]))
    assert recorder.unplaced == []

