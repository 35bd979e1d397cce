"""Per-example rows (kgeval.variants.examples): ranks and filtered top-k predictions from one pass, checked against a
brute force written here over the model's own dense ``score_t`` / ``score_h`` (the known triples masked), against
the evaluator's records and ``predict_top_k``; the one-pass claim by counting the model's scoring calls."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval.datasets import load_tsv_dataset, shared_data_dir
from kgeval.models import DistMult
from kgeval.predict import predict_top_k
from kgeval.variants.examples import rank_examples, write_examples
from tests.test_classification_all_pairs import NUM_ENTITIES, NUM_RELATIONS, random_triples
from tests.test_classification_all_pairs import tie_heavy_model as all_pairs_model

SIZES = [(1, 1), (3, 4), (5, None), (None, 7), (None, None)]


def tie_heavy_model(seed: int = 0, model_class: type[DistMult] = DistMult) -> DistMult:
    """The all-pairs tests' DistMult of -1 / 0 / 1 embeddings (scores tie a lot), as an instance of ``model_class``."""
    model = model_class(NUM_ENTITIES, NUM_RELATIONS, dim=3, seed=seed)
    model.load_state_dict(all_pairs_model(seed).state_dict())
    return model


def brute_force(model, triples, known, k):
    """{(side, row): (optimistic, pessimistic, num_candidates, top-k ids, top-k scores)} from dense scores."""
    known_set = {tuple(t) for t in torch.cat([triples, *known]).tolist()}
    expected = {}
    for row, (h, r, t) in enumerate(triples.tolist()):
        for side in ("head", "tail"):
            with torch.no_grad():
                if side == "tail":
                    scores = model.score_t(torch.tensor([[h, r]]))[0].tolist()
                    answer, completed = t, [(h, r, e) for e in range(len(scores))]
                else:
                    scores = model.score_h(torch.tensor([[r, t]]))[0].tolist()
                    answer, completed = h, [(e, r, t) for e in range(len(scores))]
            candidates = [e for e in range(len(scores)) if e == answer or completed[e] not in known_set]
            truth = scores[answer]
            above = sum(scores[e] > truth for e in candidates if e != answer)
            equal = sum(scores[e] == truth for e in candidates if e != answer)
            ranked = sorted(candidates, key=lambda e: (-scores[e], e))[:k]
            expected[side, row] = (1 + above, 1 + above + equal, len(candidates), ranked, [scores[e] for e in ranked])
    return expected


def rows_by_task(frame):
    return {(str(row.side), int(row.task_index)): row for row in frame.itertuples()}


@pytest.mark.parametrize(("batch_size", "slice_size"), SIZES)
@pytest.mark.parametrize("seed", [0, 1])
def test_ranks_and_top_k_equal_brute_force_the_evaluator_and_predict_top_k(batch_size, slice_size, seed):
    model = tie_heavy_model(seed)
    triples, known = random_triples(12, seed), [random_triples(30, seed + 100)]
    triples = torch.cat([triples, triples[:2]])  # repeated triples are rows of their own, as evaluator tasks
    k = 6
    frame = rank_examples(model, triples, filter_triples=known, k=k, batch_size=batch_size, slice_size=slice_size,
                          use_tqdm=False)  # fmt: skip
    assert len(frame) == 2 * len(triples)
    assert frame["side"].astype(str).tolist() == ["head"] * len(triples) + ["tail"] * len(triples)
    got = rows_by_task(frame)
    for (side, row), (optimistic, pessimistic, candidates, ids, scores) in brute_force(model, triples, known,
                                                                                       k).items():  # fmt: skip
        example = got[side, row]
        assert (example.head, example.relation, example.tail) == tuple(triples[row].tolist())
        assert (example.optimistic, example.pessimistic, example.num_candidates) == (optimistic, pessimistic,
                                                                                     candidates)  # fmt: skip
        assert example.realistic == (optimistic + pessimistic) / 2
        assert example.predicted == ids and example.predicted_scores == scores
        assert example.correct == (pessimistic == 1)
    results = RankBasedEvaluator().evaluate(model, triples, additional_filter_triples=known, batch_size=batch_size,
                                            slice_size=slice_size, use_tqdm=False)  # fmt: skip
    records = results.ranks_df()
    for record in records.itertuples():
        example = got[str(record.side), int(record.task_index)]
        assert (example.optimistic, example.pessimistic, example.num_candidates) == (
            record.optimistic, record.pessimistic, record.num_candidates)  # fmt: skip
    assert frame["correct"].mean() == pytest.approx(results.get_metric("both.realistic.hits_at_1"), abs=1e-12)


