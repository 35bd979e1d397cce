"""Bad input fails at the door with one clear message (never a raw torch / Python error), and leaves nothing
half-updated."""

from __future__ import annotations

import contextlib
import gzip
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from kgeval import MetricAccumulator, RankBasedEvaluator
from kgeval.cli import main
from kgeval.models import DistMult
from tests.helpers.graphs import FullScoreTableModel, TableModel, quantised_table, random_graph

GRAPH = random_graph(0, num_entities=8, num_relations=2, num_triples=10, num_filter=5)
TABLE = quantised_table(np.random.default_rng(0), 8, 2)


def evaluate(model=None, triples=None, **kwargs):
    model = TableModel(TABLE) if model is None else model
    triples = GRAPH.triples if triples is None else triples
    return RankBasedEvaluator().evaluate(model, triples, use_tqdm=False, **kwargs)


def raises(error: type[Exception], message: str):
    return pytest.raises(error, match=f"^{re.escape(message)}$")


def test_triples_must_be_a_tensor() -> None:
    with raises(TypeError, "mapped_triples must be a torch.Tensor of shape (n, 3), got list"):
        evaluate(triples=[[0, 0, 1]])


def test_triples_must_be_integer() -> None:
    with raises(TypeError, "mapped_triples must have an integer dtype, got torch.float32"):
        evaluate(triples=GRAPH.triples.float())


def test_triples_must_have_three_columns() -> None:
    with raises(ValueError, "mapped_triples must have shape (n, 3), got (10, 2)"):
        evaluate(triples=GRAPH.triples[:, :2])


def test_entity_id_out_of_range_names_the_row() -> None:
    triples = GRAPH.triples.clone()
    triples[4, 2] = 8
    message = (
        f"mapped_triples row 4 = {triples[4].tolist()} has an id out of range (entities in [0, 8), relations in [0, 2))"
    )
    with raises(ValueError, message):
        evaluate(triples=triples)


def test_negative_relation_names_the_row() -> None:
    triples = GRAPH.triples.clone()
    triples[0, 1] = -1
    with raises(
        ValueError,
        f"mapped_triples row 0 = {triples[0].tolist()} has an id out of range "
        "(entities in [0, 8), relations in [0, 2))",
    ):
        evaluate(triples=triples)


def test_filter_triples_are_checked() -> None:
    bad = torch.tensor([[0, 0, 99]])
    with raises(
        ValueError,
        "additional_filter_triples[1] row 0 = [0, 0, 99] has an id out of range "
        "(entities in [0, 8), relations in [0, 2))",
    ):
        evaluate(additional_filter_triples=[GRAPH.triples, bad])


def test_filter_triples_type() -> None:
    with raises(TypeError, "additional_filter_triples must be a tensor, a sequence of tensors or None, got int"):
        evaluate(additional_filter_triples=3)


def test_empty_evaluation_set() -> None:
    with raises(ValueError, "mapped_triples is empty: there is nothing to evaluate"):
        evaluate(triples=torch.zeros((0, 3), dtype=torch.long))


@pytest.mark.parametrize("ks", [(0,), (1, -3), (2.5,), "10", (), (True,)])
def test_ks_must_be_positive_integers(ks) -> None:
    with pytest.raises(ValueError, match=r"^ks must be a (non-empty )?sequence of positive integers, got "):
        RankBasedEvaluator(ks=ks)


@pytest.mark.parametrize(("name", "value"), [("batch_size", 0), ("slice_size", -1), ("batch_size", 1.5)])
def test_sizes_must_be_positive(name, value) -> None:
    with raises(ValueError, f"{name} must be a positive integer or None, got {value!r}"):
        RankBasedEvaluator(**{name: value})


@pytest.mark.parametrize("targets", [("left",), (), "both"])
def test_unknown_targets(targets) -> None:
    with raises(ValueError, f"targets must be a non-empty subset of ('head', 'tail', 'relation'), got {targets!r}"):
        evaluate(targets=targets)


