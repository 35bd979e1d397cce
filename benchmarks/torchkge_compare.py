"""Every TorchKGE link-prediction model: kgeval beside TorchKGE's own LinkPredictionEvaluator on the same model object
and triples -- how kgeval scored each model, the times, their ratio and whether the ranks agree, from one run.

For each model of :data:`MODELS` a seeded (``torch.manual_seed(0)`` before its construction), untrained TorchKGE
model of dimension ``--dim`` is built over the dataset's entities and relations, and its first ``--triples`` test
triples are ranked, both sides, filtered by the evaluated triples (as TorchKGE filters the facts of the graph it
evaluates):

- ``torchkge``: ``LinkPredictionEvaluator(model, kg).evaluate(b_size=--batch)`` under ``torch.no_grad()``, kg the
  TorchKGE ``KnowledgeGraph`` of the triples; its filtered ranks (#(scores >= the true score)) are kgeval's
  pessimistic ranks. TransH / TransR / TransD cache their projected entities between evaluations until a
  ``scoring_function`` call (a training step) resets them: the cache is reset before each call, so each call
  projects, as an evaluation after training does;
- ``kgeval``: ``kgeval.RankBasedEvaluator().evaluate(model, triples)``, the default sizes, fast path on;
- with ``--scoring-function``, also ``RankBasedEvaluator(fast_path=False)``: the model's own ``scoring_function``.

Each is the best of ``--repeats`` calls, in this one process, on the same model object. The dimensions: ``--dim``
is TorchKGE's ``emb_dim`` (ComplEx: its real and imaginary parts each; ANALOGY: scalar, real and imaginary parts
share it, ``scalar_share`` 0.5); TransR and TransD take ``ent_emb_dim`` = dim, ``rel_emb_dim`` = dim // 2; ConvKB
has 32 filters. The ``form`` column names how kgeval scored the model: ``query/candidate`` (the GEMM / L1 fast
path), ``relation table`` (per-relation candidate tables) or ``own methods`` (its ``scoring_function``), with the
FastPathWarning's reason, or for a model kgeval has no form for, why (:data:`NO_FORM`). ``ranks_differ`` counts
the ranking tasks whose kgeval pessimistic rank is not TorchKGE's filtered rank.

Usage::

    python benchmarks/torchkge_compare.py --dataset umls                  # every model, d = 100
    python benchmarks/torchkge_compare.py --dataset FB15k-237 --triples 1000 --dim 200 --repeats 1
    python benchmarks/torchkge_compare.py --models TransE-L2 --scoring-function --dataset FB15k-237 --triples 1000
    python benchmarks/torchkge_compare.py --dataset nations --dim 8 --triples 30 --repeats 1 --json rows.json
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _harness import best_time, format_table, load_average, machine, peer_comparison, scored_through
from torchkge import models as torchkge_models
from torchkge.data_structures import KnowledgeGraph
from torchkge.evaluation import LinkPredictionEvaluator

from kgeval import RankBasedEvaluator

#: row name -> (TorchKGE class in ``torchkge.models``, its keyword arguments besides the entity / relation counts,
#: given the dimension); TransE-L2 first (the single-model comparison this script began as)
MODELS: dict[str, tuple[str, Callable[[int], dict[str, Any]]]] = {
    "TransE-L2": ("TransEModel", lambda dim: {"emb_dim": dim, "dissimilarity_type": "L2"}),
    "TransE-L1": ("TransEModel", lambda dim: {"emb_dim": dim, "dissimilarity_type": "L1"}),
    "TransH": ("TransHModel", lambda dim: {"emb_dim": dim}),
    "TransR": ("TransRModel", lambda dim: {"ent_emb_dim": dim, "rel_emb_dim": dim // 2}),
    "TransD": ("TransDModel", lambda dim: {"ent_emb_dim": dim, "rel_emb_dim": dim // 2}),
    "TorusE-L1": ("TorusEModel", lambda dim: {"emb_dim": dim, "dissimilarity_type": "L1"}),
    "TorusE-torus_L1": ("TorusEModel", lambda dim: {"emb_dim": dim, "dissimilarity_type": "torus_L1"}),
    "TorusE-torus_L2": ("TorusEModel", lambda dim: {"emb_dim": dim, "dissimilarity_type": "torus_L2"}),
    "TorusE-torus_eL2": ("TorusEModel", lambda dim: {"emb_dim": dim, "dissimilarity_type": "torus_eL2"}),
    "DistMult": ("DistMultModel", lambda dim: {"emb_dim": dim}),
    "HolE": ("HolEModel", lambda dim: {"emb_dim": dim}),
    "RESCAL": ("RESCALModel", lambda dim: {"emb_dim": dim}),
    "ComplEx": ("ComplExModel", lambda dim: {"emb_dim": dim}),
    "ANALOGY": ("AnalogyModel", lambda dim: {"emb_dim": dim}),
    "ConvKB": ("ConvKBModel", lambda dim: {"emb_dim": dim, "n_filters": 32}),
}
#: rows kgeval has no form for, and why (kgeval.adapters.torchkge's docstring): scored through ``scoring_function``
NO_FORM: dict[str, str] = {
    "TorusE-torus_L1": "torus distance min(abs x, 1 - abs x) per coordinate: no norm of query - candidate",
    "TorusE-torus_L2": "torus distance min(abs x, 1 - abs x)² per coordinate: no norm of query - candidate",
    "TorusE-torus_eL2": "torus distance 1 - cos(2πx) per coordinate: no norm of query - candidate",
    "ConvKB": "a convolution and a nonlinearity over (h, r, t) together",
}
#: classes of ``torchkge.models`` (0.17.7) without a row, and why
NOT_BUILT: dict[str, str] = {
    "Model": "abstract interface (no scoring_function)",
    "TranslationModel": "abstract interface (no scoring_function)",
    "BilinearModel": "abstract interface (no scoring_function)",
}
#: TorchKGE's evaluation batch for models whose ``inference_scoring_function`` holds a (batch x entities x ...)
#: tensor per call: ConvKB's feature maps, (batch x entities x filters x dim) floats
TORCHKGE_BATCH: dict[str, int] = {"ConvKB": 4}
#: the relative difference under which two MRRs are equal
MRR_TOLERANCE = 1e-6


def build_model(name: str, dim: int, num_entities: int, num_relations: int) -> torchkge_models.Model:
    """The seeded TorchKGE model of row ``name`` (:data:`MODELS`), in eval mode."""
    class_name, kwargs = MODELS[name]
    torch.manual_seed(0)
    cls = getattr(torchkge_models, class_name)
    return cls(n_entities=num_entities, n_relations=num_relations, **kwargs(dim)).eval()


def knowledge_graph(test: torch.Tensor, num_entities: int, num_relations: int) -> KnowledgeGraph:
    """TorchKGE's graph of the evaluated triples (its evaluator filters its facts)."""
    return KnowledgeGraph(
        kg={"heads": test[:, 0], "tails": test[:, 2], "relations": test[:, 1]},
        ent2ix={str(i): i for i in range(num_entities)},
        rel2ix={str(i): i for i in range(num_relations)},
    )