def test_top_k_equals_predict_top_k_with_the_other_known_answers_filtered():
    model = tie_heavy_model(2)
    triples, known = random_triples(10, 2), random_triples(40, 102)
    frame = rows_by_task(rank_examples(model, triples, filter_triples=known, k=5, batch_size=3, slice_size=4,
                                       use_tqdm=False))  # fmt: skip
    everything = torch.cat([triples, known])
    for row, triple in enumerate(triples):
        others = everything[~(everything == triple).all(dim=1)]  # the true answer stays a candidate
        for side, query, target in (("tail", triple[[0, 1]], "tail"), ("head", triple[[1, 2]], "head")):
            ids, scores = predict_top_k(model, query[None], k=5, target=target, filter_triples=others)
            found = ids[0] >= 0
            assert frame[side, row].predicted == ids[0][found].tolist()
            assert frame[side, row].predicted_scores == scores[0][found].tolist()


def test_correct_is_the_tie_free_top_one():
    """A constant model ties every candidate: no row is correct, though the id order lists answer 0 first."""

    class Constant(DistMult):
        def score_t(self, hr_batch, tails=None):
            width = NUM_ENTITIES if tails is None else tails.numel()
            return torch.zeros(hr_batch.shape[0], width)

        score_h = score_t

    triples = torch.tensor([[1, 0, 0], [0, 1, 2]])
    frame = rank_examples(Constant(NUM_ENTITIES, NUM_RELATIONS, dim=2), triples, k=3, fast_path=False, use_tqdm=False)
    tail = frame[frame["side"] == "tail"].iloc[0]
    assert tail.predicted[0] == 0 and tail.optimistic == 1 and tail.pessimistic == NUM_ENTITIES
    assert not frame["correct"].any()