def test_a_module_with_score_t_only_is_told_which_method_is_missing() -> None:
    """An nn.Module has torch's forward stub, which raises "missing the required forward function" when called: it
    is no triple scorer, so the message names the missing score_h and the targets that would work."""

    class TailsOnly(torch.nn.Module):
        num_entities = 8

        def score_t(self, batch):
            return torch.zeros(batch.shape[0], 8)

    with pytest.raises(TypeError, match=r"^TailsOnly has no score_h\(batch\) .* pass targets=\('tail',\)"):
        evaluate(model=TailsOnly())


def test_model_without_scoring_method() -> None:
    class NoHead:
        num_entities = 8

        def score_t(self, batch):
            return torch.zeros(batch.shape[0], 8)

    with raises(
        TypeError,
        "NoHead has no score_h(batch) to rank heads with, and does not score whole triples (score_hrt(hrt_batch), "
        "forward(h, r, t), or evaluate(..., score_fn=...)); it has score_t: pass targets=('tail',) to rank only "
        "those sides",
    ):
        evaluate(model=NoHead())
    # all scores tie: every tail task has pessimistic rank C and optimistic rank 1
    results = evaluate(model=NoHead(), targets=("tail",))
    assert results.get_metric("tail.count") == 10
    assert results.get_metric("tail.optimistic.mr") == 1.0


def test_num_entities_required() -> None:
    class Anonymous:
        def score_t(self, batch):
            return torch.zeros(batch.shape[0], 8)

        def score_h(self, batch):
            return torch.zeros(batch.shape[0], 8)

    with raises(ValueError, "num_entities is not given and Anonymous has no num_entities (num_nodes, n_ent) attribute"):
        evaluate(model=Anonymous())
    assert evaluate(model=Anonymous(), num_entities=8).get_metric("count") == 20


def test_model_output_shape() -> None:
    class Wrong(FullScoreTableModel):
        def score_t(self, hr_batch):
            return super().score_t(hr_batch)[:, :-1]

    # the batch holds the distinct queries, so its size is not the number of triples
    with pytest.raises(ValueError, match=r"^model\.score_t returned shape \((\d+), 7\), expected \(\1, 8\)$"):
        evaluate(model=Wrong(TABLE))


def test_model_output_dtype() -> None:
    class Integer(FullScoreTableModel):
        def score_h(self, rt_batch):
            return super().score_h(rt_batch).long()

    with raises(TypeError, "model.score_h must return a floating-point tensor, got torch.int64"):
        evaluate(model=Integer(TABLE))


def test_nan_scores_name_triple_and_side() -> None:
    table = TABLE.clone()
    h, r, t = GRAPH.triples[3].tolist()
    table[h, r, t] = float("nan")  # scored by every head task of (?, r, t) and every tail task of (h, r, ?)
    # any NaN among a task's scored entities is a model defect, even at a filtered entity
    rows = [i for i, row in enumerate(GRAPH.triples.tolist()) if row[1:] == [r, t]]
    first = rows[0]
    message = (
        f"the model produced NaN scores for the head task of triple {GRAPH.triples[first].tolist()} "
        f"(row {first} of mapped_triples); {len(rows)} head task(s) affected"
    )
    with raises(ValueError, message):
        evaluate(model=TableModel(table))


def test_restriction_outside_raises_unless_dropped() -> None:
    _h, _r, t = GRAPH.triples[0].tolist()
    allowed = {e for e in range(8) if e != t}
    message = (
        f"mapped_triples row {_first_outside(allowed)} = {GRAPH.triples[_first_outside(allowed)].tolist()} has a "
        "head or tail outside restrict_entities_to; pass drop_outside_restriction=True to skip such triples"
    )
    with raises(ValueError, message):
        evaluate(restrict_entities_to=allowed)
    assert evaluate(restrict_entities_to=allowed, drop_outside_restriction=True).get_metric("count") > 0


def _first_outside(allowed: set[int]) -> int:
    return next(i for i, (h, _, t) in enumerate(GRAPH.triples.tolist()) if h not in allowed or t not in allowed)


