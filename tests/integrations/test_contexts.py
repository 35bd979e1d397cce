"""Exact wherever ``evaluate`` is called from, and whatever form the model is handed over in.

The probe list of docs/models.md, "Contexts and model forms": every case below either ranks exactly as the
brute-force reference over the model's own float32 scores -- computed outside any context, by the model's own
methods -- or is refused with the message that names the fix.

- contexts: autocast off / on, for each dtype, nested, enabled for another device type, denormals flushed, the
  precision flags of cuDNN convolutions and half-precision GEMMs; "inherit" keeps them (shown to change ranks, so
  the exact cases could fail);
- holders of each protocol hook (``kgeval_observe``) and of ``num_times``;
- models that change themselves while scored (``max_norm`` tables, buffers written in place, parameters replaced);
- sharded parameters (FSDP2 and FSDP1 on one and two gloo ranks, a bare DTensor);
- ``torch.export``, ``torch.jit.trace`` / ``script`` and ``torch.fx`` forms, holders and non-modules.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator, TemporalRankBasedEvaluator
from kgeval._engine.precision import ambient_settings
from kgeval.adapters import without_max_norm
from kgeval.datasets import load_shipped_dataset
from kgeval.exceptions import FastPathWarning, ModelChangedWarning, PrecisionWarning
from kgeval.models import DistMult
from tests.helpers.graphs import random_graph
from tests.helpers.ranks import assert_same_ranks
from tests.helpers.reference import metrics_from_ranks, reference_ranks
from tests.helpers.temporal_reference import temporal_reference_ranks
from tests.test_temporal import Forecaster, history_table, overlapping_filters, random_quadruples, tie_heavy_table

E, R, DIM = 40, 4, 16
GRAPH = random_graph(41, num_entities=E, num_relations=R, num_triples=120, num_filter=150)


class Bilinear(torch.nn.Module):
    """A float32 model scored through its own ``score_t`` / ``score_h`` only (one matmul each, no fast path): under
    bfloat16 or float16 autocast its scores round, and ties appear and vanish. ``scale`` multiplies every score
    (1e-39 puts them among float32's denormals)."""

    def __init__(self, num_entities: int = E, num_relations: int = R, seed: int = 0, scale: float = 1.0) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.entity = torch.nn.Parameter(torch.randn(num_entities, DIM, generator=generator))
        self.relation = torch.nn.Parameter(torch.randn(num_relations, DIM, generator=generator))
        self.num_entities, self.scale = num_entities, scale

    def score_t(self, hr: torch.Tensor) -> torch.Tensor:
        return (self.entity[hr[:, 0]] * self.relation[hr[:, 1]]) @ self.entity.T * self.scale

    def score_h(self, rt: torch.Tensor) -> torch.Tensor:
        return (self.relation[rt[:, 0]] * self.entity[rt[:, 1]]) @ self.entity.T * self.scale


def own_tables(model: Any, num_entities: int = E, num_relations: int = R) -> tuple[torch.Tensor, torch.Tensor]:
    """(tail table, head table), each (E, R, E) in float64, of the model's own float32 scores of every triple,
    computed outside any context (no autocast, denormals kept)."""
    entities, relations = torch.arange(num_entities), torch.arange(num_relations)
    hr = torch.cartesian_prod(entities, relations)
    rt = torch.cartesian_prod(relations, entities)
    with torch.no_grad():
        tails = model.score_t(hr).double().reshape(num_entities, num_relations, num_entities)
        heads = model.score_h(rt).double().reshape(num_relations, num_entities, num_entities).permute(2, 0, 1)
    return tails, heads


def expected_ranks(model: Any, triples: torch.Tensor, filters: Any, **counts: int) -> dict[str, dict[str, Any]]:
    """The brute-force reference over the model's own scores: tails from its tail table, heads from its head table."""
    tails, heads = own_tables(model, **counts)
    tail_ranks = reference_ranks(tails, triples, filters)["tail"]
    head_ranks = reference_ranks(heads, triples, filters)["head"]
    both = {key: np.concatenate([head_ranks[key], tail_ranks[key]]) for key in tail_ranks}
    return {"head": head_ranks, "tail": tail_ranks, "both": both}


def evaluate(model: Any, triples: torch.Tensor = GRAPH.triples, filters: Any = GRAPH.filter_triples, **options: Any):
    settings = {key: options.pop(key) for key in ("matmul_precision", "fast_path") if key in options}
    evaluator = RankBasedEvaluator(**settings)
    return evaluator.evaluate(model, triples, additional_filter_triples=filters, use_tqdm=False, **options)


def differing_ranks(records: Any, expected: dict[str, dict[str, Any]]) -> int:
    """How many optimistic or pessimistic ranks (head tasks, then tail tasks) differ from the expectation."""
    order = np.lexsort((records.task_index, records.side))
    got = {kind: np.asarray(getattr(records, kind))[order] for kind in ("optimistic", "pessimistic")}
    return int(sum((got[kind] != expected["both"][kind]).sum() for kind in got))


# -- contexts ------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def autocast(dtype: torch.dtype) -> Iterator[None]:
    with torch.autocast("cpu", dtype=dtype):
        yield


@contextlib.contextmanager
def nested_autocast() -> Iterator[None]:
    """float16 autocast inside a bfloat16 one (the innermost dtype computes)."""
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.autocast("cpu", dtype=torch.float16):
        yield


@contextlib.contextmanager
def autocast_switched_off_inside() -> Iterator[None]:
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.autocast("cpu", enabled=False):
        yield


@contextlib.contextmanager
def flag(owner: Any, name: str, value: Any) -> Iterator[None]:
    saved = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, saved)


