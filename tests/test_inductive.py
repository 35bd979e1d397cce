"""Inductive link prediction in kgeval's own API: a model of kgeval's inductive protocol
(:mod:`kgeval.adapters.inductive`) is ranked against the entities of the graph of the mode it is given, task for
task as the brute-force reference ranks its score table of that graph, on random graphs with heavy ties, across
batch and slice sizes, through its methods and through its query/candidate form; ids outside the mode's graph are
errors; the inductive loader's ids, drops and notes."""

from __future__ import annotations

import gzip
import warnings
from pathlib import Path

import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval.adapters import scoring_view
from kgeval.adapters.inductive import ModeBound, ModeBoundQueryCandidate
from kgeval.datasets import load_inductive_dataset
from kgeval.datasets.inductive import is_inductive_folder
from kgeval.exceptions import FastPathWarning, UnseenLabelsWarning
from tests.helpers.ranks import assert_same_ranks
from tests.helpers.reference import reference_ranks

SIZES = {"training": 31, "validation": 23, "testing": 23}
RELATIONS, DIM = 4, 3


class TwoGraphs(torch.nn.Module):
    """kgeval's inductive protocol: entity vectors per graph (the validation and testing modes share the inference
    graph, as in PyKEEN), relations shared; entries in {-1, 0, 1}, so scores are small integers (heavy ties, exact in
    any summation order)."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)

        def table(rows: int) -> torch.nn.Parameter:
            return torch.nn.Parameter(torch.randint(-1, 2, (rows, DIM), generator=generator).float())

        self.training_graph, self.inference, self.relations = (table(SIZES["training"]), table(SIZES["testing"]),
                                                               table(RELATIONS))  # fmt: skip
        self.num_relations = RELATIONS

    def entities(self, mode: str) -> torch.Tensor:
        return self.training_graph if mode == "training" else self.inference

    def kgeval_num_entities(self, mode: str) -> int:
        return SIZES[mode]

    def score_t(self, hr_batch: torch.Tensor, *, tails: torch.Tensor | None = None, mode: str) -> torch.Tensor:
        table = self.entities(mode)
        query = table[hr_batch[:, 0]] * self.relations[hr_batch[:, 1]]
        return query @ (table if tails is None else table[tails]).T

    def score_h(self, rt_batch: torch.Tensor, *, heads: torch.Tensor | None = None, mode: str) -> torch.Tensor:
        table = self.entities(mode)
        query = self.relations[rt_batch[:, 0]] * table[rt_batch[:, 1]]
        return query @ (table if heads is None else table[heads]).T

    def table(self, mode: str) -> torch.Tensor:
        """(E, R, E) scores of every triple of the mode's graph, for the reference."""
        entities = self.entities(mode).detach()
        return torch.einsum("hd,rd,td->hrt", entities, self.relations.detach(), entities)


class TwoGraphsWithForm(TwoGraphs):
    """The same scores through the query/candidate form with a mode (the fast path)."""

    kgeval_similarity = "dot"

    def kgeval_query(self, batch: torch.Tensor, target: str, *, mode: str) -> torch.Tensor:
        table = self.entities(mode)
        if target == "tail":
            return table[batch[:, 0]] * self.relations[batch[:, 1]]
        return self.relations[batch[:, 0]] * table[batch[:, 1]]

    def kgeval_candidates(self, target: str, *, mode: str) -> torch.Tensor:
        return self.entities(mode)


def random_triples(count: int, entities: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randint(0, entities, (count,), generator=generator),
                        torch.randint(0, RELATIONS, (count,), generator=generator),
                        torch.randint(0, entities, (count,), generator=generator)], dim=1)  # fmt: skip


