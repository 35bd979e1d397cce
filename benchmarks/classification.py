"""Triple classification: kgeval beside PyKEEN's and TorchKGE's own evaluators -- time and peak memory, one run,
the same model and triples for each pair.

Two protocols:

- **PyKEEN's all pairs**: every (query, entity) pair of the evaluated triples' queries is an instance, a known
  triple (evaluated, train or valid) positive. ``pykeen.evaluation.ClassificationEvaluator`` beside kgeval's
  drop-in ``kgeval.integrations.pykeen.ClassificationEvaluator`` (exact, streaming), on a seeded untrained PyKEEN
  DistMult. PyKEEN keeps every score row and a dense mask, and its ``finalize`` runs scikit-learn's
  ``confusion_matrix`` once per metric over every pair (~80-95 us per pair on CoDEx-M and FB15k-237), so it gets the
  first ``--pykeen-triples`` test triples; kgeval runs on the same ones -- their 66 numbers (``to_flat_dict()``) are
  compared: the agreement line -- and on the whole test split, by default through the model's own scoring (as
  PyKEEN scores, ties included) and with ``fast_path=True`` (a matrix multiply).
- **TorchKGE's** (Socher et al.): one negative per validation and test triple, each relation's threshold its
  highest validation-negative score. ``torchkge.evaluation.TripletClassificationEvaluator`` beside
  ``kgeval.variants.classify_triples(..., convention="torchkge")`` on a seeded untrained TorchKGE DistMultModel,
  with the same negatives: kgeval's ``draw_negatives`` (uniform, seeded, none a known triple: the positional
  strategy, TorchKGE's rule, finds none for 3 CoDEx-M validation triples) injected into TorchKGE's sampler, as
  tests/integrations/test_classification_torchkge.py lines them up. Its "pairs" are the labelled test triples
  (positives and negatives).

Usage::

    python benchmarks/classification.py                         # CoDEx-M and FB15k-237 (shared data folder)
    python benchmarks/classification.py --datasets codex-m --pykeen-triples 50 --json rows.json
    python benchmarks/classification.py --protocols torchkge --repeats 9
    python benchmarks/classification.py --quick                 # Nations (shipped), tiny: the test's run

Every evaluator runs in its own subprocess (``--worker``), so one's allocations do not hide another's: its time is
``time.perf_counter()`` around the evaluate call (data, model, negatives and evaluator built before) -- one call
for the all-pairs protocol, the best of ``--repeats`` for TorchKGE's, whose sub-second calls a co-tenant of a shared
machine can slow several-fold --, its memory the process's peak RSS (``ru_maxrss``) after the calls and its increase
over the peak before them. Ratios are kgeval's over the other evaluator's, from this one run. The whole split
through the model's own scoring is the slow part (minutes, and GiBs: a PyKEEN DistMult scores a (queries x
entities) block through a (queries x entities x d) product).
Figures: docs/measurements.md ("Triple classification").
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import contender, format_table, load_average, run_contender, run_worker

#: the default datasets (names in the shared data folder)
DATASETS = ("codex-m", "FB15k-237")
#: the protocols compared
PROTOCOLS = ("all-pairs", "torchkge")
#: PyKEEN's key of the pooled ROC-AUC
ROC_AUC = "both.area_under_the_receiver_operating_characteristic_curve"
#: seeds of the TorchKGE protocol's negatives (validation, test)
NEGATIVE_SEEDS = (1, 2)


# -- set-up (in the workers) --------------------------------------------------------------------------------------
def _data(name: str) -> Any:
    from kgeval.datasets import SHIPPED_DATASETS, load_dataset, load_shipped_dataset

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FB15k-237's labels unseen in train: kept, as PyKEEN's factory keeps them
        if name.lower() in SHIPPED_DATASETS:
            return load_shipped_dataset(name)
        return load_dataset(name, kind="triples")


def _first(data: Any, triples: str) -> torch.Tensor:
    return data.test if triples == "all" else data.test[: int(triples)]


def _pykeen_distmult(data: Any, dim: int) -> Any:
    from pykeen.models import DistMult
    from pykeen.triples import CoreTriplesFactory

    factory = CoreTriplesFactory.create(data.train, num_entities=data.num_entities, num_relations=data.num_relations)
    return DistMult(triples_factory=factory, embedding_dim=dim, random_seed=0)


def _all_pairs(triples: torch.Tensor, num_entities: int) -> int:
    """The pairs of PyKEEN's protocol: every distinct query of each side times every entity."""
    return sum(len(torch.unique(triples[:, columns], dim=0)) * num_entities for columns in ([1, 2], [0, 1]))