@contextlib.contextmanager
def cuda_autocast_flag() -> Iterator[None]:
    """Autocast enabled for CUDA on this thread (as a GPU training loop leaves it); on a CPU machine it changes
    nothing the model computes, but kgeval sets it aside too."""
    torch.set_autocast_enabled("cuda", True)
    try:
        yield
    finally:
        torch.set_autocast_enabled("cuda", False)


@contextlib.contextmanager
def flushed_denormals() -> Iterator[None]:
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU cannot flush denormals")
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


#: every context an evaluation may be called from, by name
CONTEXTS: dict[str, Callable[[], contextlib.AbstractContextManager[Any]]] = {
    "none": contextlib.nullcontext,
    "autocast bfloat16": lambda: autocast(torch.bfloat16),
    "autocast float16": lambda: autocast(torch.float16),
    "autocast float16 inside bfloat16": nested_autocast,
    "autocast off inside on": autocast_switched_off_inside,
    "autocast enabled for cuda": cuda_autocast_flag,
    "denormals flushed": flushed_denormals,
    "float32 matmul precision medium": lambda: flag(torch.backends.mkldnn.matmul, "fp32_precision", "bf16"),
    "cuDNN convolutions in TF32": lambda: flag(torch.backends.cudnn.conv, "fp32_precision", "tf32"),
    "float16 GEMMs accumulated in float16": lambda: flag(torch.backends.cuda.matmul, "allow_fp16_accumulation", True),
}
#: the contexts that change what a float32 model computes on a CPU (so "inherit" must change some rank)
LOWERING = ("autocast bfloat16", "autocast float16", "autocast float16 inside bfloat16", "denormals flushed")


def model_for(context: str) -> Bilinear:
    return Bilinear(scale=1e-39) if context == "denormals flushed" else Bilinear()


@pytest.mark.parametrize("context", list(CONTEXTS))
def test_every_context_ranks_as_the_models_own_float32_scores(context: str) -> None:
    model = model_for(context)
    expected = expected_ranks(model, GRAPH.triples, GRAPH.filter_triples)
    before = ambient_settings()
    with CONTEXTS[context](), warnings.catch_warnings():
        warnings.simplefilter("error", PrecisionWarning)
        inside = ambient_settings()
        results = evaluate(model)
        assert ambient_settings() == inside  # every setting is back as the caller had it
    assert ambient_settings() == before
    assert_same_ranks(results.records, expected)


@pytest.mark.parametrize("context", LOWERING)
def test_inherit_keeps_the_context_and_its_ranks_differ(context: str) -> None:
    """The control: these contexts do change the model's ranks when kept, so the exact test above can fail."""
    model = model_for(context)
    expected = expected_ranks(model, GRAPH.triples, GRAPH.filter_triples)
    with CONTEXTS[context]():
        results = evaluate(model, matmul_precision="inherit")
    assert differing_ranks(results.records, expected) > 0


class Recording(Bilinear):
    """Records the ambient settings whenever it scores."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[list[str]] = []

    def score_t(self, hr: torch.Tensor) -> torch.Tensor:
        self.seen.append(ambient_settings())
        return super().score_t(hr)


@pytest.mark.parametrize("context", [name for name in CONTEXTS if name != "none"])
def test_the_model_scores_with_every_setting_set_aside_and_inherit_keeps_them(context: str) -> None:
    model = Recording()
    with CONTEXTS[context]():
        outside = ambient_settings()
        evaluate(model, targets=("tail",))
        exact_seen = model.seen
        model.seen = []
        evaluate(model, targets=("tail",), matmul_precision="inherit")
    assert exact_seen and all(seen == [] for seen in exact_seen)
    assert model.seen and all(seen == outside for seen in model.seen)
    if context != "autocast off inside on":
        assert outside  # the context did set something


def test_the_default_cudnn_tf32_is_set_aside_and_restored() -> None:
    """torch's default lets cuDNN convolutions run in TF32 (``torch.backends.cudnn.allow_tf32`` is True)."""
    model = Recording()
    evaluate(model, targets=("tail",))
    assert all(seen == [] for seen in model.seen)
    assert torch.backends.cudnn.conv.fp32_precision == "tf32"
    assert torch.backends.cudnn.allow_tf32  # the legacy API reads what it read before