@pytest.mark.parametrize(
    ("ids", "error", "message"),
    [
        ([], ValueError, "restrict_entities_to must not be empty"),
        ([0, 8], ValueError, "restrict_entities_to holds id 8 outside [0, 8)"),
        (torch.tensor([0.5]), TypeError, "restrict_entities_to must hold integer ids, got dtype torch.float32"),
        (3, TypeError, "restrict_entities_to must be a tensor, list or set of entity ids, got int"),
    ],
)
def test_restriction_ids(ids, error, message) -> None:
    with raises(error, message):
        evaluate(restrict_entities_to=ids)


def test_accumulator_update_checks_and_leaves_state_unchanged() -> None:
    acc = MetricAccumulator(ks=(1,))
    acc.update(torch.tensor([1]), torch.tensor([2]), torch.tensor([3]))
    before = acc.state_dict()
    with raises(ValueError, "ranks must satisfy 1 <= optimistic <= pessimistic <= num_candidates for every task"):
        acc.update(torch.tensor([2]), torch.tensor([1]), torch.tensor([3]))
    with raises(TypeError, "pessimistic must be an integer tensor, got torch.float32"):
        acc.update(torch.tensor([1]), torch.tensor([1.0]), torch.tensor([3]))
    with raises(ValueError, "num_candidates must have shape (n,) like optimistic (1,), got (2,)"):
        acc.update(torch.tensor([1]), torch.tensor([1]), torch.tensor([3, 3]))
    after = acc.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)


def test_accumulator_merge_checks() -> None:
    with raises(ValueError, "cannot merge accumulators with different ks: (1,) and (1, 3)"):
        MetricAccumulator(ks=(1,)).merge(MetricAccumulator(ks=(1, 3)))
    with raises(TypeError, "can only merge a MetricAccumulator, got dict"):
        MetricAccumulator(ks=(1,)).merge({})


def test_accumulator_load_state_dict_checks() -> None:
    with raises(ValueError, "state must be a dict produced by MetricAccumulator.state_dict()"):
        MetricAccumulator().load_state_dict({"x": torch.zeros(1)})
    state = MetricAccumulator(ks=(1,)).state_dict()
    del state["sum:count"]
    with raises(ValueError, "state sums do not match: missing ['sum:count'], extra []"):
        MetricAccumulator().load_state_dict(state)


def test_meta_device_triples() -> None:
    with pytest.raises(ValueError, match="^mapped_triples is on the meta device: it holds no ids$"):
        evaluate(triples=GRAPH.triples.to("meta"))


def test_a_model_on_the_meta_device() -> None:
    with torch.device("meta"):
        model = DistMult(8, 2, dim=4)
    with pytest.raises(ValueError, match="the model is on the meta device"):
        evaluate(model)


class Float8Model(TableModel):
    def score_t(self, hr_batch, tails=None):
        return super().score_t(hr_batch, tails).to(torch.float8_e4m3fn)

    def score_h(self, rt_batch, heads=None):
        return super().score_h(rt_batch, heads).to(torch.float8_e4m3fn)


def test_float8_scores_rank_like_their_float32_values() -> None:
    """Every float8 value is a float32 value, so the widened scores rank exactly like the model's own."""
    ours = evaluate(Float8Model(TABLE))
    widened = TABLE.to(torch.float8_e4m3fn).float()
    reference = evaluate(TableModel(widened))
    for column in ("optimistic", "pessimistic", "num_candidates"):
        np.testing.assert_array_equal(ours.records[column], reference.records[column])


def test_targets_none() -> None:
    with raises(ValueError, "targets must be a non-empty subset of ('head', 'tail', 'relation'), got None"):
        evaluate(targets=None)


def test_numpy_integers_are_integers() -> None:
    results = evaluate(num_entities=np.int64(8), batch_size=np.int32(3))
    assert results.get_metric("count") == 20
    with pytest.raises(ValueError, match="num_entities must be a positive integer, got True"):
        evaluate(num_entities=True)