class CountingDistMult(DistMult):
    """Records each scoring call: (side, number of queries, candidate ids as a tuple or None for all)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = []

    def score_t(self, hr_batch, tails=None):
        self.calls.append(("tail", hr_batch.shape[0], None if tails is None else tuple(tails.tolist())))
        return super().score_t(hr_batch, tails)

    def score_h(self, rt_batch, heads=None):
        self.calls.append(("head", rt_batch.shape[0], None if heads is None else tuple(heads.tolist())))
        return super().score_h(rt_batch, heads)


def test_one_slice_scores_each_batch_once():
    model = tie_heavy_model(3, CountingDistMult)
    triples = random_triples(11, 3)
    rank_examples(
        model,
        triples,
        k=4,
        batch_size=4,
        slice_size=NUM_ENTITIES,
        fast_path=False,
        check_fast_path=False,
        use_tqdm=False,
    )  # no stability probe: only the pass's calls
    everything = (None, tuple(range(NUM_ENTITIES)))
    assert all(ids in everything for _, _, ids in model.calls)
    assert [(side, size) for side, size, _ in model.calls] == [(side, size) for side in ("head", "tail")
                                                               for size in (4, 4, 3)]  # fmt: skip


@pytest.mark.parametrize(("batch_size", "slice_size"), [(4, 5), (1, 3), (11, 7)])
def test_with_slices_only_the_answer_tiles_are_scored_twice(batch_size, slice_size):
    """Per batch: every slice once, and the slices holding its true answers once more before them -- save the
    one the first pass read last, which the scorer still holds when the pass over every tile starts there."""
    model = tie_heavy_model(4, CountingDistMult)
    triples = random_triples(11, 4)
    frame = rank_examples(model, triples, k=4, batch_size=batch_size, slice_size=slice_size, fast_path=False,
                          check_fast_path=False, use_tqdm=False)  # fmt: skip
    slices = [tuple(range(start, min(start + slice_size, NUM_ENTITIES)))
              for start in range(0, NUM_ENTITIES, slice_size)]  # fmt: skip
    expected = []
    for side, column in (("head", 0), ("tail", 2)):
        for start in range(0, len(triples), batch_size):
            batch = triples[start : start + batch_size]
            holding = sorted({int(answer) // slice_size for answer in batch[:, column]})
            first_pass = [(side, len(batch), slices[j]) for j in holding]
            every = [(side, len(batch), slices[j]) for j in [holding[-1]] + [j for j in range(len(slices))
                                                                             if j != holding[-1]]]  # fmt: skip
            expected += first_pass + every[1:]
    assert model.calls == expected
    reference = rank_examples(tie_heavy_model(4), triples, k=4, use_tqdm=False)
    columns = ["optimistic", "pessimistic", "num_candidates", "predicted", "predicted_scores"]
    assert frame[columns].equals(reference[columns])


def test_a_nan_anywhere_in_a_rows_scores_is_refused():
    class NaNAt(DistMult):
        column = 5

        def score_t(self, hr_batch, tails=None):
            scores = super().score_t(hr_batch, tails).clone()
            ids = torch.arange(NUM_ENTITIES) if tails is None else tails
            scores[:, ids == self.column] = float("nan")
            return scores

    model = NaNAt(NUM_ENTITIES, NUM_RELATIONS, dim=3, seed=0)
    filtered = torch.tensor([[0, 0, 1], [0, 0, 5]])  # the NaN is a filtered candidate's: still the rank rule's error
    for triples in (filtered[:1], filtered[1:]):  # a filtered candidate's NaN, then the true answer's
        for slice_size in (None, 2):
            with pytest.raises(ValueError, match="NaN"):
                rank_examples(model, triples, filter_triples=filtered, targets="tail", slice_size=slice_size,
                              fast_path=False, use_tqdm=False)  # fmt: skip
            with pytest.raises(ValueError, match="NaN"):
                RankBasedEvaluator(fast_path=False).evaluate(model, triples, additional_filter_triples=filtered,
                                                             targets=["tail"], slice_size=slice_size,
                                                             use_tqdm=False)  # fmt: skip


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"k": 0}, ValueError, "k must be a positive integer"),
        ({"k": NUM_ENTITIES + 1}, ValueError, "above the number of entities"),
        ({"targets": ("relation",)}, ValueError, "targets must be"),
        ({"triples": torch.tensor([[0, 0, NUM_ENTITIES]])}, ValueError, "out of range"),
        ({"triples": torch.tensor([[0.0, 0.0, 1.0]])}, TypeError, "integer dtype"),
        ({"triples": torch.zeros((0, 3), dtype=torch.long)}, ValueError, "nothing to evaluate"),
        ({"filter_triples": torch.tensor([[-1, 0, 0]])}, ValueError, "out of range"),
        ({"batch_size": 0}, ValueError, "batch_size"),
    ],
)
def test_bad_input_is_refused(kwargs, error, message):
    arguments = {"triples": random_triples(3, 5), **kwargs}
    with pytest.raises(error, match=message):
        rank_examples(tie_heavy_model(), arguments.pop("triples"), use_tqdm=False, **arguments)


def test_k_may_exceed_a_rows_filtered_candidates():
    triples = torch.tensor([[0, 0, 1]])
    known = torch.stack([torch.zeros(NUM_ENTITIES, dtype=torch.long), torch.zeros(NUM_ENTITIES, dtype=torch.long),
                         torch.arange(NUM_ENTITIES)], dim=1)  # fmt: skip
    frame = rank_examples(tie_heavy_model(), triples, filter_triples=known, k=NUM_ENTITIES, targets="tail",
                          use_tqdm=False)  # fmt: skip
    row = frame.iloc[0]
    assert row.predicted == [1] and row.num_candidates == 1 and row.correct  # alone among its candidates


def test_progress_bar_counts_the_tasks():
    output = io.StringIO()
    rank_examples(tie_heavy_model(), random_triples(7, 6), k=2, batch_size=3, slice_size=5,
                  tqdm_kwargs={"disable": False, "file": output, "leave": True})  # fmt: skip
    assert "14/14" in output.getvalue() and "Ranking examples" in output.getvalue()


LABELS = {"entity_labels": [f"e{i}" for i in range(NUM_ENTITIES)],
          "relation_labels": {f"r{i}": i for i in range(NUM_RELATIONS)}}  # fmt: skip


def labelled_frame():
    return rank_examples(tie_heavy_model(1), random_triples(6, 7), k=3, use_tqdm=False, **LABELS)


def test_labels_name_the_ids():
    frame = labelled_frame()
    for row in frame.itertuples():
        assert (row.head_label, row.relation_label, row.tail_label) == (f"e{row.head}", f"r{row.relation}",
                                                                        f"e{row.tail}")  # fmt: skip
        assert row.predicted_labels == [f"e{entity}" for entity in row.predicted]


def expected_records(frame):
    return [{name: (str(value) if name == "side" else value.item() if isinstance(value, np.generic) else value)
             for name, value in row.items()} for row in frame.to_dict(orient="records")]  # fmt: skip


def test_write_examples_as_json_lines_round_trips(tmp_path):
    frame = labelled_frame()
    path = write_examples(tmp_path / "examples.jsonl", frame)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == expected_records(frame)


def test_write_examples_as_csv_round_trips(tmp_path):
    frame = labelled_frame()
    read = pd.read_csv(write_examples(tmp_path / "examples.csv", frame))
    assert list(read.columns) == list(frame.columns)
    for name in ("predicted", "predicted_scores", "predicted_labels"):
        read[name] = [json.loads(text) for text in read[name]]
    assert expected_records(read) == expected_records(frame)


def test_write_examples_refuses_other_suffixes_before_writing(tmp_path):
    for name in ("examples.parquet", "examples.json", "examples"):
        with pytest.raises(ValueError, match=r"suffix must be one of \('.jsonl', '.csv'\)"):
            write_examples(tmp_path / name, labelled_frame())
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="folder"):
        write_examples(tmp_path / "missing" / "examples.csv", labelled_frame())


SHARED = shared_data_dir()


@pytest.mark.skipif(SHARED is None or not (SHARED / "nations").is_dir(), reason="no shared Nations data")
def test_nations_rows_equal_the_evaluators_records():
    assert SHARED is not None
    dataset = load_tsv_dataset(SHARED / "nations")
    model = DistMult(dataset.num_entities, dataset.num_relations, dim=16, seed=0)
    kwargs = dataset.evaluation_kwargs("test")
    frame = rank_examples(model, kwargs["mapped_triples"], filter_triples=kwargs["additional_filter_triples"], k=5,
                          slice_size=4, entity_labels=dataset.entity_to_id, use_tqdm=False)  # fmt: skip
    results = RankBasedEvaluator().evaluate(model, **kwargs, use_tqdm=False)
    records = results.ranks_df().sort_values(["side", "task_index"], kind="stable").reset_index(drop=True)
    ours = frame.sort_values(["side", "task_index"], kind="stable").reset_index(drop=True)
    for column in ("head", "relation", "tail", "optimistic", "pessimistic", "realistic", "num_candidates"):
        assert ours[column].tolist() == records[column].tolist(), column
    assert ours["correct"].mean() == pytest.approx(results.get_metric("both.realistic.hits_at_1"), abs=1e-12)
    assert all(row.predicted[0] == (row.tail if row.side == "tail" else row.head)
               for row in ours.itertuples() if row.correct)  # fmt: skip
    assert not any(math.isnan(score) for scores in ours["predicted_scores"] for score in scores)