def test_a_setting_that_cannot_be_set_aside_is_named_in_one_warning(monkeypatch) -> None:
    model = Bilinear()
    message = r"could not set aside torch\.autocast\('cpu', dtype=torch\.bfloat16\) for this evaluation"
    with torch.autocast("cpu", dtype=torch.bfloat16):
        monkeypatch.setattr(torch, "set_autocast_enabled", lambda *args: None)  # a setting that will not move
        try:
            with pytest.warns(PrecisionWarning, match=message):
                evaluate(model)
        finally:
            monkeypatch.undo()  # before autocast's own exit, which switches it back through the same function


def test_umls_custom_model_and_kgevals_distmult_under_bf16_autocast() -> None:
    """The issue's case: on UMLS a custom float32 model under bfloat16 autocast had 123 of its 1,322 ranks wrong,
    and kgeval's DistMult got a FastPathWarning blaming the model. Both rank as their own float32 scores now, with no
    warning; kept ("inherit"), the context changes ranks of both."""
    ds = load_shipped_dataset("umls")
    counts = {"num_entities": ds.num_entities, "num_relations": ds.num_relations}
    triples, filters = ds.test, [ds.train, ds.valid]
    for model in (Bilinear(ds.num_entities, ds.num_relations), DistMult(ds.num_entities, ds.num_relations, dim=16)):
        expected = expected_ranks(model, triples, filters, **counts)
        with torch.autocast("cpu", dtype=torch.bfloat16), warnings.catch_warnings():
            warnings.simplefilter("error", FastPathWarning)
            results = evaluate(model, triples, filters)
            kept = evaluate(model, triples, filters, matmul_precision="inherit", fast_path=False)
        assert_same_ranks(results.records, expected)
        assert differing_ranks(kept.records, expected) > 0


# -- Lightning's precision settings --------------------------------------------------------------------------------


def lightning_trainer(pl: Any, precision: str, callbacks: list) -> Any:
    return pl.Trainer(max_epochs=1, accelerator="cpu", devices=1, precision=precision, callbacks=callbacks,
                      logger=False, enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False)  # fmt: skip


@pytest.mark.filterwarnings("ignore::UserWarning")  # Lightning's notes about workers and bf16 on CPU
@pytest.mark.parametrize("precision", ["bf16-mixed", "16-mixed", "bf16-true", "64-true"])
def test_the_lightning_callback_logs_the_models_own_mrr_under_each_precision(precision: str) -> None:
    """ "-mixed": the float32 model's MRR. Lightning 2.6 runs its callbacks' hooks outside the precision plugin's
    autocast region (what the callback meets there is the process's flags, set aside the same way), so these two
    cases passed before too; the next test evaluates from inside the region. "-true": Lightning casts the model
    itself, and its own scores are those of its dtype (bfloat16: scored through its own methods, not the fast
    path). ("16-true" is left out: Lightning's float16 Adam turns this model's weights into NaN in one epoch, which
    kgeval reports as the model's NaN scores.)"""
    pl = pytest.importorskip("lightning.pytorch")
    from kgeval.integrations.lightning import KGEvalCallback
    from tests.support.lightning_models import LitDistMult, loader

    ds = load_shipped_dataset("nations")
    callback = KGEvalCallback(ds.valid, additional_filter_triples=[ds.train, ds.valid])
    module = LitDistMult(ds.num_entities, ds.num_relations)
    lightning_trainer(pl, precision, [callback]).fit(module, train_dataloaders=loader(ds.train))
    (evaluation,) = callback.history
    counts = {"num_entities": ds.num_entities, "num_relations": ds.num_relations}
    expected = expected_ranks(module.model, ds.valid, [ds.train, ds.valid], **counts)
    assert_same_ranks(evaluation.results.records, expected)
    mrr = metrics_from_ranks(expected, ks=(10,))["both", "realistic", "inverse_harmonic_mean_rank"]
    assert evaluation.logged["val/mrr"] == pytest.approx(mrr, rel=1e-12)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_evaluate_inside_a_validation_step_under_bf16_mixed_is_exact() -> None:
    """Lightning runs ``validation_step`` inside ``torch.autocast`` under "bf16-mixed": an evaluation called from
    there ranks as the float32 model."""
    pl = pytest.importorskip("lightning.pytorch")
    from tests.support.lightning_models import LitDistMult, loader

    ds = load_shipped_dataset("nations")

    class EvaluatesItself(LitDistMult):
        def validation_step(self, batch: Any, batch_idx: int) -> None:
            self.autocast_on = torch.is_autocast_enabled("cpu")
            self.results = RankBasedEvaluator().evaluate(
                self.model, ds.valid, additional_filter_triples=[ds.train, ds.valid], use_tqdm=False
            )

    module = EvaluatesItself(ds.num_entities, ds.num_relations)
    lightning_trainer(pl, "bf16-mixed", []).fit(module, train_dataloaders=loader(ds.train),
                                                val_dataloaders=loader(ds.valid[:1]))  # fmt: skip
    assert module.autocast_on  # the control: Lightning did evaluate from inside autocast
    counts = {"num_entities": ds.num_entities, "num_relations": ds.num_relations}
    assert_same_ranks(module.results.records, expected_ranks(module.model, ds.valid, [ds.train, ds.valid], **counts))