@pytest.mark.parametrize("model_class", [TwoGraphs, TwoGraphsWithForm])
@pytest.mark.parametrize(("batch_size", "slice_size"), [(None, None), (1, 5), (7, 11), (64, 23)])
@pytest.mark.parametrize("mode", ["training", "testing"])
def test_ranks_equal_the_reference_over_the_modes_graph(model_class, batch_size, slice_size, mode) -> None:
    model = model_class(seed=3)
    entities = SIZES[mode]
    triples = random_triples(60, entities, seed=1)
    known = random_triples(120, entities, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FastPathWarning)  # the form, where there is one, is used
        results = RankBasedEvaluator(batch_size=batch_size, slice_size=slice_size).evaluate(
            model, triples, additional_filter_triples=known, mode=mode, use_tqdm=False)  # fmt: skip
    expected = reference_ranks(model.table(mode), triples, [known])
    assert_same_ranks(results.records, expected)
    optimistic, pessimistic = expected["both"]["optimistic"], expected["both"]["pessimistic"]
    assert (pessimistic - optimistic).max() >= 3  # heavy ties really occur


def test_the_view_binds_the_mode_and_keeps_the_form() -> None:
    plain, with_form = scoring_view(TwoGraphs(), "testing"), scoring_view(TwoGraphsWithForm(), "validation")
    assert type(plain) is ModeBound and plain.num_entities == SIZES["testing"] and plain.num_relations == RELATIONS
    assert type(with_form) is ModeBoundQueryCandidate and with_form.kgeval_candidates("tail").shape == (23, DIM)
    assert scoring_view(TwoGraphs(), "training").num_entities == SIZES["training"]


def test_modes_and_ids_are_checked() -> None:
    model = TwoGraphs()
    triples = random_triples(10, SIZES["testing"], seed=4)
    evaluator = RankBasedEvaluator()
    with pytest.raises(ValueError, match="mode must be None \\(transductive\\) or one of"):
        evaluator.evaluate(model, triples, mode="inference", use_tqdm=False)
    beyond = triples.clone()
    beyond[6, 0] = SIZES["testing"]  # a training-graph id with no entity in the inference graph
    with pytest.raises(ValueError, match="row 6"):
        evaluator.evaluate(model, beyond, mode="testing", use_tqdm=False)
    with pytest.raises(ValueError, match="additional_filter_triples"):
        evaluator.evaluate(model, triples, additional_filter_triples=beyond, mode="testing", use_tqdm=False)
    with pytest.raises(TypeError, match="has no kgeval_num_entities\\(mode\\)"):
        evaluator.evaluate(torch.nn.Linear(2, 2), triples, mode="testing", use_tqdm=False)

    class Broken(TwoGraphs):
        def kgeval_num_entities(self, mode: str) -> int:
            return 0

    with pytest.raises(ValueError, match="kgeval_num_entities\\('testing'\\) must be a positive int"):
        evaluator.evaluate(Broken(), triples, mode="testing", use_tqdm=False)


# -- the loader --------------------------------------------------------------------------------------------------