def torchkge_side(model: torchkge_models.Model, kg: KnowledgeGraph, batch: int, repeats: int) -> dict[str, Any]:
    """TorchKGE's evaluator on ``model``: best time of ``repeats`` calls, the MRR of its filtered ranks and the
    ranks, head ranks then tail ranks in triple order."""

    def run() -> torch.Tensor:
        if hasattr(model, "evaluated_projections"):
            model.evaluated_projections = False  # as after a training step: the call projects the entities
        evaluator = LinkPredictionEvaluator(model, kg)
        with torch.no_grad():
            evaluator.evaluate(b_size=batch, verbose=False)
        return torch.cat([evaluator.filt_rank_true_heads, evaluator.filt_rank_true_tails])

    seconds, ranks = best_time(run, repeats)
    return {"seconds": seconds, "mrr": float((1 / ranks.double()).mean()), "ranks": ranks.numpy()}


def kgeval_side(model: torchkge_models.Model, test: torch.Tensor, repeats: int, fast_path: bool) -> dict[str, Any]:
    """kgeval on ``model`` (filtered by the evaluated triples): best time of ``repeats`` calls, its pessimistic MRR,
    its pessimistic ranks (heads then tails, in triple order) and the form it scored the model through."""
    evaluator = RankBasedEvaluator(fast_path=fast_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        seconds, results = best_time(lambda: evaluator.evaluate(model, test, use_tqdm=False), repeats)
    return {"seconds": seconds, "mrr": float(results.get_metric("both.pessimistic.mrr")),
            "ranks": pessimistic_ranks(results), "form": scored_through(model, caught)}  # fmt: skip


def pessimistic_ranks(results: Any) -> np.ndarray:
    """kgeval's per-task pessimistic ranks, heads then tails, each side in triple order (TorchKGE's layout)."""
    records = results.records
    sides = []
    for side in (0, 1):
        chosen = records["side"] == side
        order = np.argsort(records["task_index"][chosen], kind="stable")
        sides.append(records["pessimistic"][chosen][order])
    return np.concatenate(sides)


def form_of(name: str, kgeval: dict[str, Any]) -> str:
    """The form column: how kgeval scored the model, with :data:`NO_FORM`'s reason where it has none."""
    form = kgeval["form"]
    if form == "own methods" and name in NO_FORM:
        return f"own methods (no form: {NO_FORM[name]})"
    return form


def agree(theirs: dict[str, Any], ours: dict[str, Any]) -> tuple[bool, int]:
    """(whether the MRRs are equal within :data:`MRR_TOLERANCE`, how many ranks differ)."""
    equal = abs(theirs["mrr"] - ours["mrr"]) <= MRR_TOLERANCE * max(1.0, abs(theirs["mrr"]))
    return equal, int((theirs["ranks"] != ours["ranks"]).sum())


def measure(name: str, args: argparse.Namespace, data: Any, test: torch.Tensor, kg: KnowledgeGraph) -> dict[str, Any]:
    """One table row: model ``name`` built, ranked by TorchKGE then kgeval (and kgeval through its
    ``scoring_function`` with ``--scoring-function``); a side that raises leaves its error in ``error``."""
    class_name, kwargs = MODELS[name]
    row: dict[str, Any] = {"model": name, "torchkge_class": class_name, "kwargs": kwargs(args.dim)}
    try:
        model = build_model(name, args.dim, data.num_entities, data.num_relations)
        theirs = torchkge_side(model, kg, min(args.batch, TORCHKGE_BATCH.get(name, args.batch)), args.repeats)
        ours = kgeval_side(model, test, args.repeats, fast_path=True)
        own = kgeval_side(model, test, args.repeats, fast_path=False) if args.scoring_function else None
    except Exception as error:  # one model's failure is a row of the table, not the end of the run
        return {**row, "form": "-", "error": f"{type(error).__name__}: {error}"[:200]}
    finally:
        model = None
        gc.collect()
    row.update(form=form_of(name, ours), torchkge_s=theirs["seconds"], kgeval_s=ours["seconds"])
    row.update(speedup=theirs["seconds"] / ours["seconds"], torchkge_mrr=theirs["mrr"], kgeval_mrr=ours["mrr"])
    row["mrr_equal"], row["ranks_differ"] = agree(theirs, ours)
    if own is not None:
        row["kgeval_scoring_function_s"] = own["seconds"]
        row["scoring_function_speedup"] = theirs["seconds"] / own["seconds"]
        row["scoring_function_mrr_equal"], row["scoring_function_ranks_differ"] = agree(theirs, own)
    return row


def uncovered() -> list[str]:
    """Model classes ``torchkge.models`` exports that neither :data:`MODELS` nor :data:`NOT_BUILT` names (a newer
    TorchKGE's)."""
    named = {class_name for class_name, _ in MODELS.values()} | set(NOT_BUILT)
    exported = {name for name, value in vars(torchkge_models).items()
                if isinstance(value, type) and issubclass(value, torchkge_models.Model)}  # fmt: skip
    return sorted(exported - named)


def cell(value: Any) -> str:
    """A table cell: floats to four significant digits, pipes escaped."""
    if isinstance(value, float):
        return "-" if math.isnan(value) else f"{value:.4g}"
    return str(value).replace("|", "\\|")


def print_table(rows: list[dict[str, Any]], scoring_function: bool) -> None:
    """The rows as a Markdown table (a failed row: its error in the form column)."""
    columns = ["model", "form", "torchkge_s", "kgeval_s", "speedup", "torchkge_mrr", "kgeval_mrr", "mrr_equal",
               "ranks_differ"]  # fmt: skip
    if scoring_function:
        columns += ["kgeval_scoring_function_s", "scoring_function_speedup", "scoring_function_mrr_equal"]
    table = [[cell(row["error"] if column == "form" and "error" in row else row.get(column, math.nan))
              for column in columns] for row in rows]  # fmt: skip
    print(format_table(table, columns))


def options(parser: argparse.ArgumentParser) -> None:
    """This script's options besides peer_comparison's (--dataset, --triples, --dim, --repeats)."""
    parser.add_argument("--batch", type=int, default=256, help="TorchKGE's evaluation batch size")
    parser.add_argument("--models", default="all", help=f"comma-separated, of: {', '.join(MODELS)}; or 'all'")
    parser.add_argument("--scoring-function", action="store_true",
                        help="also time kgeval through the models' own scoring_function (fast_path=False)")  # fmt: skip
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")


def main() -> None:
    args, data, test = peer_comparison(__doc__, options)
    names = list(MODELS) if args.models == "all" else [name.strip() for name in args.models.split(",")]
    unknown = [name for name in names if name not in MODELS]
    if unknown:
        raise SystemExit(f"unknown models {unknown}; known: {', '.join(MODELS)}")
    print(f"{machine()}; load {load_average()}")
    print(f"{data.name}: {len(test)} test triples, {data.num_entities} entities, {data.num_relations} relations, "
          f"d = {args.dim}, filtered by the evaluated triples, best of {args.repeats}", flush=True)  # fmt: skip
    kg = knowledge_graph(test, data.num_entities, data.num_relations)
    rows = []
    for name in names:
        rows.append(measure(name, args, data, test, kg))
        print(json.dumps(rows[-1]), flush=True)
    print_table(rows, args.scoring_function)
    print("; ".join(f"{name}: {why}" for name, why in NOT_BUILT.items()))
    if uncovered():
        print(f"torchkge.models classes without a row: {', '.join(uncovered())}")
    print(f"load at the end: {load_average()}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
