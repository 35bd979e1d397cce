"""kgeval.models.TNTComplEx and RecurrencyBaseline: their scores against plain per-quadruple formulas (loops over
the definitions in their docstrings), TNTComplEx's fast path and its untrained times, training on quadruples, and
the recurrency baseline in the forecasting order."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from kgeval import TemporalRankBasedEvaluator
from kgeval.exceptions import UndefinedMetricWarning
from kgeval.models import RecurrencyBaseline, TNTComplEx
from kgeval.models.training import train_model
from tests.helpers.ranks import assert_same_ranks
from tests.helpers.temporal_reference import temporal_reference_ranks

E, R, T = 9, 3, 7


def random_quadruples(seed: int, count: int, times: tuple[int, int] = (0, T)) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    columns = [(0, E), (0, R), (0, E), times]
    return torch.stack([torch.randint(low, high, (count,), generator=generator) for low, high in columns], dim=1)


def tnt_score(model: TNTComplEx, h: int, r: int, t: int, tau: int) -> float:
    """Re(Σ h (r τ + r') conj(t)) by a loop over the complex coordinates; r' alone for an untrained time."""

    def pairs(table: torch.nn.Embedding, row: int) -> list[complex]:
        values = table.weight[row].detach().double().tolist()
        return [complex(values[2 * i], values[2 * i + 1]) for i in range(model.dim)]

    use_time = model.training or bool(model.trained_times[tau])
    head, tail = pairs(model.entity_embeddings, h), pairs(model.entity_embeddings, t)
    rel, static, time = (pairs(model.relation_embeddings, r), pairs(model.static_relation_embeddings, r),
                         pairs(model.time_embeddings, tau))  # fmt: skip
    return sum((head[i] * ((rel[i] * time[i] if use_time else 0) + static[i]) * tail[i].conjugate()).real
               for i in range(model.dim))  # fmt: skip


def test_tntcomplex_scores_equal_the_formula_through_every_method() -> None:
    model = TNTComplEx(E, R, T, dim=4, seed=0).eval()
    model.trained_times[: T - 2] = True  # the last two times untrained
    rows = random_quadruples(1, 20)
    tails = model.score_t(rows[:, [0, 1, 3]])
    heads = model.score_h(rows[:, [1, 2, 3]])
    some = torch.tensor([4, 0, 2])
    np.testing.assert_allclose(model.score_t(rows[:, [0, 1, 3]], tails=some).detach(), tails[:, some].detach(),
                               rtol=1e-6)  # fmt: skip
    for i, (h, r, t, tau) in enumerate(rows.tolist()):
        for e in range(E):
            assert float(tails[i, e].detach()) == pytest.approx(tnt_score(model, h, r, e, tau), abs=1e-6)
            assert float(heads[i, e].detach()) == pytest.approx(tnt_score(model, e, r, t, tau), abs=1e-6)
    query = model.kgeval_query(rows[:, [0, 1, 3]], "tail") @ model.kgeval_candidates("tail").T
    np.testing.assert_allclose(query.detach(), tails.detach(), rtol=1e-6)


def test_an_untrained_time_is_scored_by_the_time_independent_part() -> None:
    """After training on times 0..3, times 4..6 (never seen) score as the static part alone -- two untrained times
    give the same scores -- while trained times use their embedding."""
    train = random_quadruples(2, 300, times=(0, 4))
    model = TNTComplEx(E, R, T, dim=8, seed=3)
    train_model(model, train, num_epochs=3, use_tqdm=False)
    model.eval()
    assert model.trained_times.tolist() == [True] * 4 + [False] * 3
    rows = torch.tensor([[1, 2, 5], [1, 2, 6], [1, 2, 0]])
    scores = model.score_t(rows).detach()
    torch.testing.assert_close(scores[0], scores[1])
    assert not torch.allclose(scores[0], scores[2])
    static = torch.view_as_complex(model.entity_embeddings.weight[1].view(-1, 2)) * torch.view_as_complex(
        model.static_relation_embeddings.weight[2].view(-1, 2)
    )
    expected = (torch.view_as_real(static).flatten() @ model.entity_embeddings.weight.T).detach()
    torch.testing.assert_close(scores[0], expected)


def test_tntcomplex_trains_and_is_evaluated_exactly_through_its_fast_path() -> None:
    """Training lowers the loss; the evaluator's ranks (fast path) equal the reference over the model's own scores
    table (the formula) in every setting."""
    train = random_quadruples(4, 400)
    test = random_quadruples(5, 30)
    model = TNTComplEx(E, R, T, dim=8, seed=6)
    losses = train_model(model, train, num_epochs=5, use_tqdm=False)
    assert losses[-1] < losses[0]
    model.eval()
    with torch.no_grad():
        table = torch.stack([model.score_t(torch.tensor([[h, r, tau] for h in range(E) for r in range(R)]))
                             .view(E, R, E) for tau in range(T)], dim=-1).double()  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        results = TemporalRankBasedEvaluator(filtered="all").evaluate(
            model, test, additional_filter_quadruples=[train], use_tqdm=False)  # fmt: skip
    for name, got in (("time-aware", results), ("static", results.static), ("raw", results.raw)):
        # the GEMM's rounding may differ from the table's in the last place: compare on a tie-free check
        expected = temporal_reference_ranks(table, table, test, [train], name)
        np.testing.assert_array_equal(np.sort(got.records["optimistic"]),
                                      np.sort(np.concatenate([expected["head"]["optimistic"],
                                                              expected["tail"]["optimistic"]])))  # fmt: skip


def test_training_refuses_triples_for_a_temporal_model() -> None:
    model = TNTComplEx(E, R, T, dim=2)
    with pytest.raises(ValueError, match=r"quadruples of a temporal model must be a tensor of shape \(n, 4\)"):
        train_model(model, random_quadruples(7, 5)[:, :3], use_tqdm=False)
    with pytest.raises(ValueError, match="time ids in"):
        train_model(model, torch.tensor([[0, 0, 0, T]]), use_tqdm=False)
    with pytest.raises(ValueError, match="1-N scoring only"):
        train_model(model, random_quadruples(7, 5), num_negatives=3, use_tqdm=False)


def recurrency_score(known: list[tuple[int, int, int, int]], query: tuple[int, int, int, int], side: str,
                     decay: float, alpha: float, steps: list[float] | None = None) -> float:  # fmt: skip
    """The baseline's formula by a loop: the earlier occurrences of the query's fact, and of its (s, r, ·) or
    (·, r, o) pattern; time distances in ``steps`` (by time id; default the ids)."""
    s, r, o, tau = query
    if side == "tail":
        pattern = [q for q in known if q[0] == s and q[1] == r and q[3] < tau]
    else:
        pattern = [q for q in known if q[1] == r and q[2] == o and q[3] < tau]
    same = [q for q in pattern if q[0] == s and q[2] == o]
    if not same:
        return 0.0
    latest = max(q[3] for q in same)
    distance = tau - latest if steps is None else steps[tau] - steps[latest]
    return alpha * decay**distance + (1 - alpha) * len(same) / len(pattern)


@pytest.mark.parametrize(("decay", "alpha"), [(0.99, 0.99), (0.5, 0.3), (1.0, 0.0)])
def test_recurrency_scores_equal_the_formula(decay: float, alpha: float) -> None:
    known = random_quadruples(8, 200)
    model = RecurrencyBaseline(E, R, T, decay=decay, alpha=alpha)
    model.kgeval_observe(known[:120])
    model.kgeval_observe(known[120:])
    facts = [tuple(q) for q in known.tolist()]
    rows = random_quadruples(9, 25)
    tails = model.score_t(rows[:, [0, 1, 3]])
    heads = model.score_h(rows[:, [1, 2, 3]])
    for i, (s, r, o, tau) in enumerate(rows.tolist()):
        for e in range(E):
            tail = recurrency_score(facts, (s, r, e, tau), "tail", decay, alpha)
            head = recurrency_score(facts, (e, r, o, tau), "head", decay, alpha)
            assert float(tails[i, e]) == pytest.approx(tail, rel=1e-6, abs=1e-7)
            assert float(heads[i, e]) == pytest.approx(head, rel=1e-6, abs=1e-7)


def test_recurrency_in_the_single_step_order_sees_only_the_past() -> None:
    """Observing the training quadruples, then evaluated single-step: ranks equal the reference on the table of
    the formula over every quadruple (train + test), since only times before each query count."""
    train = random_quadruples(10, 150, times=(0, 4))
    test = random_quadruples(11, 40, times=(4, T))
    model = RecurrencyBaseline(E, R, T)
    model.kgeval_observe(train)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        results = TemporalRankBasedEvaluator().evaluate(model, test, additional_filter_quadruples=[train],
                                                        use_tqdm=False)  # fmt: skip
    assert len(model.known) == len(train) + len(test)  # every test time revealed once
    facts = [tuple(q) for q in torch.cat([train, test]).tolist()]
    table = np.zeros((E, R, E, T))
    for s in range(E):
        for r in range(R):
            for o in range(E):
                for tau in range(T):
                    table[s, r, o, tau] = recurrency_score(facts, (s, r, o, tau), "tail", 0.99, 0.99)
    head_table = np.zeros((E, R, E, T))
    for s in range(E):
        for r in range(R):
            for o in range(E):
                for tau in range(4, T):
                    head_table[s, r, o, tau] = recurrency_score(facts, (s, r, o, tau), "head", 0.99, 0.99)
    table, head_table = table.astype(np.float32), head_table.astype(np.float32)
    assert_same_ranks(results.records, temporal_reference_ranks(table, head_table, test, [train], "time-aware"))
    assert math.isfinite(results["mrr"])


def test_recurrency_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match="decay must be in"):
        RecurrencyBaseline(E, R, T, decay=0.0)
    with pytest.raises(ValueError, match="alpha must be in"):
        RecurrencyBaseline(E, R, T, alpha=1.5)
    with pytest.raises(ValueError, match=r"time ids must be in \[0, 7\)"):
        RecurrencyBaseline(E, R, T).kgeval_observe(torch.tensor([[0, 0, 0, 7]]))


def test_the_baseline_before_a_split_knows_what_precedes_it() -> None:
    from types import SimpleNamespace

    train, valid = random_quadruples(12, 30, times=(0, 3)), random_quadruples(13, 10, times=(3, 5))
    data = SimpleNamespace(num_entities=E, num_relations=R, num_times=T, train=train, valid=valid)
    assert torch.equal(RecurrencyBaseline.before(data, "valid").known, train)
    assert torch.equal(RecurrencyBaseline.before(data, "test", decay=0.5).known, torch.cat([train, valid]))
    assert RecurrencyBaseline.before(data, "test", decay=0.5).decay == 0.5
    with pytest.raises(ValueError, match="split must be 'valid' or 'test'"):
        RecurrencyBaseline.before(data, "train")


def test_recurrency_measures_time_in_the_datasets_steps_on_a_gapped_graph(tmp_path) -> None:
    """Times 1, 2, 3, 10, 40 (years, say): positions 0..4, steps 0, 1, 2, 9, 39. A fact last seen at time 3 and
    queried at time 40 weighs decay^37 -- not decay^2, as positions would have it."""
    from kgeval.datasets import load_temporal_tsv

    years = ["1", "2", "3", "10", "40"]
    generator = np.random.default_rng(12)
    rows = [(f"e{generator.integers(4)}", f"r{generator.integers(2)}", f"e{generator.integers(4)}", year)
            for year in years for _ in range(6)]  # fmt: skip
    for split in ("train", "valid", "test"):
        lines = rows if split == "train" else [row for row in rows if row[3] == "40"]
        (tmp_path / f"{split}.txt").write_text("".join("\t".join(row) + "\n" for row in lines))
    data = load_temporal_tsv(tmp_path, unseen="keep")
    assert data.time_steps.tolist() == [0, 1, 2, 9, 39]
    model = RecurrencyBaseline.before(data, "test", decay=0.9, alpha=0.7)
    facts = [tuple(q) for q in model.known.tolist()]
    steps = data.time_steps.tolist()
    queries = data.test
    tails, heads = model.score_t(queries[:, [0, 1, 3]]), model.score_h(queries[:, [1, 2, 3]])
    checked_far = False
    for i, (s, r, o, tau) in enumerate(queries.tolist()):
        for e in range(data.num_entities):
            tail = recurrency_score(facts, (s, r, e, tau), "tail", 0.9, 0.7, steps)
            head = recurrency_score(facts, (e, r, o, tau), "head", 0.9, 0.7, steps)
            assert float(tails[i, e]) == pytest.approx(tail, rel=1e-6, abs=1e-7)
            assert float(heads[i, e]) == pytest.approx(head, rel=1e-6, abs=1e-7)
            checked_far |= tail != recurrency_score(facts, (s, r, e, tau), "tail", 0.9, 0.7) and tail > 0
    assert checked_far  # some score differs from the positions' one: the gap counted


def test_time_steps_are_checked() -> None:
    with pytest.raises(ValueError, match="one distance per time id"):
        RecurrencyBaseline(E, R, 3, time_steps=[0.0, 1.0])
    with pytest.raises(ValueError, match="strictly increasing"):
        RecurrencyBaseline(E, R, 3, time_steps=[0.0, 2.0, 2.0])
