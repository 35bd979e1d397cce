"""kgeval.variants.temporal: every filter setting x side x rank type equals the brute-force reference
(tests/helpers/temporal_reference.py: plain loops over METRICS.md's temporal filter definitions) on tie-heavy
models, across batch and slice sizes, with and without ``inverse_relations``, through the models' methods and
through the query/candidate fast path."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from kgeval import TemporalRankBasedEvaluator
from kgeval._engine.gemm_scoring import GemmScorer
from kgeval._engine.scorer_choice import make_scorer
from kgeval.adapters.temporal import pack_quadruples, temporal_view
from kgeval.exceptions import UndefinedMetricWarning
from tests.helpers import field_ranking
from tests.helpers.ranks import assert_same_ranks, ranks_by_side
from tests.helpers.reference import metrics_from_ranks
from tests.helpers.temporal_reference import SETTINGS, temporal_reference_ranks

E, R, T = 11, 3, 6


def random_quadruples(seed: int, count: int, relations: int = R) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    columns = [(E, count), (relations, count), (E, count), (T, count)]
    return torch.stack([torch.randint(0, high, (n,), generator=generator) for high, n in columns], dim=1)


def overlapping_filters(seed: int, quadruples: torch.Tensor) -> list[torch.Tensor]:
    """Known quadruples sharing queries with the evaluated ones, at the same time and at other times."""
    generator = torch.Generator().manual_seed(seed)
    same_time = quadruples[torch.randint(0, len(quadruples), (40,), generator=generator)].clone()
    same_time[:, 2] = torch.randint(0, E, (40,), generator=generator)  # other answers of (h, r, ?, τ)
    other_time = quadruples[torch.randint(0, len(quadruples), (40,), generator=generator)].clone()
    other_time[:, 0] = torch.randint(0, E, (40,), generator=generator)  # other answers of (?, r, t, τ')
    other_time[:, 3] = torch.randint(0, T, (40,), generator=generator)
    return [same_time, other_time, random_quadruples(seed + 1, 30)]


class TableTemporal(torch.nn.Module):
    """Scores from dense tables: ``score_t`` from ``tails[h, r, :, τ]``, ``score_h`` from ``heads[:, r, t, τ]``,
    with the candidate keyword."""

    def __init__(self, tails: torch.Tensor, heads: torch.Tensor | None = None) -> None:
        super().__init__()
        self.register_buffer("tails", tails)
        self.register_buffer("heads", tails if heads is None else heads)
        self.dummy = torch.nn.Parameter(torch.zeros(1, device=tails.device))
        self.num_entities = tails.shape[0]

    def score_t(self, hrt: torch.Tensor, tails: torch.Tensor | None = None) -> torch.Tensor:
        scores = self.tails[hrt[:, 0], hrt[:, 1], :, hrt[:, 2]]
        return scores if tails is None else scores[:, tails]

    def score_h(self, rtt: torch.Tensor, heads: torch.Tensor | None = None) -> torch.Tensor:
        scores = self.heads[:, rtt[:, 0], rtt[:, 1], rtt[:, 2]].T
        return scores if heads is None else scores[:, heads]


class IntegerTemporalDistMult(torch.nn.Module):
    """score(h, r, t, τ) = sum(e_h * w_r * u_τ * e_t) with integer vectors (heavy ties, exact in any order), with
    the query/candidate form over (B, 3) batches and the same scores through score_t / score_h."""

    kgeval_similarity = "dot"

    def __init__(self, seed: int, dim: int = 4) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.entities = torch.nn.Parameter(torch.randint(-1, 2, (E, dim), generator=generator).float())
        self.relations = torch.nn.Parameter(torch.randint(-1, 2, (R, dim), generator=generator).float())
        self.times = torch.nn.Parameter(torch.randint(-1, 2, (T, dim), generator=generator).float())
        self.num_entities, self.num_relations, self.num_times = E, R, T

    def kgeval_query(self, batch: torch.Tensor, target: str) -> torch.Tensor:
        entity = batch[:, 0] if target == "tail" else batch[:, 1]
        relation = batch[:, 1] if target == "tail" else batch[:, 0]
        return self.entities[entity] * self.relations[relation] * self.times[batch[:, 2]]

    def kgeval_candidates(self, target: str) -> torch.Tensor:
        return self.entities

    def score_t(self, hrt: torch.Tensor) -> torch.Tensor:
        return self.kgeval_query(hrt, "tail") @ self.entities.T

    def score_h(self, rtt: torch.Tensor) -> torch.Tensor:
        return self.kgeval_query(rtt, "head") @ self.entities.T

    def table(self) -> torch.Tensor:
        with torch.no_grad():
            return torch.einsum("hd,rd,td,kd->hrtk", self.entities, self.relations, self.entities, self.times)


class ObjectsOnly(torch.nn.Module):
    """A forecasting model that predicts objects only: ``score_t`` from ``table[h, r, :, τ]``, no ``score_h`` (heads
    are asked as tails of inverse relations)."""

    num_entities = E

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.table = table
        self.dummy = torch.nn.Parameter(torch.zeros(1, device=table.device))

    def score_t(self, hrt: torch.Tensor) -> torch.Tensor:
        return self.table[hrt[:, 0], hrt[:, 1], :, hrt[:, 2]]


def tie_heavy_table(seed: int, relations: int = R) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 3, (E, relations, E, T), generator=generator).float()


def evaluate(model, quadruples, filters, setting, **options):
    evaluator_options = {key: options.pop(key) for key in ("batch_size", "slice_size", "fast_path", "kernel")
                         if key in options}  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        return TemporalRankBasedEvaluator(filtered=setting, **evaluator_options).evaluate(
            model, quadruples, additional_filter_quadruples=filters, use_tqdm=False, **options
        )


SIZES = [(None, None), (3, 4), (7, 11), (1, 1)]


@pytest.mark.parametrize(("batch_size", "slice_size"), SIZES)
@pytest.mark.parametrize("setting", SETTINGS)
def test_every_setting_equals_the_reference_on_a_tie_heavy_table(setting: str, batch_size, slice_size) -> None:
    quadruples = random_quadruples(0, 40)
    filters = overlapping_filters(1, quadruples)
    table = tie_heavy_table(2)
    results = evaluate(TableTemporal(table), quadruples, filters, setting, batch_size=batch_size,
                       slice_size=slice_size)  # fmt: skip
    expected = temporal_reference_ranks(table, table, quadruples, filters, setting)
    assert_same_ranks(results.records, expected)
    assert results.setting == setting
    np.testing.assert_array_equal(results.records.relation[results.records.side == 1], quadruples[:, 1].numpy())


@pytest.mark.parametrize("setting", SETTINGS)
def test_every_metric_of_every_side_and_rank_type_equals_the_reference(setting: str) -> None:
    quadruples = random_quadruples(3, 50)
    filters = overlapping_filters(4, quadruples)
    table = tie_heavy_table(5)
    results = evaluate(TableTemporal(table), quadruples, filters, setting)
    ranks = temporal_reference_ranks(table, table, quadruples, filters, setting)
    expected = metrics_from_ranks(ranks, ks=(1, 3, 5, 10))
    for (side, rank_type, key), value in expected.items():
        got = results.get_metric(f"{side}.{rank_type}.{key}")
        assert got == pytest.approx(value, rel=1e-9, abs=1e-12, nan_ok=True), (side, rank_type, key)


def test_the_settings_differ_as_the_filters_do_and_all_reports_the_three() -> None:
    """A model that ties nothing and a filter with answers at the same and at other times: raw < time-aware <
    static in MRR here, and filtered="all" reports each equal to its own evaluation."""
    quadruples = random_quadruples(6, 40)
    filters = overlapping_filters(7, quadruples)
    table = torch.randn((E, R, E, T), generator=torch.Generator().manual_seed(8))
    each = {setting: evaluate(TableTemporal(table), quadruples, filters, setting) for setting in SETTINGS}
    every = evaluate(TableTemporal(table), quadruples, filters, "all")
    assert each["raw"]["mrr"] < each["time-aware"]["mrr"] < each["static"]["mrr"]
    assert every.setting == "time-aware" and every.raw is not None and every.static is not None
    for setting, got in (("time-aware", every), ("raw", every.raw), ("static", every.static)):
        assert got.setting == setting
        assert_same_ranks(got.records, temporal_reference_ranks(table, table, quadruples, filters, setting))
        assert got["mrr"] == each[setting]["mrr"]


@pytest.mark.parametrize("offset", [R, R + 1])
@pytest.mark.parametrize("setting", SETTINGS)
def test_inverse_relations_score_heads_as_tails_of_the_inverse_relation(setting: str, offset: int) -> None:
    """A model that predicts objects only (no score_h): (?, r, t, τ) is scored as (t, r + R, ?, τ) -- the field's
    convention (R + 1 is Timetraveler's offset)."""
    table = tie_heavy_table(9, relations=R + offset)
    quadruples = random_quadruples(10, 40)
    filters = overlapping_filters(11, quadruples)
    results = evaluate(ObjectsOnly(table), quadruples, filters, setting, inverse_relations=offset, slice_size=5)
    head_table = table[:, offset:].permute(2, 1, 0, 3)[:, :R]  # head_table[e, r, t, τ] = table[t, r + R, e, τ]
    expected = temporal_reference_ranks(table[:, :R], head_table, quadruples, filters, setting)
    assert_same_ranks(results.records, expected)


@pytest.mark.parametrize(("batch_size", "slice_size"), SIZES)
@pytest.mark.parametrize("setting", SETTINGS)
def test_the_fast_path_ranks_exactly_with_integer_vectors(setting: str, batch_size, slice_size) -> None:
    model = IntegerTemporalDistMult(12)
    quadruples = random_quadruples(13, 40)
    filters = overlapping_filters(14, quadruples)
    view = temporal_view(model, E, R, T)
    queries = pack_quadruples(quadruples, T)[:, :2]
    assert type(make_scorer(view, "tail", E, None, probe_queries=queries)) is GemmScorer
    results = evaluate(model, quadruples, filters, setting, batch_size=batch_size, slice_size=slice_size)
    table = model.table()
    assert_same_ranks(results.records, temporal_reference_ranks(table, table, quadruples, filters, setting))
    assert (results.records.pessimistic > results.records.optimistic).any()  # the integers tie candidates


def test_per_timestamp_pools_both_sides_of_each_time() -> None:
    quadruples = random_quadruples(15, 60)
    filters = overlapping_filters(16, quadruples)
    table = tie_heavy_table(17)
    results = evaluate(TableTemporal(table), quadruples, filters, "time-aware")
    table_of = results.per_timestamp(ks=(1, 3))
    ranks = temporal_reference_ranks(table, table, quadruples, filters, "time-aware")
    realistic = np.concatenate([ranks["head"]["realistic"], ranks["tail"]["realistic"]])
    times = np.concatenate([quadruples[:, 3].numpy()] * 2)
    assert list(table_of.index) == sorted(set(times.tolist()))
    for time, row in table_of.iterrows():
        mine = realistic[times == time]
        assert row["count"] == len(mine)
        assert row["mrr"] == pytest.approx(np.mean(1 / mine))
        assert row["hits@3"] == pytest.approx(np.mean(mine <= 3))


def test_bad_quadruples_and_counts_are_refused_at_the_door() -> None:
    model = TableTemporal(tie_heavy_table(18))
    quadruples = random_quadruples(19, 5)
    with pytest.raises(ValueError, match=r"shape \(n, 4\).*triples are evaluated by kgeval.RankBasedEvaluator"):
        evaluate(model, quadruples[:, :3], [], "raw")
    bad = quadruples.clone()
    bad[2, 2] = E
    with pytest.raises(ValueError, match=r"mapped_quadruples row 2 .* out of range"):
        evaluate(model, bad, [], "raw")
    late = torch.cat([quadruples, torch.tensor([[0, 0, 0, 5]])])
    with pytest.raises(ValueError, match="time id 5, but num_times is 3"):
        evaluate(model, late, [], "raw", num_times=3)
    with pytest.raises(ValueError, match="filtered must be one of"):
        TemporalRankBasedEvaluator(filtered="time_aware")  # type: ignore[arg-type]


def test_a_subclass_that_redefines_its_scoring_is_scored_through_it() -> None:
    """The class check is made on the temporal model (not its view): a subclass whose score_t differs from its
    form keeps its own score_t, with a FastPathWarning naming it."""

    class Negated(IntegerTemporalDistMult):
        def score_t(self, hrt: torch.Tensor) -> torch.Tensor:
            return -super().score_t(hrt)

    model = Negated(20)
    quadruples = random_quadruples(21, 30)
    filters = overlapping_filters(22, quadruples)
    with pytest.warns(Warning, match=r"Negated\.score_t overrides"):
        results = TemporalRankBasedEvaluator().evaluate(model, quadruples, additional_filter_quadruples=filters,
                                                         use_tqdm=False)  # fmt: skip
    table = model.table()
    expected = temporal_reference_ranks(-table, table, quadruples, filters, "time-aware")
    assert_same_ranks(results.records, expected)


def test_a_compiled_temporal_model_ranks_as_the_model() -> None:
    model = IntegerTemporalDistMult(23)
    quadruples = random_quadruples(24, 30)
    filters = overlapping_filters(25, quadruples)
    got = evaluate(torch.compile(model), quadruples, filters, "static")
    table = model.table()
    assert_same_ranks(got.records, temporal_reference_ranks(table, table, quadruples, filters, "static"))


class Forecaster(TableTemporal):
    """A forecasting model: ``kgeval_observe`` records what it was told, and its scores add 10 x the number of
    times each (h, r, t) was observed -- so its ranks depend on the forecasting order. Every query checks that
    nothing of its time or later was revealed before it."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__(table)
        self.seen = torch.zeros(table.shape[:3])
        self.revealed: list[torch.Tensor] = []
        self.leaks: list[tuple[int, int]] = []

    def kgeval_observe(self, quadruples: torch.Tensor) -> None:
        self.revealed.append(quadruples.clone())
        self.seen.index_put_((quadruples[:, 0], quadruples[:, 1], quadruples[:, 2]), torch.tensor(1.0),
                             accumulate=True)  # fmt: skip

    def _check(self, times: torch.Tensor) -> None:
        latest = max((int(q[:, 3].max()) for q in self.revealed), default=-1)
        self.leaks.extend((int(time), latest) for time in times if int(time) <= latest)

    def score_t(self, hrt: torch.Tensor, tails: torch.Tensor | None = None) -> torch.Tensor:
        self._check(hrt[:, 2])
        scores = super().score_t(hrt) + 10 * self.seen[hrt[:, 0], hrt[:, 1], :]
        return scores if tails is None else scores[:, tails]

    def score_h(self, rtt: torch.Tensor, heads: torch.Tensor | None = None) -> torch.Tensor:
        self._check(rtt[:, 2])
        scores = super().score_h(rtt) + 10 * self.seen[:, rtt[:, 0], rtt[:, 1]].T
        return scores if heads is None else scores[:, heads]


def history_table(table: torch.Tensor, quadruples: torch.Tensor) -> torch.Tensor:
    """What the forecaster scores at time τ in the single-step order: its table + 10 x the number of evaluated
    quadruples (h, r, t, τ') with τ' < τ (a plain loop)."""
    expected = table.clone()
    for h, r, t, time in quadruples.tolist():
        expected[h, r, t, time + 1 :] += 10
    return expected


@pytest.mark.parametrize(("batch_size", "slice_size"), [(None, None), (3, 4)])
@pytest.mark.parametrize("setting", [*SETTINGS, "all"])
def test_single_step_reveals_each_time_after_it_is_scored(setting: str, batch_size, slice_size) -> None:
    """observe="auto" on a model with kgeval_observe is single-step: times in order, each revealed once (not once
    per pass of "all"), after its queries were scored; the ranks are those of the model's scores at that time."""
    quadruples = random_quadruples(26, 60)
    filters = overlapping_filters(27, quadruples)
    table = tie_heavy_table(28)
    model = Forecaster(table)
    results = evaluate(model, quadruples, filters, setting, batch_size=batch_size, slice_size=slice_size)
    assert model.leaks == []
    times = sorted(set(quadruples[:, 3].tolist()))
    assert [int(q[0, 3]) for q in model.revealed] == times
    for time, told in zip(times, model.revealed, strict=True):
        assert sorted(told.tolist()) == sorted(q for q in quadruples.tolist() if q[3] == time)
    expected_table = history_table(table, quadruples)
    for name in SETTINGS if setting == "all" else (setting,):
        got = results if name in (setting, "time-aware") else getattr(results, name.replace("-", "_"))
        expected = temporal_reference_ranks(expected_table, expected_table, quadruples, filters, name)
        assert_same_ranks(got.records, expected)
    np.testing.assert_array_equal(results.records.relation[results.records.side == 1], quadruples[:, 1].numpy())


def test_multi_step_and_no_order_never_reveal() -> None:
    quadruples = random_quadruples(29, 40)
    filters = overlapping_filters(30, quadruples)
    table = tie_heavy_table(31)
    expected = temporal_reference_ranks(table, table, quadruples, filters, "time-aware")
    for observe in ("multi-step", None):
        model = Forecaster(table)
        results = evaluate(model, quadruples, filters, "time-aware", observe=observe)
        assert model.revealed == []
        assert_same_ranks(results.records, expected)
    model = Forecaster(table)
    evaluate(model, quadruples, filters, "time-aware", observe="multi-step")
    assert model.leaks == []  # time by time: a query never comes after a later time's (nothing revealed anyway)


def test_a_model_without_the_hook_ranks_the_same_in_every_order() -> None:
    quadruples = random_quadruples(32, 40)
    filters = overlapping_filters(33, quadruples)
    table = tie_heavy_table(34)
    expected = temporal_reference_ranks(table, table, quadruples, filters, "static")
    for observe in ("auto", "multi-step", None):
        assert_same_ranks(evaluate(TableTemporal(table), quadruples, filters, "static", observe=observe).records,
                          expected)  # fmt: skip


def test_forecasting_order_refusals(tmp_path) -> None:
    quadruples = random_quadruples(35, 10)
    table = tie_heavy_table(36)
    with pytest.raises(TypeError, match="kgeval_observe.*TableTemporal does not have"):
        evaluate(TableTemporal(table), quadruples, [], "raw", observe="single-step")
    with pytest.raises(ValueError, match="observe must be one of"):
        evaluate(TableTemporal(table), quadruples, [], "raw", observe="online")
    with pytest.raises(ValueError, match="reveal times to the model twice"):
        evaluate(Forecaster(table), quadruples, [], "raw", progress_path=tmp_path / "progress.pt")


def test_all_with_a_progress_file_keeps_one_and_removes_it(tmp_path) -> None:
    quadruples = random_quadruples(37, 30)
    filters = overlapping_filters(38, quadruples)
    table = tie_heavy_table(39)
    path = tmp_path / "progress.pt"
    got = evaluate(TableTemporal(table), quadruples, filters, "all", progress_path=path, save_every=0)
    assert list(tmp_path.iterdir()) == []
    for name, results in (("time-aware", got), ("static", got.static), ("raw", got.raw)):
        assert_same_ranks(results.records, temporal_reference_ranks(table, table, quadruples, filters, name))


def field_inputs(table: torch.Tensor, quadruples: torch.Tensor, filters: list[torch.Tensor], setting: str):
    """Per side: the (n, E) score rows of the tasks, their answers, and the (m, 2) (row, entity) pairs the field
    overwrites under ``setting`` -- built from Python sets of the known quadruples, as the field's code does."""
    known = {tuple(q) for q in torch.cat([quadruples, *filters]).tolist()}
    static = {q[:3] for q in known}
    rows = quadruples.tolist()
    out = {}
    for side in ("head", "tail"):
        scores = torch.stack([table[:, r, t, tau] if side == "head" else table[h, r, :, tau] for h, r, t, tau in rows])
        answers = quadruples[:, 0 if side == "head" else 2]
        others = []
        for i, (h, r, t, tau) in enumerate(rows):
            for e in range(E):
                candidate = (e, r, t, tau) if side == "head" else (h, r, e, tau)
                hit = {"time-aware": candidate in known, "static": candidate[:3] in static, "raw": False}[setting]
                if hit and e != int(answers[i]):
                    others.append((i, e))
        out[side] = (scores, answers, torch.tensor(others, dtype=torch.long).view(-1, 2))
    return out


@pytest.mark.parametrize("setting", SETTINGS)
def test_the_fields_sort_based_ranking_agrees_on_tie_free_scores_and_lies_between_with_ties(setting: str) -> None:
    """The field's procedure (overwrite the other known answers with -1e7, torch.sort, position of the answer;
    tests/helpers/field_ranking.py) equals kgeval's ranks where no score ties, lies between the optimistic and
    pessimistic ranks where they do, and TLogic's strictly-higher count is the optimistic rank."""
    quadruples = random_quadruples(40, 60)
    filters = overlapping_filters(41, quadruples)
    for table in (torch.randn((E, R, E, T), generator=torch.Generator().manual_seed(42)), tie_heavy_table(43)):
        records = evaluate(TableTemporal(table), quadruples, filters, setting).records
        by_side = ranks_by_side(records)
        for side, (scores, answers, others) in field_inputs(table, quadruples, filters, setting).items():
            masked = field_ranking.filtered_scores(scores, answers, others)
            sort_rank = field_ranking.sort_rank(masked, answers).numpy()
            optimistic, pessimistic = by_side[side]["optimistic"], by_side[side]["pessimistic"]
            np.testing.assert_array_equal(field_ranking.strictly_higher_rank(masked, answers).numpy(), optimistic)
            assert np.all((optimistic <= sort_rank) & (sort_rank <= pessimistic))
            if not bool(torch.any(table.diff(dim=2) == 0)):  # tie-free: all three agree
                np.testing.assert_array_equal(sort_rank, optimistic)
                np.testing.assert_array_equal(optimistic, pessimistic)


@pytest.mark.parametrize("setting", SETTINGS)
def test_tgbs_evaluator_on_each_querys_own_negatives(setting: str) -> None:
    """TGB's Evaluator, given each query's positive score and its negatives (every entity not removed by the
    filter), per query and averaged as TGB's scripts do: kgeval's realistic MRR and hits@10."""
    tgb = pytest.importorskip("tgb.linkproppred.evaluate")
    quadruples = random_quadruples(44, 50)
    filters = overlapping_filters(45, quadruples)
    table = tie_heavy_table(46)
    results = evaluate(TableTemporal(table), quadruples, filters, setting)
    evaluator = tgb.Evaluator(name="tkgl-icews", k_value=10)
    mrr, hits = [], []
    for scores, answers, others in field_inputs(table, quadruples, filters, setting).values():
        for i in range(len(answers)):
            removed = set(others[others[:, 0] == i, 1].tolist()) | {int(answers[i])}
            negatives = scores[i, [e for e in range(E) if e not in removed]].numpy()
            got = evaluator.eval({"y_pred_pos": scores[i, answers[i]].numpy()[None],
                                  "y_pred_neg": negatives[None, :], "eval_metric": ["mrr"]})  # fmt: skip
            mrr.append(float(got["mrr"]))
            hits.append(float(got["hits@10"]))
    assert results["realistic.mrr"] == pytest.approx(np.mean(mrr), rel=1e-6)
    assert results["realistic.hits@10"] == pytest.approx(np.mean(hits), rel=1e-6)


def test_to_markdown_puts_the_three_settings_side_by_side() -> None:
    pytest.importorskip("tabulate")
    quadruples = random_quadruples(47, 40)
    filters = overlapping_filters(48, quadruples)
    table = torch.randn((E, R, E, T), generator=torch.Generator().manual_seed(49))
    every = evaluate(TableTemporal(table), quadruples, filters, "all")
    frame = every.headline_table()
    assert list(frame.columns) == ["time-aware", "static", "raw"]
    for setting, got in (("time-aware", every), ("static", every.static), ("raw", every.raw)):
        assert frame.loc["MRR", setting] == got["both.realistic.mrr"]
        assert frame.loc["Hits@10", setting] == got["both.realistic.hits@10"]
    markdown = every.to_markdown()
    assert markdown.splitlines()[0].split("|")[2:5] == ["   time-aware ", "   static ", "    raw "]
    assert list(every.static.headline_table().columns) == ["both", "head", "tail"]  # one setting: the sides