def _timed(run: Any, repeats: int = 1) -> tuple[Any, dict[str, Any]]:
    """The last value of ``repeats`` calls of ``run()``, their best wall time (and the first's, and all), and the
    process's peak RSS (MiB) after them and its increase over the peak before the first."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    times, value = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        value = run()
        times.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return value, {"seconds": min(times), "first_seconds": times[0], "times": times, "peak_rss_mib": peak,
                   "rss_increase_mib": peak - before}  # fmt: skip


def _flat(results: Any) -> dict[str, float]:
    return {str(key): float(value) for key, value in results.to_flat_dict().items()}


def _labelled_splits(data: Any) -> tuple[Any, Any]:
    """The validation and test triples with one negative each (kgeval's uniform draw, seeded; in the positives'
    order, as TorchKGE's sampler returns them)."""
    from kgeval.variants import LabelledTriples, draw_negatives

    known = [data.train, data.valid, data.test]
    splits = []
    for positives, seed in zip((data.valid, data.test), NEGATIVE_SEEDS, strict=True):
        negatives, report = draw_negatives(positives, known, data.num_entities, strategy="uniform", seed=seed)
        if report.short_positives:
            raise SystemExit(f"{report.short_positives} positives got no negative: the order TorchKGE needs is lost")
        splits.append(LabelledTriples.from_positives_and_negatives(positives, negatives))
    return splits[0], splits[1]


def _torchkge_distmult(data: Any, dim: int) -> Any:
    from torchkge.models import DistMultModel

    torch.manual_seed(0)
    return DistMultModel(dim, data.num_entities, data.num_relations)


# -- contenders ---------------------------------------------------------------------------------------------------
@contender("pykeen-all-pairs")
def pykeen_all_pairs(args: argparse.Namespace) -> dict[str, Any]:
    from pykeen.evaluation import ClassificationEvaluator

    data = _data(args.dataset)
    model, triples = _pykeen_distmult(data, args.dim), _first(data, args.triples)
    evaluator, known = ClassificationEvaluator(), [data.train, data.valid]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyKEEN's overflow and zero-division warnings
        results, figures = _timed(lambda: evaluator.evaluate(model, triples, batch_size=256, use_tqdm=False,
                                                             additional_filter_triples=known))  # fmt: skip
    return {**figures, "triples": len(triples), "pairs": _all_pairs(triples, data.num_entities),
            "metrics": _flat(results)}  # fmt: skip


@contender("kgeval-all-pairs")
def kgeval_all_pairs(args: argparse.Namespace) -> dict[str, Any]:
    from kgeval.integrations.pykeen import ClassificationEvaluator

    data = _data(args.dataset)
    model, triples = _pykeen_distmult(data, args.dim), _first(data, args.triples)
    evaluator, known = ClassificationEvaluator(fast_path=args.fast_path), [data.train, data.valid]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the top-P threshold is fitted on the evaluated labels: PyKEEN's rule
        results, figures = _timed(lambda: evaluator.evaluate(model, triples, additional_filter_triples=known))
    return {**figures, "triples": len(triples), "pairs": results.all_pairs.sides["both"].num_pairs,
            "metrics": _flat(results)}  # fmt: skip


@contender("torchkge-triples")
def torchkge_triples(args: argparse.Namespace) -> dict[str, Any]:
    from torchkge.data_structures import KnowledgeGraph
    from torchkge.evaluation import TripletClassificationEvaluator

    data = _data(args.dataset)
    valid, test = _labelled_splits(data)
    model = _torchkge_distmult(data, args.dim)
    ent2ix = {str(i): i for i in range(data.num_entities)}
    rel2ix = {str(i): i for i in range(data.num_relations)}
    graphs = [KnowledgeGraph(kg={"heads": s[:, 0], "tails": s[:, 2], "relations": s[:, 1]}, ent2ix=ent2ix,
                             rel2ix=rel2ix) for s in (data.valid, data.test)]  # fmt: skip
    evaluator = TripletClassificationEvaluator(model, *graphs)
    # the seeded negatives in place of its unseeded draw: (heads, tails) of each split's, the relations kept
    injected = {"main": valid.triples[~valid.labels], "test": test.triples[~test.labels]}
    evaluator.sampler.corrupt_kg = lambda batch_size, use_cuda, which: (injected[which][:, 0], injected[which][:, 2])
    model.eval()

    def run() -> float:
        evaluator.evaluated = False  # each call fits the thresholds again, as the first does
        with torch.no_grad():
            return float(evaluator.accuracy(b_size=args.batch))

    accuracy, figures = _timed(run, args.repeats)
    return {**figures, "triples": len(data.test), "pairs": len(test), "accuracy": accuracy,
            "thresholds": evaluator.thresholds.double().tolist()}  # fmt: skip


@contender("kgeval-triples")
def kgeval_triples(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    from kgeval.variants import classify_triples

    data = _data(args.dataset)
    valid, test = _labelled_splits(data)
    model = _torchkge_distmult(data, args.dim)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the relations whose precision is undefined (no triple predicted true)
        results, figures = _timed(lambda: classify_triples(model, valid, test, convention="torchkge"), args.repeats)
    thresholds = np.array([results.thresholds[int(r)] for r in results.relations])
    negatives = ~results.labels
    return {**figures, "triples": len(data.test), "pairs": len(test), "accuracy": results.get_metric("accuracy"),
            "thresholds": {str(r): t for r, t in results.thresholds.items()},
            "at_threshold": int(np.sum(results.scores[negatives] == thresholds[negatives]))}  # fmt: skip


# -- the parent ---------------------------------------------------------------------------------------------------
def cpu_model() -> str:
    """``lscpu``'s "Model name" (the processor's name elsewhere)."""
    try:
        done = subprocess.run(["lscpu"], capture_output=True, text=True, check=False)
        return next(line.split(":", 1)[1].strip() for line in done.stdout.splitlines() if "Model name" in line)
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine_line() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{cpu_model()}, {os.cpu_count()} cores, {memory:.0f} GiB RAM, torch {torch.__version__} "
            f"({torch.get_num_threads()} threads), PyKEEN {_version('pykeen')}, TorchKGE {_version('torchkge')}, "
            f"Python {platform.python_version()}")  # fmt: skip


def _ratio(ours: dict[str, Any], theirs: dict[str, Any] | None, key: str) -> str:
    if theirs is None or key not in ours or key not in theirs or theirs[key] <= 0:
        return "-"
    return f"{ours[key] / theirs[key]:.3g}x"


def _row(label: str, result: dict[str, Any], other: dict[str, Any] | None = None) -> list[str]:
    if "skipped" in result:
        return [label, "-", "-", "-", "-", "-", "-", "-", result["skipped"]]
    note = ""
    if "accuracy" in result:
        note = f"accuracy {result['accuracy']:.4f}"
    elif "metrics" in result:
        note = f"ROC-AUC {result['metrics'][ROC_AUC]:.4f}"
    return [label, f"{result['triples']:,}", f"{result['pairs']:,}", f"{result['seconds']:.3f}",
            f"{result['peak_rss_mib']:.0f}", f"{result['rss_increase_mib']:.0f}", _ratio(result, other, "seconds"),
            _ratio(result, other, "rss_increase_mib"), note]  # fmt: skip


def max_difference(ours: dict[str, float], theirs: dict[str, float]) -> tuple[float, str]:
    """The largest |ours - theirs| over both dicts' keys and its key (NaN beside NaN: 0; a missing key or NaN beside
    a number: inf)."""
    worst, where = 0.0, "-"
    for key in sorted(set(ours) | set(theirs)):
        a, b = ours.get(key), theirs.get(key)
        if a is None or b is None or math.isnan(a) != math.isnan(b):
            return math.inf, key
        if not math.isnan(a) and abs(a - b) > worst:
            worst, where = abs(a - b), key
    return worst, where


def _lines(pykeen: dict, ours_first: dict, ours_all: dict, fast: dict, torchkge: dict, ours_triples: dict) -> list[str]:
    """The lines printed under a dataset's table: the agreement, the headline ratios, TorchKGE's accuracy."""
    lines = []
    if "metrics" in pykeen and "metrics" in ours_first:
        difference, key = max_difference(ours_first["metrics"], pykeen["metrics"])
        lines.append(f"agreement: kgeval and PyKEEN on the first {pykeen['triples']:,} test triples, "
                     f"{len(pykeen['metrics'])} numbers: max |kgeval - PyKEEN| = {difference:.3g} ({key})")  # fmt: skip
    if "seconds" in pykeen and "seconds" in ours_first:
        lines.append(f"PyKEEN / kgeval on the same {pykeen['triples']:,} triples: "
                     f"{pykeen['seconds'] / ours_first['seconds']:.0f}x the time; RSS increase "
                     f"{pykeen['rss_increase_mib']:.0f} vs {ours_first['rss_increase_mib']:.0f} MiB")  # fmt: skip
    if "seconds" in ours_all and "seconds" in fast:
        lines.append(f"kgeval's whole split, the model's own scoring / the fast path: "
                     f"{ours_all['seconds'] / fast['seconds']:.1f}x the time")  # fmt: skip
    if "accuracy" in torchkge and "accuracy" in ours_triples:
        theirs, ours = torchkge["accuracy"], ours_triples["accuracy"]
        same = all(float(ours_triples["thresholds"][str(r)]) == torchkge["thresholds"][r]
                   for r in map(int, ours_triples["thresholds"]))  # fmt: skip
        ties, n = ours_triples["at_threshold"], ours_triples["pairs"]
        firsts = f"{torchkge['first_seconds']:.3f} / {ours_triples['first_seconds']:.3f} s"
        medians = f"{statistics.median(torchkge['times']):.3f} / {statistics.median(ours_triples['times']):.3f} s"
        lines.append(f"TorchKGE's protocol: accuracy TorchKGE {theirs:.6f}, kgeval {ours:.6f} (kgeval - TorchKGE = "
                     f"{ours - theirs:.3g}: {ties} of {n:,} test triples are negatives scoring exactly their "
                     f"threshold, which TorchKGE counts wrong and kgeval predicts false); thresholds "
                     f"{'identical' if same else 'DIFFERENT'}; TorchKGE / kgeval time "
                     f"{torchkge['seconds'] / ours_triples['seconds']:.2f}x (best of {len(torchkge['times'])} "
                     f"calls; medians {medians}, first calls {firsts})")  # fmt: skip
    return lines


def compare_dataset(name: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run the six evaluators on ``name``, print its table and lines: the JSON rows."""
    common = ["--dataset", name, "--dim", str(args.dim), "--batch", str(args.batch)]
    first, whole = ["--triples", str(args.pykeen_triples)], ["--triples", "all"]

    def run(worker: str, extra: list[str]) -> dict[str, Any]:
        return run_contender(__file__, worker, [*common, *extra], timeout=args.timeout)

    pykeen, ours_first, ours_all, fast, torchkge, ours_triples = ({} for _ in range(6))
    if "all-pairs" in args.protocols:
        pykeen, ours_first = run("pykeen-all-pairs", first), run("kgeval-all-pairs", first)
        ours_all, fast = run("kgeval-all-pairs", whole), run("kgeval-all-pairs", [*whole, "--fast-path"])
    if "torchkge" in args.protocols:
        repeats = ["--repeats", str(args.repeats)]
        torchkge, ours_triples = run("torchkge-triples", repeats), run("kgeval-triples", repeats)
    # (label, protocol, result, the row its ratio is to)
    labelled = [
        ("PyKEEN ClassificationEvaluator", "all pairs", pykeen, None),
        ("kgeval ClassificationEvaluator", "all pairs", ours_first, 0),
        ("kgeval ClassificationEvaluator, whole test split", "all pairs", ours_all, None),
        ("kgeval ClassificationEvaluator(fast_path=True), whole test split", "all pairs", fast, None),
        ("TorchKGE TripletClassificationEvaluator", "torchkge", torchkge, None),
        ('kgeval classify_triples(convention="torchkge")', "torchkge", ours_triples, 4),
    ]
    header = ["evaluator", "triples", "pairs", "seconds", "peak RSS MiB", "RSS increase MiB", "kgeval / other: s",
              "kgeval / other: RSS increase", "note"]  # fmt: skip
    table = [_row(label, result, None if other is None else labelled[other][2])
             for label, _, result, other in labelled if result]  # fmt: skip
    print(f"## {name}: DistMult d={args.dim}, seeded, untrained\n")
    print(format_table(table, header))
    lines = _lines(pykeen, ours_first, ours_all, fast, torchkge, ours_triples)
    print("\n" + "\n".join(f"- {line}" for line in lines) + "\n", flush=True)
    return [{"dataset": name, "evaluator": label, "protocol": protocol,
             "ratio_to": None if other is None else labelled[other][0],
             **{k: v for k, v in result.items() if k not in ("metrics", "thresholds")}}
            for label, protocol, result, other in labelled if result]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), help="names in the shared data folder")
    parser.add_argument("--dim", type=int, default=200)
    parser.add_argument("--pykeen-triples", default="50", help="test triples PyKEEN gets ('all' or a number)")
    parser.add_argument("--batch", type=int, default=256, help="TorchKGE's batch size")
    parser.add_argument("--protocols", nargs="+", choices=PROTOCOLS, default=list(PROTOCOLS))
    parser.add_argument("--repeats", type=int, default=5, help="calls of each TorchKGE-protocol evaluator (best)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds one evaluator's process may take")
    parser.add_argument("--json", type=Path, help="write the rows here")
    parser.add_argument("--quick", action="store_true", help="Nations (shipped), d=8, 10 PyKEEN triples")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--dataset", help=argparse.SUPPRESS)
    parser.add_argument("--triples", default="all", help=argparse.SUPPRESS)
    parser.add_argument("--fast-path", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return run_worker(args)
    if args.quick:
        args.datasets, args.dim, args.pykeen_triples = ["nations"], 8, "10"

    from kgeval.datasets import SHIPPED_DATASETS, dataset_folder

    started = time.time()
    print(f"# Triple classification: kgeval beside PyKEEN and TorchKGE\n\nmachine: {machine_line()}\n"
          f"load average before: {load_average()}\n")  # fmt: skip
    rows = []
    for name in args.datasets:
        if name.lower() not in SHIPPED_DATASETS and dataset_folder(name) is None:
            print(f"## {name}: not found (set KGEVAL_SHARED_DATA to the shared data folder)\n")
            continue
        rows += compare_dataset(name, args)
    print(f"load average after: {load_average()}; wall time {time.time() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine_line(), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