# -- the command line: one line on stderr, exit status 2, never a traceback -------------------------------------
def _dataset(folder: Path, train: str = "a\tr\tb\nb\tr\tc\n", valid: str = "a\tr\tc\n", test: str = "c\tr\ta\n"):
    folder.mkdir(exist_ok=True)
    for split, text in (("train", train), ("valid", valid), ("test", test)):
        (folder / f"{split}.txt").write_text(text)
    return folder


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("corrupt gzip", "corrupt or truncated gzip data"),
        ("empty split", "the valid split of data is empty"),
        ("unwritable checkpoint", "cannot write"),
    ],
)
def test_demo_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, expected: str):
    folder = _dataset(tmp_path / "data", valid="" if case == "empty split" else "a\tr\tc\n")
    argv = ["demo", "--dataset", str(folder), "--epochs", "1", "--dim", "4", "--no-progress"]
    if case == "corrupt gzip":
        (folder / "test.txt").unlink()
        (folder / "test.txt.gz").write_bytes(gzip.compress(b"c\tr\ta\n" * 500)[:40])
    if case == "unwritable checkpoint":  # a missing folder is made: a file in its way is what cannot be written
        (tmp_path / "no").write_text("a file")
        argv += ["--save-checkpoint", str(tmp_path / "no" / "such" / "model.pt")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("kgeval demo: error: ") and expected in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_strat_with_a_bad_checkpoint_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "model.pt"
    path.write_bytes(b"\x80\x04not a checkpoint")
    assert main(["strat", "--dataset", "nations", "--checkpoint", str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kgeval strat: error: ") and "is not a kgeval checkpoint" in err
    assert err.count("\n") == 1


def test_a_metric_that_needs_records_says_so() -> None:
    results = RankBasedEvaluator(keep_records=False).evaluate(TableModel(TABLE), GRAPH.triples, use_tqdm=False)
    with pytest.raises(KeyError, match=r"needs the per-task rank records.*keep_records=True"):
        results["median_rank"]


def test_num_entities_that_disagrees_with_the_model_names_both() -> None:
    with pytest.raises(ValueError, match=r"^num_entities=6, but the model has num_entities=8"):
        evaluate(num_entities=6)


def test_comparison_and_interval_read_as_one_line() -> None:
    from kgeval.analysis.stats import compare

    a = evaluate(TableModel(TABLE))
    b = evaluate(TableModel(TABLE.flip(2)))
    text = str(compare(a, b, "mrr", n_resamples=200))
    assert text.startswith("both.realistic.inverse_harmonic_mean_rank: A - B = ")
    assert "95% CI [" in text and "p = " in text and "\n" not in text
    assert str(a.confidence_interval("mrr", n_resamples=200)).startswith("both.realistic.inverse_harmonic_mean_rank = ")


def test_scores_on_another_device_than_the_models_are_refused_naming_both() -> None:
    """A model whose parameters are on one device and whose scores come back on another (a table left behind on the
    CPU) is told so, not counted across devices."""
    from kgeval._checks import check_scores

    scores = torch.zeros(2, 3)
    assert check_scores(scores, (2, 3), "score_t", torch.device("cpu")) is scores
    with pytest.raises(ValueError, match=r"model\.score_t returned scores on cpu, but kgeval evaluates the model on "
                                         r"cuda:1, where its parameters are"):  # fmt: skip
        check_scores(scores, (2, 3), "score_t", torch.device("cuda", 1))


def test_triton_launches_on_the_tensors_device() -> None:
    """Triton launches on the current CUDA device: kgeval makes it the tensors' (a model on cuda:1)."""
    pytest.importorskip("triton")
    from kgeval._engine.kernels.triton_counts import on_device

    assert isinstance(on_device(torch.zeros(1)), contextlib.nullcontext)
    context = on_device(torch.empty(1, device="meta").as_subclass(torch.Tensor))  # not CUDA: nothing to set
    assert isinstance(context, contextlib.nullcontext)
    cuda = type("OnCuda", (), {"device": torch.device("cuda", 1)})()
    launch = on_device(cuda)
    assert isinstance(launch, torch.cuda.device) and launch.idx == 1