# -- hooks and counts of held models ---------------------------------------------------------------------------------


class Holds(torch.nn.Module):
    """A module that scores through the model it holds (``self.model``) and declares nothing itself."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def score_t(self, batch: torch.Tensor, tails: torch.Tensor | None = None) -> torch.Tensor:
        return self.model.score_t(batch, tails)

    def score_h(self, batch: torch.Tensor, heads: torch.Tensor | None = None) -> torch.Tensor:
        return self.model.score_h(batch, heads)


def lightning_holder(model: torch.nn.Module) -> torch.nn.Module:
    """The same holder as a LightningModule."""
    pl = pytest.importorskip("lightning.pytorch")

    class LitHolds(Holds, pl.LightningModule):
        pass

    return LitHolds(model)


def temporal_evaluate(model: Any, quadruples: torch.Tensor, filters: list, **options: Any) -> Any:
    return TemporalRankBasedEvaluator(filtered="time-aware").evaluate(
        model, quadruples, additional_filter_quadruples=filters, use_tqdm=False, **options
    )


@pytest.mark.parametrize("holder", [Holds, lightning_holder])
def test_the_observe_hook_of_a_held_forecaster_is_called(holder: Callable[[Any], Any]) -> None:
    """The issue's case: the hook was looked up on the holder only, so nothing was revealed and 44 of 300 ranks
    differed, silently. The held model's hook is found as its scoring is, and the ranks are the single-step ones."""
    quadruples = random_quadruples(60, 50)
    filters = overlapping_filters(61, quadruples)
    table = tie_heavy_table(62)
    forecaster = Forecaster(table)
    forecaster.num_times = 7  # read through the holder too (the quadruples' times are below 5)
    results = temporal_evaluate(holder(forecaster), quadruples, filters)
    assert forecaster.leaks == []
    assert [int(q[0, 3]) for q in forecaster.revealed] == sorted(set(quadruples[:, 3].tolist()))
    expected_table = history_table(table, quadruples)
    expected = temporal_reference_ranks(expected_table, expected_table, quadruples, filters, "time-aware")
    assert_same_ranks(results.records, expected)
    static = temporal_reference_ranks(table, table, quadruples, filters, "time-aware")
    assert differing_ranks(results.records, static) > 0  # revealing does change this model's ranks


class HoldsTwo(Holds):
    """Scores through ``self.model`` and holds a second model beside it."""

    def __init__(self, model: torch.nn.Module, second: torch.nn.Module) -> None:
        super().__init__(model)
        self.second = second


def test_a_holder_that_hides_its_hook_is_told_never_skipped() -> None:
    quadruples = random_quadruples(63, 20)
    table = tie_heavy_table(64)
    two = HoldsTwo(Forecaster(table), Forecaster(table))
    two.num_entities = table.shape[0]
    message = (
        r"HoldsTwo has no kgeval_observe of its own, but holds models that have one at \.model \(Forecaster\), "
        r"\.second \(Forecaster\)"
    )
    with pytest.raises(TypeError, match=message):
        temporal_evaluate(two, quadruples, [])
    deep = Holds(Holds(Forecaster(table)))  # the hook two levels down
    deep.num_entities = table.shape[0]
    with pytest.raises(TypeError, match=r"at \.model\.model \(Forecaster\).*define kgeval_observe on Holds"):
        temporal_evaluate(deep, quadruples, [])
    for observe in (None, "multi-step"):  # the hook is not asked for: nothing to tell
        results = temporal_evaluate(deep, quadruples, [], observe=observe)
        assert_same_ranks(results.records, temporal_reference_ranks(table, table, quadruples, [], "time-aware"))


