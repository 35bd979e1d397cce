"""The fused "triton" kernel of the query/candidate fast path (GEMM and counts in one program, no score written),
under Triton's interpreter on CPU tensors (compiled on a GPU): counts and picked scores against float64 references
on integer vectors (exact in any summation order), ties between copies of a candidate on random vectors (the
picked true score is the counting tiles' value, bit for bit), +-inf / NaN, odd sizes, every dtype, and whole
evaluations of DistMult and TransE (L2) against the brute-force reference, filtered, raw and restricted."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("triton")

from kgeval import RankBasedEvaluator
from kgeval._engine.gemm_scoring import GemmScorer
from kgeval._engine.kernels import COMPARE, TRITON, choice
from kgeval._engine.kernels.choice import KernelChooser
from kgeval.models import DistMult, TransE
from tests.helpers.graphs import random_graph
from tests.helpers.ranks import assert_same_ranks
from tests.helpers.reference import reference_ranks

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
DTYPES = [torch.float16, torch.bfloat16, torch.float32]


def integer_vectors(seed: int, rows: int, dims: int, dtype: torch.dtype, special: bool = False) -> torch.Tensor:
    """Small integers (products and sums exact in every dtype here), with +-inf and NaN entries if ``special``."""
    rng = np.random.default_rng(seed)
    values = rng.integers(-2, 3, (rows, dims)).astype(np.float64)
    if special:
        draw = rng.random((rows, dims))
        values[draw < 0.01] = np.inf
        values[(draw >= 0.01) & (draw < 0.02)] = -np.inf
        values[(draw >= 0.02) & (draw < 0.025)] = np.nan
    return torch.from_numpy(values).to(dtype).to(DEVICE)


def reference_counts(queries, candidates, rows, true_scores):
    """Counts from the float64 product (exact for integer vectors) by plain comparisons."""
    scores = (queries.double() @ candidates.double().T)[rows]
    true = true_scores.double().unsqueeze(1)
    return (scores > true).sum(dim=1), (scores < true).sum(dim=1), torch.isnan(scores).any(dim=1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("num_queries", "num_candidates", "dims"), [(1, 1, 1), (7, 65, 33), (70, 130, 45)])
def test_counts_and_picked_scores_equal_the_reference(dtype, num_queries, num_candidates, dims) -> None:
    queries = integer_vectors(num_queries, num_queries, dims, dtype)
    candidates = integer_vectors(num_candidates + 1, num_candidates, dims, dtype)
    rng = np.random.default_rng(dims)
    rows = torch.as_tensor(rng.integers(0, num_queries, 2 * num_queries + 1), device=DEVICE)  # repeated queries
    answers = torch.as_tensor(rng.integers(0, num_candidates, rows.numel()), device=DEVICE)
    true = TRITON.pick_scores(queries, candidates, rows, answers)
    exact = queries.double() @ candidates.double().T
    assert torch.equal(true.double(), exact[rows, answers])
    greater, less, nan = TRITON.fused_counts(queries, candidates, rows, true)
    expected = reference_counts(queries, candidates, rows, true)
    assert greater.tolist() == expected[0].tolist()
    assert less.tolist() == expected[1].tolist()
    assert nan.tolist() == expected[2].tolist()


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # the interpreter's numpy matmul
@pytest.mark.parametrize("dtype", DTYPES)
def test_special_values_count_as_ordinary_scores_and_nan_is_flagged(dtype) -> None:
    queries = integer_vectors(1, 9, 5, dtype, special=True)
    candidates = integer_vectors(2, 70, 5, dtype, special=True)
    rows = torch.arange(9, device=DEVICE)
    answers = torch.arange(9, device=DEVICE) * 7
    true = TRITON.pick_scores(queries, candidates, rows, answers)
    greater, less, nan = TRITON.fused_counts(queries, candidates, rows, true)
    expected = reference_counts(queries, candidates, rows, true)
    assert torch.isinf(true).any() or torch.isnan(true).any(), "the draw must reach the special values"
    assert greater.tolist() == expected[0].tolist()
    assert less.tolist() == expected[1].tolist()
    assert nan.tolist() == (expected[2] | torch.isnan(true)).tolist()


@pytest.mark.parametrize("dtype", DTYPES)
def test_copies_of_the_answer_tie_with_it_wherever_their_tiles_fall(dtype) -> None:
    """Random vectors (rounding everywhere): each candidate appears three times, in different tiles and at
    different columns of them; the answer's picked score must equal each copy's, so the counts see two ties."""
    queries, candidates, rows, answers = _copied_candidates(dtype)
    assert _copies_tie(TRITON.pick_scores(queries, candidates, rows, answers), queries, candidates, rows)


def _copies_tie(true: torch.Tensor, queries: torch.Tensor, candidates: torch.Tensor, rows: torch.Tensor) -> bool:
    """Whether every task counts exactly two candidates level with its true score (its answer's two copies)."""
    greater, less, _nan = TRITON.fused_counts(queries, candidates, rows, true)
    return bool(((candidates.shape[0] - 1 - greater - less) == 2).all())


def _copied_candidates(dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """70 random queries, 43 random candidates each three times (129 rows), and the picked true scores."""
    generator = torch.Generator().manual_seed(3)
    queries = torch.randn(70, 45, generator=generator).to(dtype).to(DEVICE)
    candidates = torch.randn(43, 45, generator=generator).to(dtype).repeat(3, 1).to(DEVICE)
    rows = torch.arange(70, device=DEVICE)
    answers = torch.randint(0, 129, (70,), generator=generator).to(DEVICE)
    return queries, candidates, rows, answers


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter's tile product (CPU tensors)")
@pytest.mark.parametrize("dtype", DTYPES)
def test_interpreted_tiles_do_not_depend_on_the_hosts_blas(dtype, monkeypatch) -> None:
    """Under the interpreter, ``tl.dot`` is numpy's matmul: a BLAS whose float32 kernels round an element by its
    place in the tile (OpenBLAS on AVX2 CPUs) broke the copies' ties. Here numpy's matmul is made to round every
    odd column one step up; the kernel's scores must not change, so the copies still tie."""
    from triton.runtime import interpreter

    plain = np.matmul

    def skewed(a, b, *args, **kwargs):
        out = plain(a, b, *args, **kwargs)
        out[..., 1::2] = np.nextafter(out[..., 1::2], np.inf)
        return out

    queries, candidates, rows, answers = _copied_candidates(dtype)
    expected = TRITON.pick_scores(queries, candidates, rows, answers)
    monkeypatch.setattr(interpreter.np, "matmul", skewed)
    true = TRITON.pick_scores(queries, candidates, rows, answers)
    assert torch.equal(true, expected)
    assert _copies_tie(true, queries, candidates, rows)


def test_true_scores_computed_another_way_break_the_ties() -> None:
    """The ties above hold because the true scores are the tiles' own arithmetic: the same scores computed another
    way (float64 products rounded to float32: the correctly rounded value, not the float32 sum) miss some copies,
    so the check can fail."""
    queries, candidates, rows, answers = _copied_candidates(torch.float32)
    assert _copies_tie(TRITON.pick_scores(queries, candidates, rows, answers), queries, candidates, rows)
    rounded = (queries.double() @ candidates.double().T)[rows, answers].float()
    assert not _copies_tie(rounded, queries, candidates, rows)


def _integer_model(model, seed: int, dtype: torch.dtype = torch.float32):
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for embedding in (model.entity_embeddings, model.relation_embeddings):
            embedding.weight.copy_(torch.randint(-1, 2, embedding.weight.shape, generator=generator))
    return model.to(dtype).to(DEVICE)


def _table(model) -> torch.Tensor:
    """score[h, r, t] in float64 from the model's embeddings: exact for integer embeddings."""
    entities = model.entity_embeddings.weight.double().cpu()
    relations = model.relation_embeddings.weight.double().cpu()
    if isinstance(model, DistMult):
        return torch.einsum("hd,rd,td->hrt", entities, relations, entities)
    translated = entities[:, None, None, :] + relations[None, :, None, :] - entities[None, None, :, :]
    return -(translated * translated).sum(dim=-1)  # -||h + r - t||^2: the order of -||h + r - t||


@pytest.mark.parametrize("model_class", [DistMult, TransE])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("filtered", "batch_size", "restrict"), [(True, None, False), (False, 3, False),
                                                                   (True, 5, True)])  # fmt: skip
def test_evaluations_match_the_reference(model_class, dtype, filtered, batch_size, restrict, monkeypatch) -> None:
    graph = random_graph(8, num_entities=70, num_relations=3, num_triples=40, num_filter=120)
    model = _integer_model(model_class(70, 3, dim=4), seed=8, dtype=dtype)  # dim 4 in {-1, 0, 1}: many ties
    whitelist = torch.arange(0, 70, 2) if restrict else None
    triples = graph.triples
    if whitelist is not None:  # the evaluation triples whose head and tail are candidates
        triples = triples[(triples[:, 0] % 2 == 0) & (triples[:, 2] % 2 == 0)]
        assert triples.shape[0] >= 5
    monkeypatch.setattr(GemmScorer, "_scores", lambda *args: pytest.fail("the fused kernel wrote a score tile"))
    results = RankBasedEvaluator(filtered=filtered, kernel="triton", batch_size=batch_size).evaluate(
        model, triples.to(DEVICE), additional_filter_triples=graph.filter_triples, restrict_entities_to=whitelist,
        use_tqdm=False,
    )  # fmt: skip
    expected = reference_ranks(_table(model), triples, graph.filter_triples, filtered=filtered,
                               restrict_entities_to=None if whitelist is None else whitelist.tolist())  # fmt: skip
    assert_same_ranks(results.records, expected)


def test_float64_and_l1_models_take_the_tile_path() -> None:
    graph = random_graph(9, num_entities=20, num_relations=2, num_triples=15, num_filter=20)
    for model in (_integer_model(DistMult(20, 2, dim=3), 9, torch.float64), _integer_model(TransE(20, 2, 3, p=1), 9)):
        expected = RankBasedEvaluator(kernel="eager").evaluate(model, graph.triples.to(DEVICE), use_tqdm=False)
        got = RankBasedEvaluator(kernel="triton").evaluate(model, graph.triples.to(DEVICE), use_tqdm=False)
        assert got.records.equals(expected.records)


@pytest.mark.slow
def test_the_probe_passes_here_and_catches_a_wrong_kernel(monkeypatch) -> None:
    choice.triton_kernel_works.cache_clear()
    assert choice.triton_kernel_works(DEVICE)
    choice.triton_kernel_works.cache_clear()
    wrong = lambda queries, candidates, rows, columns: (queries @ candidates.T)[rows, columns] + 1e-3  # noqa: E731
    monkeypatch.setattr(TRITON, "pick_scores", wrong)
    with pytest.warns(RuntimeWarning, match="the triton kernel is not usable on"):
        assert not choice.triton_kernel_works(DEVICE)
    choice.triton_kernel_works.cache_clear()


@pytest.mark.slow
def test_the_probes_warning_says_why_when_products_round_by_place(monkeypatch) -> None:
    """A device whose products round a pair by its place in the tile (simulated: scores of candidates past the
    first hundred one step up) is refused with a warning that says so, not a bare "differ"."""
    plain = TRITON.pick_scores

    def by_place(queries, candidates, rows, columns):
        scores = plain(queries, candidates, rows, columns)
        return torch.where(columns >= 100, torch.nextafter(scores, torch.full_like(scores, np.inf)), scores)

    choice.triton_kernel_works.cache_clear()
    monkeypatch.setattr(TRITON, "pick_scores", by_place)
    with pytest.warns(RuntimeWarning, match="depending on where the candidate falls in a tile") as caught:
        assert not choice.triton_kernel_works(DEVICE)
    assert "the ranks are exact, the evaluation only slower" in str(caught[0].message)
    choice.triton_kernel_works.cache_clear()


def test_auto_counts_eagerly_on_cuda_and_triton_runs_by_name_after_its_probe() -> None:
    """ "auto" picks the kernel measured fastest on a GPU (eager: 12.9x the bare GEMM on an H200, fused Triton 17.8x),
    without even probing triton; "triton" by name passes its probe first."""
    cuda = torch.device("cuda")

    def no_probe(device: torch.device) -> bool:
        raise AssertionError("auto must not probe the triton kernel")

    assert KernelChooser("auto", triton_works=no_probe).choose(cuda, 10) is COMPARE
    assert KernelChooser("auto", triton_works=no_probe).choose(cuda, 10**12) is COMPARE  # however large
    # a requested triton kernel that fails its probe counts eagerly too (the probe warns)
    assert KernelChooser("triton", triton_works=lambda device: False).choose(cuda, 10) is COMPARE
    assert KernelChooser("triton", triton_works=lambda device: True).choose(cuda, 10) is TRITON
    cpu = torch.device("cpu")
    assert KernelChooser("auto", triton_works=no_probe, numba_loaded=lambda: False).choose(cpu, 10) is not TRITON


@pytest.mark.cuda
def test_cuda_fused_evaluation_equals_the_cpu_reference() -> None:
    """On a GPU: the compiled fused kernel (by name: "auto" counts eagerly there) gives the reference ranks of a
    tie-heavy model."""
    graph = random_graph(10, num_entities=300, num_relations=4, num_triples=200, num_filter=600)
    model = _integer_model(DistMult(300, 4, dim=8), seed=10)
    results = RankBasedEvaluator(kernel="triton").evaluate(
        model, graph.triples.cuda(), additional_filter_triples=graph.filter_triples, use_tqdm=False
    )
    assert_same_ranks(results.records, reference_ranks(_table(model), graph.triples, graph.filter_triples))


@pytest.mark.parametrize("dtype", DTYPES)
def test_an_evaluation_sees_the_answer_tie_with_its_copy(dtype) -> None:
    """Random DistMult embeddings, entity i + 35 a copy of entity i: raw, every true answer that ties with its copy
    in the model's own scores ties with it in kgeval's ranks, however the scores round -- which holds only if the
    true score is the counting tiles' own value."""
    graph = random_graph(11, num_entities=70, num_relations=3, num_triples=60, num_filter=0)
    model = DistMult(70, 3, dim=40, seed=11)
    with torch.no_grad():
        model.entity_embeddings.weight[35:] = model.entity_embeddings.weight[:35]
    model = model.to(dtype).to(DEVICE)
    results = RankBasedEvaluator(filtered=False, kernel="triton").evaluate(model, graph.triples.to(DEVICE),
                                                                           use_tqdm=False)  # fmt: skip
    records = results.records
    # which true answers tie with their copy in the model's own scores: all of them wherever a score does not depend
    # on its column's place (the interpreter, float32); a half-precision GEMM on a GPU may round two equal columns
    # apart, and then the model's own scores do not tie them either
    triples = graph.triples.to(DEVICE)
    with torch.no_grad():
        heads = model.score_h(triples[:, 1:]).float().cpu()
        tails = model.score_t(triples[:, :2]).float().cpu()
    rows = torch.arange(len(triples))
    copies = (graph.triples + 35) % 70
    ties = {"head": heads[rows, graph.triples[:, 0]] == heads[rows, copies[:, 0]],
            "tail": tails[rows, graph.triples[:, 2]] == tails[rows, copies[:, 2]]}  # fmt: skip
    if DEVICE.type == "cpu" or dtype == torch.float32:
        assert all(bool(tied.all()) for tied in ties.values())
    assert sum(int(tied.sum()) for tied in ties.values()) > 0  # some tie is left to check
    for side, tied in ties.items():
        chosen = records.side == (0 if side == "head" else 1)
        order = np.argsort(records.task_index[chosen], kind="stable")
        gap = (records.pessimistic[chosen] - records.optimistic[chosen])[order]
        assert (gap[tied.numpy()] >= 1).all()


def test_relation_prediction_runs_through_the_fused_kernel(monkeypatch) -> None:
    """The relation form of DistMult / TransE is fused like the entity one: ranks equal the reference."""
    from tests.helpers.reference import reference_relation_ranks

    graph = random_graph(12, num_entities=30, num_relations=70, num_triples=40, num_filter=150)
    monkeypatch.setattr(GemmScorer, "_scores", lambda *args: pytest.fail("the fused kernel wrote a score tile"))
    for model_class in (DistMult, TransE):
        model = _integer_model(model_class(30, 70, dim=3), seed=12)
        results = RankBasedEvaluator(kernel="triton").evaluate(
            model, graph.triples.to(DEVICE), additional_filter_triples=graph.filter_triples, targets=("relation",),
            use_tqdm=False,
        )  # fmt: skip
        expected = reference_relation_ranks(_table(model), graph.triples, graph.filter_triples)
        records = results.records
        order = np.argsort(records.task_index, kind="stable")
        np.testing.assert_array_equal(records.optimistic[order], expected["optimistic"])
        np.testing.assert_array_equal(records.pessimistic[order], expected["pessimistic"])


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # the interpreter's numpy matmul
@pytest.mark.parametrize("target_programs", [1, 2, 5])
def test_programs_walking_several_candidate_tiles_count_them_all(monkeypatch, target_programs: int) -> None:
    """With few programs per launch each walks several candidate tiles (the wide-graph case) and adds its counts
    once; the counts are those of one tile per program."""
    from kgeval._engine.kernels import triton_gemm

    queries = integer_vectors(5, 70, 9, torch.float32)
    candidates = integer_vectors(6, 333, 9, torch.float32, special=True)
    rows = torch.arange(70, device=DEVICE)
    answers = torch.arange(70, device=DEVICE) * 4
    true = TRITON.pick_scores(queries, candidates, rows, answers)
    expected = TRITON.fused_counts(queries, candidates, rows, true)
    monkeypatch.setattr(triton_gemm, "TARGET_PROGRAMS", target_programs)
    got = TRITON.fused_counts(queries, candidates, rows, true)
    for a, b, reference in zip(got, expected, reference_counts(queries, candidates, rows, true), strict=True):
        assert torch.equal(a, b)
        assert a.tolist() == reference.tolist()
