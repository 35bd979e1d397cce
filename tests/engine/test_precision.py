"""Precision is never silently approximate: TF32 / reduced-precision matmul settings of the process are switched off
inside evaluate (and restored after it, through the API the process used) unless matmul_precision="inherit"."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from kgeval import RankBasedEvaluator
from tests.helpers.graphs import TableModel, quantised_table, random_graph

GRAPH = random_graph(0, num_entities=8, num_relations=2, num_triples=10, num_filter=5)


def backends() -> tuple[str, str]:
    """The float32 matmul precision of the CUDA and CPU (mkldnn) backends."""
    return torch.backends.cuda.matmul.fp32_precision, torch.backends.mkldnn.matmul.fp32_precision


class RecordingModel(TableModel):
    """Records the process's matmul settings whenever it scores."""

    def __init__(self, table: torch.Tensor, fail: bool = False) -> None:
        super().__init__(table)
        self.seen: set[tuple[str, str]] = set()
        self.fail = fail

    def _record(self, method: str, batch: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        self.seen.add(backends())
        if self.fail:
            raise RuntimeError("model failure")
        return super()._record(method, batch, scores)


@pytest.fixture
def approximate_settings():
    """Reduced float32 matmul precision through the legacy API (TF32 on CUDA, bf16 on CPU); exact afterwards."""
    torch.set_float32_matmul_precision("medium")
    yield
    torch.set_float32_matmul_precision("highest")


def _evaluate(model, **options):
    return RankBasedEvaluator(**options).evaluate(model, GRAPH.triples, use_tqdm=False)


def test_evaluate_runs_exact_and_restores_the_settings(approximate_settings) -> None:
    model = RecordingModel(quantised_table(0, 8, 2))
    _evaluate(model)
    assert model.seen == {("ieee", "ieee")}
    assert backends() == ("tf32", "bf16")
    assert torch.get_float32_matmul_precision() == "medium"  # the legacy API reads what it read before


def test_inherit_keeps_the_process_settings(approximate_settings) -> None:
    model = RecordingModel(quantised_table(0, 8, 2))
    _evaluate(model, matmul_precision="inherit")
    assert model.seen == {("tf32", "bf16")}


def test_settings_come_back_after_an_error(approximate_settings) -> None:
    with pytest.raises(RuntimeError, match="model failure"):
        _evaluate(RecordingModel(quantised_table(0, 8, 2), fail=True))
    assert backends() == ("tf32", "bf16")
    assert torch.get_float32_matmul_precision() == "medium"


def test_legacy_tf32_flag_is_switched_off_and_back() -> None:
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        model = RecordingModel(quantised_table(0, 8, 2))
        _evaluate(model)
        assert model.seen == {("ieee", "ieee")}
        assert torch.backends.cuda.matmul.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False


def test_default_settings_are_left_alone() -> None:
    before = backends()
    model = RecordingModel(quantised_table(0, 8, 2))
    _evaluate(model)
    assert backends() == before  # nothing written: exact already
    assert torch.get_float32_matmul_precision() == "highest"


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match=r"matmul_precision must be one of \('exact', 'inherit'\), got 'tf32'"):
        RankBasedEvaluator(matmul_precision="tf32")


def test_per_backend_api_and_exact_ranks_on_the_gemm_path() -> None:
    """In a fresh process (the per-backend API cannot be mixed with the legacy one afterwards): bf16 CPU matmuls
    and TF32 CUDA matmuls on; inside evaluate both backends read "ieee", the ranks of DistMult's GEMM fast path (on
    near-tied embeddings) equal those of an evaluation with exact settings, and the settings come back. Where this
    CPU really rounds bf16 matmuls, matmul_precision="inherit" must give other ranks (the guard is what keeps them
    exact)."""
    script = textwrap.dedent(
        """
        import torch
        from kgeval import RankBasedEvaluator
        from kgeval.datasets import load_shipped_dataset
        from kgeval.models import DistMult

        data = load_shipped_dataset("nations")
        model = DistMult(data.num_entities, data.num_relations, dim=200, seed=0)
        generator = torch.Generator().manual_seed(0)
        with torch.no_grad():  # near ties: scores closer than a reduced-precision matmul resolves
            for parameter in model.parameters():
                parameter.copy_(1.0 + 1e-4 * torch.randn(parameter.shape, generator=generator))
        def evaluate(precision="exact"):
            known = [data.train, data.valid]
            evaluator = RankBasedEvaluator(matmul_precision=precision)
            results = evaluator.evaluate(model, data.test, additional_filter_triples=known, use_tqdm=False)
            return results.records.optimistic.tolist(), results.records.pessimistic.tolist()
        exact = evaluate()
        seen = set()
        candidates = model.kgeval_candidates
        def recording(target):
            seen.add((torch.backends.mkldnn.matmul.fp32_precision, torch.backends.cuda.matmul.fp32_precision))
            return candidates(target)
        model.kgeval_candidates = recording
        a, b = torch.randn(64, 200, generator=generator), torch.randn(200, 300, generator=generator)
        reference = a @ b
        torch.backends.mkldnn.matmul.fp32_precision = "bf16"
        torch.backends.cuda.matmul.fp32_precision = "tf32"
        cpu_rounds = not torch.equal(a @ b, reference)
        assert evaluate() == exact
        assert seen == {("ieee", "ieee")}, seen
        if cpu_rounds:
            assert evaluate("inherit") != exact
        after = (torch.backends.mkldnn.matmul.fp32_precision, torch.backends.cuda.matmul.fp32_precision)
        assert after == ("bf16", "tf32"), after
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("ok")
