"""Exact, refused or warned in the runtime contexts of docs/models.md, "Contexts and model forms": a default device
set by the caller, and another thread that trains the model while it is evaluated.

- ``torch.set_default_device(...)``: kgeval places every tensor it creates on the device it belongs to (the
  model's, the triples', or the CPU for host-side work), so an evaluation under another default device -- "meta"
  here, which holds no data and so fails at the first tensor kgeval would have left to it -- ranks as without one;
- a thread that trains the model while another evaluates it: told in one warning, on the training side, that its
  steps run in evaluation mode; the precision flags it changes meanwhile survive the evaluation's end.
"""

from __future__ import annotations

import sys
import threading
import warnings
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
from kgeval.exceptions import ModelInUseWarning, PrecisionWarning
from kgeval.metrics.registry import summarize
from kgeval.models import DistMult
from kgeval.variants.sampled import SampledRankBasedEvaluator
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
        plain.get_metric("both.realistic.adjusted_arithmetic_mean_rank_index"), abs=0
    )


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


# -- another thread that trains the model ------------------------------------------------------------------------


class WithDropout(Bilinear):
    """A Bilinear model whose queries go through Dropout(0.5) (a no-op in evaluation mode): its own eval-mode scores
    are the Bilinear ones. ``during_first_call`` runs (once) inside its first scoring call -- another thread's work
    while kgeval evaluates it."""

    def __init__(self, during_first_call: Callable[[WithDropout], None]) -> None:
        super().__init__()
        self.dropout = torch.nn.Dropout(0.5)
        self.during_first_call: Callable[[WithDropout], None] | None = during_first_call

    def score_t(self, hr: torch.Tensor) -> torch.Tensor:
        self._other_thread_once()
        query = self.dropout(self.entity[hr[:, 0]] * self.relation[hr[:, 1]])
        return query @ self.entity.T * self.scale

    def score_h(self, rt: torch.Tensor) -> torch.Tensor:
        self._other_thread_once()
        query = self.dropout(self.relation[rt[:, 0]] * self.entity[rt[:, 1]])
        return query @ self.entity.T * self.scale

    def _other_thread_once(self) -> None:
        work, self.during_first_call = self.during_first_call, None
        if work is not None:
            thread = threading.Thread(target=work, args=(self,))
            thread.start()
            thread.join(timeout=60)
            assert not thread.is_alive()


def in_use_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(item.message) for item in caught if issubclass(item.category, ModelInUseWarning)]


def test_a_thread_training_the_model_during_an_evaluation_is_told_once_that_it_runs_in_eval_mode() -> None:
    """A trainer thread takes three steps while the model is evaluated in the main thread: its dropout is off (the
    mode is the model's, shared by every thread), and it is told so in one ModelInUseWarning naming the fix; the
    evaluation itself ranks as the model's own eval-mode scores, and the model is in training mode again after it.
    (Before: nothing told the trainer.)"""
    trainer_outputs: list[torch.Tensor] = []

    def train_steps(model: WithDropout) -> None:
        for _ in range(3):
            trainer_outputs.append(model.dropout(torch.ones(1000)))

    model = WithDropout(train_steps).train()
    reference = Bilinear()  # the same weights (seed 0), no dropout: the model's own eval-mode scores
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = evaluate(model)
    told = in_use_warnings(caught)
    assert len(told) == 1
    assert told[0].startswith("kgeval: WithDropout is in evaluation mode for an evaluation running in another thread")
    assert "copy.deepcopy(model)" in told[0]
    assert all(torch.equal(output, torch.ones(1000)) for output in trainer_outputs)  # dropout was off: eval mode
    assert differing_ranks(results.records, expected_ranks(reference, GRAPH.triples, GRAPH.filter_triples)) == 0
    assert model.training and model.dropout.training


def test_the_evaluating_thread_itself_and_an_unused_model_are_not_warned() -> None:
    """No ModelInUseWarning without another thread, nor for another thread that calls a module of another model."""
    other = torch.nn.Dropout(0.5)
    model = WithDropout(lambda _model: other(torch.ones(10))).train()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        evaluate(model)
        evaluate(WithDropout(lambda _model: None).train())
    assert in_use_warnings(caught) == []


def test_a_thread_that_switches_the_model_back_to_training_mode_is_named_to_the_evaluations_caller() -> None:
    """Another thread calls ``model.train()`` while kgeval evaluates the model: the remaining scores have dropout on
    (ranks of no model), and the caller of evaluate is told in one ModelInUseWarning. (Before: silence.)"""
    model = WithDropout(lambda model: model.train()).train()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        evaluate(model)
    told = in_use_warnings(caught)
    assert told == ["kgeval: 2 module(s) of WithDropout were switched back to training mode during this evaluation "
                    "(by another thread), so some of its scores may have had dropout on: evaluate a copy "
                    "(copy.deepcopy(model)) while another thread trains the model"]  # fmt: skip


def test_a_precision_flag_another_thread_changes_during_an_evaluation_keeps_its_value() -> None:
    """The caller's float32 matmul precision is bf16; kgeval sets it to IEEE for the evaluation, and another thread
    sets it to TF32 meanwhile: after the evaluation it holds the other thread's TF32 (before: kgeval put back the
    bf16 it saw at its start), and the evaluation's caller is told in a PrecisionWarning that the setting came into
    force during the evaluation. Without the other thread, the caller's bf16 comes back."""
    matmul = torch.backends.mkldnn.matmul
    before = matmul.fp32_precision

    def set_tf32(_model: WithDropout) -> None:
        matmul.fp32_precision = "tf32"

    try:
        matmul.fp32_precision = "bf16"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            evaluate(WithDropout(set_tf32))
        assert matmul.fp32_precision == "tf32"
        precision = [str(item.message) for item in caught if issubclass(item.category, PrecisionWarning)]
        assert precision == ["kgeval: torch.backends.mkldnn.matmul.fp32_precision='tf32' came into force during this "
                             "evaluation (set by another thread, or by the model): the scores computed after that are "
                             "those of that setting, not of the model's own precision"]  # fmt: skip
        matmul.fp32_precision = "bf16"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            evaluate(WithDropout(lambda _model: None))
        assert matmul.fp32_precision == "bf16"
        assert [item for item in caught if issubclass(item.category, PrecisionWarning)] == []
    finally:
        matmul.fp32_precision = before