def write(folder: Path, files: dict[str, list[tuple[str, str, str]]], compress: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in files.items():
        text = "".join("\t".join(row) + "\n" for row in rows)
        if compress:
            (folder / f"{name}.txt.gz").write_bytes(gzip.compress(text.encode()))
        else:
            (folder / f"{name}.txt").write_text(text)
    return folder


def test_the_loader_numbers_each_graph_and_reports_what_it_drops(tmp_path: Path) -> None:
    folder = write(tmp_path / "ind", {
        "train": [("b", "likes", "a"), ("a", "knows", "c"), ("shared", "likes", "a")],
        "inference": [("y", "likes", "x"), ("x", "knows", "z"), ("shared", "knows", "x"), ("x", "hates", "y")],
        "inference_validation": [("x", "likes", "z"), ("q", "likes", "x")],
        "inference_test": [("z", "knows", "y"), ("y", "hates", "z")],
    })  # fmt: skip
    assert is_inductive_folder(folder) and not is_inductive_folder(tmp_path)
    with pytest.warns(UnseenLabelsWarning) as caught:
        data = load_inductive_dataset(folder)
    assert data.training_entity_to_id == {"a": 0, "b": 1, "c": 2, "shared": 3}
    assert data.relation_to_id == {"knows": 0, "likes": 1}  # the training graph's: "hates" is none of them
    assert data.inference_entity_to_id == {"shared": 0, "x": 1, "y": 2, "z": 3}
    assert data.train.tolist() == [[1, 1, 0], [0, 0, 2], [3, 1, 0]]
    assert data.inference.tolist() == [[2, 1, 1], [1, 0, 3], [0, 0, 1]]  # (x, hates, y) dropped
    assert data.valid.tolist() == [[1, 1, 3]] and data.test.tolist() == [[3, 0, 2]]  # q: no entity of the graph
    message = str(caught[0].message)
    assert "inference.txt.gz: 1 triples dropped (1 of them by a relation the training graph lacks" in message
    assert "inference_validation.txt.gz: 1 triples dropped (0 of them" in message
    summary = data.summary()
    assert "entities in both graphs: 1" in summary and "inference_test.txt.gz: 1 triples dropped" in summary
    test = data.evaluation_kwargs("test")
    assert test["mode"] == "testing" and test["additional_filter_triples"][1] is data.valid
    assert data.evaluation_kwargs("valid")["mode"] == "validation"
    with pytest.raises(ValueError, match="split must be 'valid' or 'test'"):
        data.evaluation_kwargs("train")


def test_the_loader_refuses_a_folder_without_its_files(tmp_path: Path) -> None:
    write(tmp_path / "half", {"train": [("a", "r", "b")], "inference": [("x", "r", "y")]}, compress=False)
    with pytest.raises(FileNotFoundError, match="no inference_validation file"):
        load_inductive_dataset(tmp_path / "half")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_inductive_dataset(tmp_path / "nothing")


def test_the_loaders_factories_are_pykeens(tmp_path: Path) -> None:
    pytest.importorskip("pykeen")
    folder = write(tmp_path / "tiny", {
        "train": [("b", "likes", "a"), ("a", "knows", "c")], "inference": [("y", "likes", "x"), ("x", "knows", "z")],
        "inference_validation": [("x", "likes", "z")], "inference_test": [("z", "knows", "y")]})  # fmt: skip
    factories = load_inductive_dataset(folder).to_pykeen(create_inverse_triples=True)
    assert factories["transductive_training"].create_inverse_triples
    assert factories["inductive_inference"].entity_to_id == {"x": 0, "y": 1, "z": 2}
    assert factories["inductive_testing"].mapped_triples.tolist() == [[2, 0, 1]]
    assert not factories["inductive_testing"].create_inverse_triples


# -- the relation-context baseline, the audit, the command line ---------------------------------------------------


def tiny_inductive(folder: Path) -> Path:
    """A training graph and a disjoint inference graph over the same four relations, with a test triple also in
    the inference graph and one also in the validation triples."""
    return write(folder, {
        "train": [("a", "p", "b"), ("b", "q", "c"), ("c", "p", "a"), ("a", "r", "c"), ("d", "s", "a"), ("b", "p", "d")],
        "inference": [("x", "p", "y"), ("y", "q", "z"), ("z", "p", "x"), ("x", "r", "z"), ("w", "s", "x"),
                      ("y", "p", "w")],
        "inference_validation": [("x", "p", "z"), ("w", "p", "y")],
        "inference_test": [("y", "q", "z"), ("x", "p", "z"), ("z", "r", "w"), ("w", "s", "y")],
    })  # fmt: skip


def test_the_relation_context_model_is_the_mean_of_its_edges(tmp_path: Path) -> None:
    from kgeval.models import RelationContextDistMult

    data = load_inductive_dataset(tiny_inductive(tmp_path / "tiny"))
    model = RelationContextDistMult.for_dataset(data, dim=5, seed=0)
    for mode, graph, count in (("training", data.train, 4), ("testing", data.inference, 4)):
        vectors = model.entity_vectors(mode)
        for entity in range(count):
            edges = [model.outgoing[r] for h, r, t in graph.tolist() if h == entity]
            edges += [model.incoming[r] for h, r, t in graph.tolist() if t == entity]
            torch.testing.assert_close(vectors[entity], torch.stack(edges).mean(0), rtol=1e-6, atol=1e-7)
    triples = data.test
    with torch.no_grad():
        scores = model.score_t(triples[:, :2], mode="testing")
        table = torch.einsum("hd,rd,td->hrt", model.entity_vectors("testing"), model.relation_weights,
                             model.entity_vectors("testing"))  # fmt: skip
        torch.testing.assert_close(scores, table[triples[:, 0], triples[:, 1]])
        torch.testing.assert_close(model.score_hrt(triples, mode="testing"), table[tuple(triples.T)])
    results = RankBasedEvaluator().evaluate(model, **data.evaluation_kwargs("test"), use_tqdm=False)
    expected = reference_ranks(table, triples, data.evaluation_kwargs("test")["additional_filter_triples"])
    assert_same_ranks(results.records, expected)


def filter_size_by_loops(known: list[tuple[int, int, int]], evaluated: list[tuple[int, int, int]]) -> float:
    """Mean other known answers per head and tail task, by explicit loops over distinct known triples."""
    facts = set(known)
    removed = []
    for h, r, t in evaluated:
        removed.append(sum(1 for (a, b, c) in facts if a == h and b == r and c != t))
        removed.append(sum(1 for (a, b, c) in facts if b == r and c == t and a != h))
    return sum(removed) / len(removed)


def test_the_audit_card_counts_as_plain_loops_do(tmp_path: Path) -> None:
    from kgeval.audit.inductive import audit_inductive_dataset

    folder = tiny_inductive(tmp_path / "tiny")
    data = load_inductive_dataset(folder)
    report = audit_inductive_dataset(data)
    rows = {split: [tuple(row) for row in getattr(data, split).tolist()] for split in ("inference", "valid", "test")}
    assert report.test_in_inference == len(set(rows["test"]) & set(rows["inference"])) == 1
    assert report.test_in_valid == len(set(rows["test"]) & set(rows["valid"])) == 1
    assert report.filter_sizes["test"] == pytest.approx(
        filter_size_by_loops(rows["inference"] + rows["valid"] + rows["test"], rows["test"])
    )
    assert report.filter_sizes["valid"] == pytest.approx(filter_size_by_loops(rows["inference"] + rows["valid"],
                                                                              rows["valid"]))  # fmt: skip
    assert report.shared_entities == 0 and report.sizes == {"train": 6, "inference": 6, "valid": 2, "test": 4}
    assert report.rule_mrr is not None and 0 < report.rule_mrr <= 1
    card = report.to_markdown()
    assert "The two graphs are disjoint" in card and "| inference_test | 0 | 0 |" in card
    assert '"format": "kgeval-inductive-audit-1"' in report.to_json()


def test_the_command_line_on_an_inductive_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kgeval.cli import main

    folder = tiny_inductive(tmp_path / "tiny")
    assert main(["demo", "--dataset", str(folder), "--epochs", "2", "--dim", "4", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "Dataset tiny (inductive): training graph 4 entities / 6 triples, inference graph 4 entities" in out
    assert "== test: 4 triples over the inference graph's 4 entities, filtered by inference graph + valid + test" in out
    assert "Rule-only baseline on test" in out
    assert main(["audit", "--dataset", str(folder)]) == 0
    assert "## Inductive evaluation audit: tiny" in capsys.readouterr().out
    (tmp_path / "ranks.csv").write_text("head,relation,tail,side,optimistic,pessimistic\n")
    assert main(["audit", "--dataset", str(folder), "--ranks", str(tmp_path / "ranks.csv")]) == 2
    error = capsys.readouterr().err
    assert "a rank table is audited on triples (or quadruples); on inductive data pass --checkpoint" in error
    assert main(["demo", "--dataset", str(folder), "--save-checkpoint", str(tmp_path / "m.pt")]) == 2
    assert "does not apply to the inductive demo yet" in capsys.readouterr().err


def test_early_stopping_on_an_inductive_validation_split(tmp_path: Path) -> None:
    """kgeval's EarlyStopper takes the inductive evaluation arguments as they come (mode included)."""
    from kgeval import EarlyStopper
    from kgeval.models import RelationContextDistMult
    from kgeval.models.training import train_epoch

    data = load_inductive_dataset(tiny_inductive(tmp_path / "tiny"))
    model = RelationContextDistMult.for_dataset(data, dim=4, seed=0)
    stopper = EarlyStopper(RankBasedEvaluator(), model, **data.evaluation_kwargs("valid"), patience=1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    train_epoch(model, data.train, optimizer, batch_size=4, num_negatives=3, generator=torch.Generator().manual_seed(1))
    assert not stopper.should_stop(1)
    direct = RankBasedEvaluator().evaluate(model, **data.evaluation_kwargs("valid"), use_tqdm=False)
    assert stopper.history[0].value == direct["mrr"]
    assert stopper.history[0].results["both.realistic.count"] == 2 * len(data.valid)


# -- what a review found ------------------------------------------------------------------------------------------
def test_a_first_inference_triple_of_new_labels_is_read_with_header_false(tmp_path: Path) -> None:
    """An inference graph's first triple may hold a relation the training graph lacks and two entities seen once:
    "auto" takes it for a header, with a warning whose advice (header=False) the loader now accepts -- and then
    the triple is read, dropped for its relation, and counted (PyKEEN's entity ids)."""
    folder = write(tmp_path / "first", {
        "train": [("a", "p", "b"), ("b", "q", "c"), ("c", "p", "a")],
        "inference": [("u", "NEWREL", "v"), ("x", "p", "y"), ("y", "q", "z"), ("z", "p", "x")],
        "inference_validation": [("x", "q", "y")],
        "inference_test": [("w", "OTHER", "k"), ("y", "p", "x")],
    }, compress=False)  # fmt: skip
    with pytest.warns(UserWarning, match="Pass header=False"):
        guessed = load_inductive_dataset(folder)
    assert guessed.inference_entity_to_id == {"x": 0, "y": 1, "z": 2}  # the first lines taken for headers
    with pytest.warns(UnseenLabelsWarning):
        data = load_inductive_dataset(folder, header=False)
    assert data.inference_entity_to_id == {"u": 0, "v": 1, "x": 2, "y": 3, "z": 4}
    assert data.dropped["inference"] == {"entity": 0, "relation": 1}
    assert data.dropped["inference_test"] == {"entity": 0, "relation": 1}


def test_an_inference_graph_emptied_by_the_drops_is_refused(tmp_path: Path) -> None:
    """Every inference triple of a relation the training graph lacks: refused at loading, naming why (it loaded,
    and the model then failed on "the validation graph must be a non-empty (n, 3) LongTensor")."""
    folder = write(tmp_path / "empty", {
        "train": [("a", "p", "b"), ("b", "p", "c")],
        "inference": [("x", "new", "y"), ("y", "new", "z")],
        "inference_validation": [("x", "p", "y")],
        "inference_test": [("y", "p", "z")],
    })  # fmt: skip
    message = "the inference graph holds no triple once those of relations the training graph lacks are dropped"
    with pytest.raises(ValueError, match=f"{message} \\(2 dropped\\)"):
        load_inductive_dataset(folder)


def test_the_card_names_shared_entities_and_counts_drops(tmp_path: Path) -> None:
    """The card's sentence on shared entities read "The two graphs are 3 entities are in both graphs"; the shared
    and dropped counts equal a count by hand."""
    from kgeval.audit.inductive import audit_inductive_dataset

    folder = write(tmp_path / "shared", {
        "train": [("a", "p", "b"), ("b", "q", "c"), ("s1", "p", "s2")],
        "inference": [("s1", "p", "x"), ("x", "q", "s2"), ("y", "p", "x"), ("x", "r", "y")],
        "inference_validation": [("x", "p", "y")],
        "inference_test": [("y", "q", "s1"), ("x", "p", "gone")],
    })  # fmt: skip
    with pytest.warns(UnseenLabelsWarning):
        data = load_inductive_dataset(folder)
    report = audit_inductive_dataset(data, rule_baseline=False)
    assert report.shared_entities == len({"a", "b", "c", "s1", "s2"} & {"s1", "s2", "x", "y"}) == 2
    assert data.dropped["inference"] == {"entity": 0, "relation": 1}  # (x, r, y): r is no training relation
    assert data.dropped["inference_test"] == {"entity": 1, "relation": 0}  # "gone" is no inference entity
    card = report.to_markdown()
    assert "The two graphs share 2 entities: a model may have trained on them." in card
    assert "| inference | 1 | 0 |" in card and "| inference_test | 0 | 1 |" in card


def test_an_inductive_protocol_model_without_a_mode_is_refused() -> None:
    """Without mode=, kgeval's inductive model was ranked among its training graph's entities, reading inference
    ids as training ones (MRR 0.313 for 0.247 in a review's probe); a count given as a NumPy integer is a count."""
    triples = random_triples(10, SIZES["testing"], seed=4)
    with pytest.raises(ValueError, match="pass mode='training', 'validation' or 'testing'"):
        RankBasedEvaluator().evaluate(TwoGraphs(), triples, use_tqdm=False)

    class NumpyCount(TwoGraphs):
        def kgeval_num_entities(self, mode: str) -> int:
            import numpy as np

            return np.int64(super().kgeval_num_entities(mode))  # type: ignore[return-value]

    expected = RankBasedEvaluator().evaluate(TwoGraphs(), triples, mode="testing", use_tqdm=False)
    assert RankBasedEvaluator().evaluate(NumpyCount(), triples, mode="testing", use_tqdm=False) == expected


def test_the_command_line_honours_or_refuses_each_option_on_inductive_data(tmp_path: Path, capsys) -> None:
    """--targets was ignored (both sides ranked), --full printed nothing more, --progress-file and --unseen were
    ignored without a word, and the --json document lacked kgeval_version and protocol: now --targets and --full
    are honoured, the others refused in one line, and the document has the keys the README promises."""
    import json

    from kgeval.cli import main
    from kgeval.models import RelationContextDistMult

    folder = tiny_inductive(tmp_path / "tiny")
    data = load_inductive_dataset(folder)
    model = RelationContextDistMult.for_dataset(data, dim=4, seed=0)
    torch.save(model, tmp_path / "m.pt")
    common = ["evaluate", "--checkpoint", str(tmp_path / "m.pt"), "--trust-checkpoint", "--dataset", str(folder)]
    assert main([*common, "--json", "--targets", "tail"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert {"kgeval_version", "source", "protocol", "metrics"} <= set(document)
    assert document["source"]["targets"] == ["tail"] and document["protocol"]["setting"] == "filtered"
    assert not any(key.startswith("head.") for key in document["metrics"])
    expected = RankBasedEvaluator().evaluate(model, **data.evaluation_kwargs("test"), targets=("tail",),
                                             use_tqdm=False)  # fmt: skip
    assert document["metrics"]["tail.realistic.inverse_harmonic_mean_rank"] == expected.get_metric("tail.mrr")
    assert main([*common, "--full", "--no-progress"]) == 0
    assert "inverse_harmonic_mean_rank" in capsys.readouterr().out
    for option in (["--progress-file", str(tmp_path / "p.pt")], ["--unseen", "drop"]):
        assert main([*common, *option]) == 2
        assert f"{option[0]} is not available for inductive data yet" in capsys.readouterr().err


def test_the_validation_filter_choice_adds_the_test_triples_to_validation_only(tmp_path: Path) -> None:
    """ILPC's validation split filtered as ULTRA's code filters it ("inference+test"): the filters are the inference
    graph and the test triples, the ranks equal the brute-force reference over those filters, and the test split is
    filtered the same either way."""
    from kgeval.models import RelationContextDistMult

    data = load_inductive_dataset(tiny_inductive(tmp_path / "tiny"))
    model = RelationContextDistMult.for_dataset(data, dim=5, seed=0)
    with torch.no_grad():
        table = torch.einsum("hd,rd,td->hrt", model.entity_vectors("testing"), model.relation_weights,
                             model.entity_vectors("testing"))  # fmt: skip
    for choice in ("inference", "inference+test"):
        kwargs = data.evaluation_kwargs("valid", validation_filter=choice)  # type: ignore[arg-type]
        known = [data.inference] + ([data.test] if choice == "inference+test" else [])
        assert all(torch.equal(a, b) for a, b in zip(kwargs["additional_filter_triples"], known, strict=True))
        results = RankBasedEvaluator().evaluate(model, **kwargs, use_tqdm=False)
        assert_same_ranks(results.records, reference_ranks(table, data.valid, known))
    test_filters = data.evaluation_kwargs("test", validation_filter="inference+test")["additional_filter_triples"]
    assert len(test_filters) == 2 and test_filters[1] is data.valid
    with pytest.raises(ValueError, match="validation_filter must be one of"):
        data.evaluation_kwargs("valid", validation_filter="test")  # type: ignore[arg-type]