# -- models that change themselves while scored ----------------------------------------------------------------------


class MaxNormModel(torch.nn.Module):
    """Entity vectors through an ``nn.Embedding(max_norm=1)``: its queries look entities up (renormalising them in
    place), its candidates read the table directly."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.entity = torch.nn.Embedding(E, DIM, max_norm=1.0)
        self.relation = torch.nn.Embedding(R, DIM)
        with torch.no_grad():
            self.entity.weight.mul_(3.0)  # most rows longer than max_norm, as after training steps
        self.num_entities = E

    def score_t(self, hr: torch.Tensor) -> torch.Tensor:
        return (self.entity(hr[:, 0]) * self.relation(hr[:, 1])) @ self.entity.weight.T

    def score_h(self, rt: torch.Tensor) -> torch.Tensor:
        return (self.relation(rt[:, 0]) * self.entity(rt[:, 1])) @ self.entity.weight.T


def test_a_max_norm_table_is_refused_before_anything_is_scored() -> None:
    model = MaxNormModel()
    weight, version = model.entity.weight.detach().clone(), model.entity.weight._version
    message = (r"MaxNormModel\.entity is an nn\.Embedding with max_norm=1\.0: each of its lookups renormalises the "
               r"rows it reads in place.*Evaluate kgeval\.adapters\.without_max_norm\(model\) instead")  # fmt: skip
    with pytest.raises(TypeError, match=message):
        evaluate(model)
    assert torch.equal(model.entity.weight, weight) and model.entity.weight._version == version


def test_without_max_norm_is_a_copy_that_ranks_as_its_own_scores_and_changes_nothing() -> None:
    model = MaxNormModel()
    weight = model.entity.weight.detach().clone()
    frozen = without_max_norm(model)
    assert frozen.entity.max_norm is None and model.entity.max_norm == 1.0
    assert torch.equal(model.entity.weight, weight)
    norms = frozen.entity.weight.norm(dim=1)
    assert bool((norms <= 1.0 + 1e-6).all()) and bool((norms > 0.99).all())
    expected = expected_ranks(frozen, GRAPH.triples, GRAPH.filter_triples)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ModelChangedWarning)
        first, second = evaluate(frozen), evaluate(frozen)
    assert_same_ranks(first.records, expected)
    assert first.get_metric("both.realistic.mrr") == second.get_metric("both.realistic.mrr")


class CountsItsCalls(Bilinear):
    """Writes a registered buffer in place whenever it scores."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def score_t(self, hr: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return super().score_t(hr)


class NudgesItsWeights(Bilinear):
    """Writes its own entity table in place while scoring tails: later batches see another model."""

    def score_t(self, hr: torch.Tensor) -> torch.Tensor:
        scores = super().score_t(hr)
        with torch.no_grad():
            self.entity.mul_(1.01)
        return scores


class ReplacesAParameter(Bilinear):
    def score_h(self, rt: torch.Tensor) -> torch.Tensor:
        self.relation = torch.nn.Parameter(self.relation.detach().clone())
        return super().score_h(rt)


@pytest.mark.parametrize(
    ("model", "named"),
    [(CountsItsCalls, r"\(calls: "), (NudgesItsWeights, r"\(entity: "), (ReplacesAParameter, r"\(relation: ")],
)
def test_a_model_that_changes_its_own_state_is_reported(model: type, named: str) -> None:
    with pytest.warns(ModelChangedWarning, match=rf"changed its own state while it was scored {named}"):
        evaluate(model())


def test_a_model_that_changes_nothing_is_not_reported() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", ModelChangedWarning)
        evaluate(Bilinear())
        evaluate(DistMult(E, R, dim=8, seed=1))


class CachesOnce(Bilinear):
    """Registers a buffer of the entity table's norms the first time it scores (inside kgeval's inference mode:
    an inference tensor, which has no version counter)."""

    def score_t(self, hr: torch.Tensor) -> torch.Tensor:
        if not hasattr(self, "norms"):
            self.register_buffer("norms", self.entity.norm(dim=1))
        return super().score_t(hr)


def test_inference_tensors_are_watched_without_a_version_counter() -> None:
    """A model built under ``torch.inference_mode`` (its parameters inference tensors), and one whose cache kgeval's
    own inference mode created: evaluated again and again, never a crash; the cache's creation is reported once."""
    with torch.inference_mode():
        built = Bilinear()
    expected = expected_ranks(built, GRAPH.triples, GRAPH.filter_triples)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ModelChangedWarning)
        assert_same_ranks(evaluate(built).records, expected)
    caching = CachesOnce()
    with pytest.warns(ModelChangedWarning, match=r"\(norms: written in place or replaced\)"):
        evaluate(caching)
    assert caching.norms.is_inference()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ModelChangedWarning)
        assert_same_ranks(evaluate(caching).records, expected_ranks(caching, GRAPH.triples, GRAPH.filter_triples))


