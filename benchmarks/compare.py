"""kgeval against bare scoring, bare GEMMs, the models' own score_t, PyKEEN and TorchKGE, on one dataset.

Usage::

    python benchmarks/compare.py --dataset FB15k-237            # ../shared/data/FB15k-237 (or a folder path)
    python benchmarks/compare.py --dataset WN18RR --pykeen-triples all

Every contender runs in its own subprocess (so its peak RSS is its own) and reports its best time over
``--repeats`` calls; with ``--rounds 2`` the whole set runs twice, interleaved, and the faster round counts (the
machine may be shared). Printed: one table per group and the ratios the project's targets are stated in.
All evaluations are filtered (train + valid + test), rank both sides and compute every metric. kgeval runs
with each counting kernel: ``[eager]`` (what a one-off evaluation uses) and ``[numba]`` (the numba kernel; its
"first s" includes loading numba and the kernel in a fresh process, "best s" is a later call).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (
    best_of_rounds,
    contender,
    format_table,
    load_average,
    machine,
    measure,
    run_contender,
    run_worker,
)
from floor import bare_scores

#: the headline model (PyKEEN's comparison in the issue used DistMult, dim 200)
DIM = 200
#: fast-path models and their (complex) dimensions, chosen so every query has 200 real components
FAST_MODELS = {
    "DistMult": ("DistMult", {"dim": 200}),
    "ComplEx": ("ComplEx", {"dim": 100}),
    "RESCAL": ("RESCAL", {"dim": 100}),
    "TransE-L1": ("TransE", {"dim": 200, "p": 1}),
    "TransE-L2": ("TransE", {"dim": 200, "p": 2}),
    "RotatE": ("RotatE", {"dim": 100}),
}


# -- set-up ----------------------------------------------------------------------------------------------------
def _data(args: argparse.Namespace):
    from kgeval.datasets import load_dataset, shared_data_dir

    path = Path(args.dataset)
    if not path.exists():
        root = shared_data_dir()
        if root is None:
            raise SystemExit("no shared data directory: pass --dataset PATH")
        path = root / args.dataset
    data = load_dataset(str(path))
    return data, [data.train, data.valid]


def _kgeval_model(name: str, data) -> Any:
    import kgeval.models

    cls, kwargs = FAST_MODELS[name]
    return getattr(kgeval.models, cls)(data.num_entities, data.num_relations, seed=0, **kwargs)


class ScoresOnly:
    """Exposes only ``score_t(batch)`` / ``score_h(batch)`` of a model (no candidate ids, no fast path)."""

    def __init__(self, model: Any, record: list | None = None) -> None:
        self.model, self.num_entities, self.record = model, model.num_entities, record

    def score_t(self, hr_batch: torch.Tensor) -> torch.Tensor:
        if self.record is not None:
            self.record.append(("score_t", hr_batch.clone()))
        return self.model.score_t(hr_batch)

    def score_h(self, rt_batch: torch.Tensor) -> torch.Tensor:
        if self.record is not None:
            self.record.append(("score_h", rt_batch.clone()))
        return self.model.score_h(rt_batch)


#: the counting kernels kgeval contenders run with (suffix "[kernel]" of a contender name)
KERNELS = ("eager", "numba")


def _evaluate(model: Any, data, known, triples=None, **kwargs) -> Any:
    from kgeval import RankBasedEvaluator

    triples = data.test if triples is None else triples
    return RankBasedEvaluator(**kwargs).evaluate(model, triples, additional_filter_triples=known, use_tqdm=False)


def _task_queries(data) -> dict[str, torch.Tensor]:
    return {"tail": data.test[:, [0, 1]], "head": data.test[:, [1, 2]]}


# -- contenders ------------------------------------------------------------------------------------------------
@contender("kgeval-fast")
def kgeval_fast(args):
    data, known = _data(args)
    model = _kgeval_model(args.model, data)
    with torch.inference_mode():
        return measure(lambda: _evaluate(model, data, known, kernel=args.kernel), args.repeats)


@contender("kgeval-own-score_t")
def kgeval_own(args):
    data, known = _data(args)
    model = _kgeval_model(args.model, data)
    return measure(lambda: _evaluate(model, data, known, fast_path=False, kernel=args.kernel), args.repeats)


#: (rows, candidate columns) of the bare GEMM blocks tried (the fastest counts; None: all candidates in one call):
#: kgeval's former tile rows and GEMM batch, over all columns or in 512-column blocks (the BLAS runs ~1.6x faster on
#: 512-column blocks of FB15k-237's 14,541 candidates than on the whole width: see benchmarks/floor.py)
BARE_SHAPES = tuple((rows, width) for rows in (144, 288, 1024, 2048) for width in (None, 512))


def _fastest(run, shapes, repeats: int) -> tuple[object, dict]:
    """``measure(run(shape))`` for every shape: the fastest shape and its measurement."""
    results = {shape: measure(lambda shape=shape: run(shape), repeats) for shape in shapes}
    shape = min(results, key=lambda s: results[s]["seconds"])
    return shape, results[shape]


def _shapes(model: Any) -> tuple[tuple[int, int | None], ...]:
    return BARE_SHAPES if model.kgeval_similarity != "l1" else ((1024, None),)  # cdist: slow, one shape


@contender("bare-gemm-all")
def bare_gemm_all(args):
    """The query of every task times all candidates (cdist for L1), in the fastest of BARE_SHAPES."""
    data, _known = _data(args)
    model = _kgeval_model(args.model, data)
    queries = _task_queries(data)

    def run(shape: tuple[int, int | None]) -> None:
        with torch.inference_mode():
            for target, pairs in queries.items():
                bare_scores(model, target, pairs, shape)

    shape, result = _fastest(run, _shapes(model), args.repeats)
    return {**result, "block": shape}


@contender("bare-gemm-distinct")
def bare_gemm_distinct(args):
    """Only the distinct queries of each side (the least an exact full ranking multiplies), in the fastest of
    BARE_SHAPES."""
    data, _known = _data(args)
    model = _kgeval_model(args.model, data)
    distinct = {target: torch.unique(pairs, dim=0) for target, pairs in _task_queries(data).items()}

    def run(shape: tuple[int, int | None]) -> None:
        with torch.inference_mode():
            for target, pairs in distinct.items():
                bare_scores(model, target, pairs, shape)

    shape, result = _fastest(run, _shapes(model), args.repeats)
    return {**result, "rows": sum(len(q) for q in distinct.values()), "tasks": 2 * len(data.test), "block": shape}


@contender("kgeval-scores-only")
def kgeval_scores_only(args):
    data, known = _data(args)
    model = ScoresOnly(_kgeval_model(args.model, data))
    return measure(lambda: _evaluate(model, data, known, kernel=args.kernel), args.repeats)


@contender("bare-scores-all")
def bare_scores_all(args):
    """score_t / score_h of every task's query (no deduplication), in the fastest of kgeval's tile rows, its
    batch size for whole-row models, and 1024."""
    from kgeval._engine.sizes import CPU_SCORE_BUDGET, CPU_TILE_ELEMENTS

    data, _known = _data(args)
    model = ScoresOnly(_kgeval_model(args.model, data))
    sizes = (max(1, CPU_TILE_ELEMENTS // data.num_entities), max(1, CPU_SCORE_BUDGET // data.num_entities), 1024)
    queries = _task_queries(data)

    def run(size: int) -> None:
        with torch.inference_mode():
            for target, pairs in queries.items():
                method = model.score_t if target == "tail" else model.score_h
                for start in range(0, len(pairs), size):
                    method(pairs[start : start + size])

    size, result = _fastest(run, sizes, args.repeats)
    return {**result, "batch_size": size}


@contender("bare-scores-distinct")
def bare_scores_distinct(args):
    """Replays exactly the score_t / score_h calls kgeval made (distinct queries per batch) with ``--kernel``."""
    data, known = _data(args)
    inner = _kgeval_model(args.model, data)
    calls: list = []
    _evaluate(ScoresOnly(inner, record=calls), data, known, kernel=args.kernel)

    def run() -> None:
        with torch.inference_mode():
            for method, batch in calls:
                getattr(inner, method)(batch)

    return measure(run, args.repeats, calls=len(calls))


def _pykeen_model(args, data):
    from pykeen import models
    from pykeen.triples import CoreTriplesFactory

    factory = CoreTriplesFactory.create(data.train, num_entities=data.num_entities, num_relations=data.num_relations)
    return models.DistMult(triples_factory=factory, embedding_dim=DIM, random_seed=0)


def _subset(args, data) -> torch.Tensor:
    return data.test if args.pykeen_triples == "all" else data.test[: int(args.pykeen_triples)]


@contender("pykeen")
def pykeen_evaluator(args):
    from pykeen.evaluation import RankBasedEvaluator

    data, known = _data(args)
    model, triples = _pykeen_model(args, data), _subset(args, data)
    evaluator = RankBasedEvaluator(filtered=True)
    run = lambda: evaluator.evaluate(model, triples, additional_filter_triples=known, use_tqdm=False)  # noqa: E731
    return measure(run, 1, triples=len(triples))


@contender("kgeval-on-pykeen")
def kgeval_on_pykeen(args):
    data, known = _data(args)
    model, triples = _pykeen_model(args, data), _subset(args, data)
    run = lambda: _evaluate(model, data, known, triples=triples, kernel=args.kernel)  # noqa: E731
    return measure(run, args.repeats, triples=len(triples))


@contender("torchkge")
def torchkge_evaluator(args):
    import torchkge  # noqa: F401  (not installed here: the parent reports the contender as skipped)

    raise SystemExit("torchkge is installed but no TorchKGE contender is implemented yet")


# -- the parent --------------------------------------------------------------------------------------------------
def _worker(name: str, argv: list[str]) -> tuple[str, list[str]]:
    """The worker and arguments of a contender name: "kgeval-fast[numba]" runs kgeval-fast --kernel numba."""
    worker, _, kernel = name.partition("[")
    return worker, [*argv, "--kernel", kernel.rstrip("]") or "eager"]


def _run_all(names: list[str], argv_of, rounds: int) -> dict[str, dict]:
    results: dict[str, list[dict]] = {name: [] for name in names}
    for _ in range(rounds):
        for name in names:
            worker, argv = argv_of(name)
            results[name].append(run_contender(__file__, worker, argv))
    return {name: best_of_rounds(rounds_) for name, rounds_ in results.items()}


def _cell(result: dict, key: str, digits: int = 2) -> str:
    return f"{result[key]:.{digits}f}" if key in result else "-"


def _ratio(results: dict, numerator: str, denominator: str) -> str:
    a, b = results.get(numerator, {}), results.get(denominator, {})
    if "seconds" not in a or "seconds" not in b:
        return "n/a (" + (a.get("skipped") or b.get("skipped") or "missing") + ")"
    return f"{a['seconds'] / b['seconds']:.2f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="FB15k-237")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pykeen-triples", default="2000", help="test triples PyKEEN ranks ('all' for every one)")
    parser.add_argument("--skip-models", action="store_true", help="only the DistMult comparison")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--model", default="DistMult", help=argparse.SUPPRESS)
    parser.add_argument("--kernel", default="eager", choices=KERNELS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return run_worker(args)

    common = ["--dataset", args.dataset, "--repeats", str(args.repeats), "--pykeen-triples", args.pykeen_triples]
    started = time.time()
    print(f"# kgeval benchmark: {args.dataset}\n\nmachine: {machine()}\nload average before: {load_average()}\n")
    headline = ["kgeval-fast[eager]", "kgeval-fast[numba]", "bare-gemm-all", "bare-gemm-distinct",
                "kgeval-own-score_t[eager]", "kgeval-own-score_t[numba]", "kgeval-scores-only[eager]",
                "kgeval-scores-only[numba]", "bare-scores-all", "bare-scores-distinct[eager]",
                "bare-scores-distinct[numba]", "kgeval-on-pykeen[eager]", "kgeval-on-pykeen[numba]", "pykeen",
                "torchkge"]  # fmt: skip
    main_results = _run_all(headline, lambda name: _worker(name, common), args.rounds)
    rows = []
    for name in headline:
        r = main_results[name]
        note = r.get("skipped", "") or (f"{r['triples']} test triples" if "triples" in r else "")
        note = note or (f"best batch size {r['batch_size']}" if "batch_size" in r else "")
        note = note or (f"{r['rows']} distinct query rows for {r['tasks']} tasks" if "rows" in r else "")
        if "block" in r and r["block"] is not None:
            rows_per_block, width = r["block"]
            note = f"{note}; " if note else ""
            note += f"best block {rows_per_block} x {width or 'all'} candidates"
        rows.append([name, _cell(r, "seconds"), _cell(r, "first_seconds"), _cell(r, "peak_rss_mib", 0),
                     _cell(r, "extra_rss_mib", 0), note])  # fmt: skip
    print(f"## DistMult (dim {DIM}), filtered, both sides, all metrics\n")
    print(format_table(rows, ["contender", "best s", "first s", "peak RSS MiB", "extra RSS MiB", "note"]))
    print("\n## ratios\n")
    for kernel in KERNELS:
        for label, numerator, denominator in [
            ("kgeval (scores only) / bare score_t+score_h of every task", "kgeval-scores-only[{k}]", "bare-scores-all"),
            ("kgeval (scores only) / the score calls kgeval makes", "kgeval-scores-only[{k}]",
             "bare-scores-distinct[{k}]"),
            ("kgeval fast path / bare GEMM of every task", "kgeval-fast[{k}]", "bare-gemm-all"),
            ("kgeval fast path / bare GEMM of the distinct queries", "kgeval-fast[{k}]", "bare-gemm-distinct"),
            ("kgeval fast path / kgeval through the model's own score_t", "kgeval-fast[{k}]",
             "kgeval-own-score_t[{k}]"),
            ("PyKEEN / kgeval, same PyKEEN model and triples", "pykeen", "kgeval-on-pykeen[{k}]"),
        ]:  # fmt: skip
            ratio = _ratio(main_results, numerator.format(k=kernel), denominator.format(k=kernel))
            print(f"- [{kernel}] {label}: {ratio}")

    if not args.skip_models:
        kinds = ("kgeval-fast[eager]", "kgeval-fast[numba]", "kgeval-own-score_t[eager]", "bare-gemm-all")
        names = [f"{kind}:{model}" for model in FAST_MODELS for kind in kinds]
        model_results = _run_all(
            names, lambda n: _worker(n.split(":")[0], [*common, "--model", n.split(":")[1]]), args.rounds
        )
        rows = []
        for model in FAST_MODELS:
            eager, fused, own, bare = (model_results[f"{kind}:{model}"] for kind in kinds)
            ratio = lambda a, b: f"{a['seconds'] / b['seconds']:.2f}" if "seconds" in a and "seconds" in b else "-"  # noqa: E731
            rows.append([model, _cell(eager, "seconds"), _cell(fused, "seconds"), _cell(own, "seconds"),
                         _cell(bare, "seconds"), ratio(eager, own), ratio(eager, bare), ratio(fused, bare),
                         _cell(eager, "extra_rss_mib", 0)])  # fmt: skip
        print("\n## fast paths (bare: every task's query times all candidates; cdist for L1)\n")
        header = ["model", "fast s (eager)", "fast s (numba)", "own score_t s (eager)", "bare GEMM s",
                  "eager / own", "eager / bare", "numba / bare", "extra RSS MiB (eager)"]  # fmt: skip
        print(format_table(rows, header))
    print(f"\nload average after: {load_average()}; wall time {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