def test_uninitialised_lazy_parameters_are_refused_before_scoring() -> None:
    class Lazy(Bilinear):
        def __init__(self) -> None:
            super().__init__()
            self.project = torch.nn.LazyLinear(DIM)

        def score_t(self, hr: torch.Tensor) -> torch.Tensor:
            return (self.project(self.entity[hr[:, 0]]) * self.relation[hr[:, 1]]) @ self.entity.T

    model = Lazy()
    with pytest.raises(TypeError, match=r"^Lazy has lazy parameters that are not initialised yet \(project\.weight, "
                                        r"project\.bias\).*Run one forward pass"):  # fmt: skip
        evaluate(model)
    assert torch.nn.parameter.is_lazy(model.project.weight)  # left as it was


def test_evaluations_in_two_threads_keep_the_process_settings_set_aside_until_the_last_ends() -> None:
    """The float32 matmul precision is process-wide. Thread A's evaluation begins first and ends first; thread B's
    begins while A runs and goes on scoring after A ended: every call of both saw IEEE float32, and the caller's
    setting came back once both were done. (Each evaluation restoring what it saved, B's last calls ran in bf16.)"""
    a_scoring, a_done = threading.Event(), threading.Event()

    class First(Recording):
        def score_t(self, hr: torch.Tensor) -> torch.Tensor:
            a_scoring.set()
            return super().score_t(hr)

    class Second(Recording):
        def score_t(self, hr: torch.Tensor) -> torch.Tensor:
            assert a_done.wait(timeout=30)  # every call of B waits until A's evaluation has ended
            return super().score_t(hr)

    first, second = First(), Second()
    errors: list[BaseException] = []

    def run(model: Recording, done: threading.Event | None = None) -> None:
        try:
            evaluate(model, targets=("tail",), batch_size=16)
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)
        finally:
            if done is not None:
                done.set()

    with flag(torch.backends.mkldnn.matmul, "fp32_precision", "bf16"):
        thread_a = threading.Thread(target=run, args=(first, a_done))
        thread_a.start()
        assert a_scoring.wait(timeout=30)
        thread_b = threading.Thread(target=run, args=(second,))
        thread_b.start()
        thread_a.join(timeout=60)
        thread_b.join(timeout=60)
        assert torch.backends.mkldnn.matmul.fp32_precision == "bf16"
    assert errors == []
    assert len(second.seen) > 1
    assert all(seen == [] for seen in first.seen + second.seen)


class Holding:
    """Not a module: holds its network in ``self.net`` (with dropout), switches it with its own ``eval`` (which
    kgeval never calls), and scores through it."""

    def __init__(self) -> None:
        self.net = torch.nn.Sequential(torch.nn.Dropout(0.5))
        self.model = Bilinear()
        self.num_entities, self.own_eval_calls = E, 0

    def eval(self) -> None:
        self.own_eval_calls += 1

    def score_t(self, hr: torch.Tensor) -> torch.Tensor:
        return self.net(self.model.score_t(hr))

    def score_h(self, rt: torch.Tensor) -> torch.Tensor:
        return self.net(self.model.score_h(rt))


def test_the_modules_a_plain_object_holds_are_put_in_eval_mode_and_watched() -> None:
    holder = Holding()
    holder.net.train()
    expected = expected_ranks(holder.model, GRAPH.triples, GRAPH.filter_triples)
    first, second = evaluate(holder), evaluate(holder)  # dropout on would rank differently every time
    assert_same_ranks(first.records, expected)
    assert_same_ranks(second.records, expected)
    assert holder.net.training and holder.own_eval_calls == 0

    def nudge(hr: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            holder.model.entity.mul_(1.0)
        return Holding.score_t(holder, hr)

    holder.score_t = nudge  # type: ignore[method-assign]
    with pytest.warns(ModelChangedWarning, match=r"Holding changed its own state .*\(model\.entity: "):
        evaluate(holder)


# -- sharded parameters ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sharded_outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[int, list[dict]]:
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    from tests.support.distributed import run_scenarios
    from tests.support.sharded_parameters import SHARDED_PARAMETER_SCENARIOS

    names = list(SHARDED_PARAMETER_SCENARIOS)
    return {size: run_scenarios(size, names, tmp_path_factory.mktemp(f"fsdp{size}")) for size in (1, 2)}


def sharded_expectation(kind: str) -> dict[str, dict[str, Any]]:
    """The reference ranks of the unsharded model of tests/support/sharded_parameters.py of ``kind``."""
    from tests.support.sharded_parameters import GRAPH as SHARDED
    from tests.support.sharded_parameters import build

    model = build(kind)
    counts = {"num_entities": SHARDED.num_entities, "num_relations": SHARDED.num_relations}
    if kind != "forward":
        return expected_ranks(model, SHARDED.triples, SHARDED.filter_triples, **counts)
    h, r, t = torch.meshgrid(*(torch.arange(n) for n in (counts["num_entities"], counts["num_relations"],
                                                        counts["num_entities"])), indexing="ij")  # fmt: skip
    with torch.no_grad():
        table = model(h.reshape(-1), r.reshape(-1), t.reshape(-1)).double().reshape(h.shape)
    return reference_ranks(table, SHARDED.triples, SHARDED.filter_triples)


def sharded_outcome(outcomes: dict[int, list[dict]], world_size: int, name: str) -> list[Any]:
    """Each rank's value of scenario ``name``, after asserting that it succeeded there."""
    values = []
    for rank, outcome in enumerate(outcomes[world_size]):
        status, *value = outcome[name]
        assert status == "ok", f"rank {rank}: {value}"
        values.append(value[0])
    return values


@pytest.mark.parametrize("world_size", [1, 2])
@pytest.mark.parametrize(
    ("name", "kind"),
    [("fsdp2_distmult", "distmult"), ("fsdp2_methods", "methods"), ("fsdp2_nested", "distmult"),
     ("fsdp2_nested_forward", "forward"), ("fsdp1_methods", "methods")],
)  # fmt: skip
def test_sharded_parameters_are_gathered_for_the_evaluation(sharded_outcomes, world_size: int, name, kind) -> None:
    """FSDP2 (``fully_shard``; nested, the tables sharded on their own, also with a model scored through ``forward``,
    whose tables' forwards run FSDP's hooks a different number of times on each rank) and FSDP1 over one and two
    gloo ranks: every rank ranks as the brute-force reference over the unsharded model, with no warning, and the
    parameters are sharded again afterwards. (Left to reshard after each forward, the nested forward scorer gathered
    its tables again at every call: a ModelChangedWarning on one rank, a collective mismatch on two.)"""
    expected = sharded_expectation(kind)
    for value in sharded_outcome(sharded_outcomes, world_size, name):
        assert value["warnings"] == []
        assert_same_ranks(value["results"].records, expected)
        kinds = {kind for _, kind in value["parameters"]}
        assert kinds == ({"DTensor"} if name.startswith("fsdp2") else {"Parameter"})  # sharded (or flat) again


@pytest.mark.parametrize("world_size", [1, 2])
def test_fsdp_mixed_precision_is_named_in_a_precision_warning(sharded_outcomes, world_size: int) -> None:
    """A MixedPrecisionPolicy(param_dtype=bfloat16) gathers bfloat16 copies: kgeval cannot score the float32
    parameters FSDP holds, and says so (with the fix)."""
    for value in sharded_outcome(sharded_outcomes, world_size, "fsdp2_mixed_precision"):
        (warning,) = value["warnings"]
        assert warning.startswith("PrecisionWarning: kgeval: FSDP gathers FSDPMethodsOnly's parameters in "
                                  "torch.bfloat16 (they are torch.float32")  # fmt: skip
        assert "full_state_dict=True" in warning


@pytest.mark.parametrize("world_size", [1, 2])
@pytest.mark.parametrize(
    ("name", "message"),
    [("bare_dtensor", "MethodsOnly's entity is a DTensor sharded over a device mesh"),
     ("fsdp1_inner_module", "MethodsOnly's _flat_param is a flat parameter of FSDP's FullyShardedDataParallel")],
)  # fmt: skip
def test_parameters_kgeval_cannot_gather_are_refused_with_the_fix(sharded_outcomes, world_size, name, message):
    for outcome in sharded_outcomes[world_size]:
        status, kind, text = outcome[name]
        assert (status, kind) == ("error", "TypeError")
        assert text.startswith(message)
        assert "full_tensor()" in text or "pass the FullyShardedDataParallel wrapper itself" in text


# -- model forms -----------------------------------------------------------------------------------------------------


class Triples(torch.nn.Module):
    """Scores whole triples through ``forward(h, r, t)`` only."""

    def __init__(self) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(7)
        self.entity = torch.nn.Parameter(torch.randn(E, DIM, generator=generator))
        self.relation = torch.nn.Parameter(torch.randn(R, DIM, generator=generator))

    def forward(self, h: torch.Tensor, r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return (self.entity[h] * self.relation[r] * self.entity[t]).sum(-1)


def triple_table(score: Callable[..., torch.Tensor]) -> torch.Tensor:
    h, r, t = torch.meshgrid(torch.arange(E), torch.arange(R), torch.arange(E), indexing="ij")
    with torch.no_grad():
        return score(h.reshape(-1), r.reshape(-1), t.reshape(-1)).double().reshape(E, R, E)


def example_inputs(n: int = 5) -> tuple[torch.Tensor, ...]:
    """Three distinct example id tensors (export and trace would merge inputs that are one tensor)."""
    return torch.arange(n) % E, torch.arange(n) % R, (torch.arange(n) + 1) % E


def exported(dynamic: bool) -> Any:
    shapes = ({0: torch.export.Dim("n")},) * 3 if dynamic else None
    return torch.export.export(Triples(), example_inputs(), dynamic_shapes=shapes)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit is deprecated in favour of export / compile
@pytest.mark.parametrize(
    "form",
    ["jit.trace", "jit.script", "fx.symbolic_trace", "export (dynamic batch)"],
)
def test_compiled_and_exported_forms_rank_as_their_own_scores(form: str) -> None:
    model = Triples()
    builders = {
        "jit.trace": lambda: torch.jit.trace(model, example_inputs()),
        "jit.script": lambda: torch.jit.script(model),
        "fx.symbolic_trace": lambda: torch.fx.symbolic_trace(model),
        "export (dynamic batch)": lambda: exported(dynamic=True).module(),
    }
    converted = builders[form]()
    table = triple_table(converted)
    assert torch.equal(table, triple_table(model))  # the form computes the model's scores
    expected = reference_ranks(table, GRAPH.triples, GRAPH.filter_triples)
    assert_same_ranks(evaluate(converted, num_entities=E).records, expected)


def test_an_export_for_a_fixed_batch_is_refused_with_the_fix_and_score_fn_works() -> None:
    module = exported(dynamic=False).module()
    with pytest.raises(TypeError, match=r"exported \(torch\.export\) for batches of exactly 5 triples.*dynamic_shapes"):
        evaluate(module, num_entities=E)
    model = Triples()
    results = evaluate(module, num_entities=E, score_fn=model)  # never calls the exported module's eval()
    assert_same_ranks(results.records, reference_ranks(triple_table(model), GRAPH.triples, GRAPH.filter_triples))


def test_an_exported_program_is_refused_with_the_fix_unless_score_fn_scores() -> None:
    with pytest.raises(TypeError, match=r"torch\.export ExportedProgram.*evaluate exported\.module\(\)"):
        evaluate(exported(dynamic=True), num_entities=E)
    model = Triples()
    results = evaluate(exported(dynamic=True), num_entities=E, score_fn=model)
    assert_same_ranks(results.records, reference_ranks(triple_table(model), GRAPH.triples, GRAPH.filter_triples))


def test_a_lightning_module_holding_the_model_gets_the_holders_hint() -> None:
    """Its ``forward(*args, **kwargs)`` (Lightning's) took three arguments, so it was taken for a triple scorer and
    then failed with Lightning's "missing forward"; it is a holder, and the error says which model to pass."""
    pl = pytest.importorskip("lightning.pytorch")

    class LitHolder(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model = DistMult(E, R, dim=8, seed=0)

    class PassesOn(torch.nn.Module):  # a forward that only hands its arguments on, holding a scoring model
        def __init__(self) -> None:
            super().__init__()
            self.model = DistMult(E, R, dim=8, seed=0)

        def forward(self, *args: Any, **kwargs: Any) -> Any:
            return self.model(*args, **kwargs)

    for holder, name in ((LitHolder(), "LitHolder"), (PassesOn(), "PassesOn")):
        with pytest.raises(TypeError, match=rf"^{name} has no score_h\(batch\).*it holds DistMult in \.model.*"
                                            r"pass that model \(evaluate\(model\.model, \.\.\.\)"):  # fmt: skip
            evaluate(holder)


def test_an_object_that_is_not_a_module_keeps_its_own_eval() -> None:
    """Its ``eval(data)`` is its own routine: kgeval never calls it (it raised a TypeError, and with a default
    argument it would have run the user's routine), and the object is ranked as its scores."""

    class Evaluating:
        def __init__(self) -> None:
            self.model, self.num_entities, self.calls = Bilinear(), E, 0

        def score_t(self, hr: torch.Tensor) -> torch.Tensor:
            return self.model.score_t(hr)

        def score_h(self, rt: torch.Tensor) -> torch.Tensor:
            return self.model.score_h(rt)

        def eval(self, data: Any = None) -> None:
            self.calls += 1

    user = Evaluating()
    assert_same_ranks(evaluate(user).records, expected_ranks(user.model, GRAPH.triples, GRAPH.filter_triples))
    assert user.calls == 0
