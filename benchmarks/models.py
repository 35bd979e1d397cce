"""Every PyKEEN interaction: kgeval beside PyKEEN's own evaluator on the same model object, and beside kgeval's own
DistMult at the same dimension -- which form kgeval scores each model through, the MRRs compared, time and peak
memory, from one run.

For each interaction a seeded, untrained PyKEEN model of dimension ``--dim`` is built over the dataset's training
triples (the model class PyKEEN ships for it, else ``pykeen.models.make_model_cls``; the settings are in
:data:`MODELS`) and its first ``--triples`` test triples are ranked, both sides, filtered by train + valid + test:

- ``pykeen``: ``pykeen.evaluation.RankBasedEvaluator().evaluate(model, test, additional_filter_triples=[train,
  valid], batch_size=--pykeen-batch)``;
- ``kgeval``: ``kgeval.RankBasedEvaluator().evaluate(model, test, additional_filter_triples=[train, valid])``, the
  default sizes;
- ``kgeval DistMult``: the same call on PyKEEN's DistMult of the same dimension, the yardstick of "the matrix
  multiply floor".

Each runs in its own subprocess (its peak RSS its own); time is one call after the model was built -- by default the
process's first (PyKEEN's evaluator has no warm-up to skip; kgeval's first call includes its imports and form
probe); with ``--warm-up N`` each evaluator first ranks the first N test triples, as a training loop's later
evaluations find it. The ``form`` column names how kgeval
scored the model: ``query/candidate`` (the GEMM fast path), ``relation table`` (per-relation candidate tables),
``own methods`` (the model's ``score_t`` / ``score_h``), with the FastPathWarning's reason when a form was refused.

Usage::

    python benchmarks/models.py                                    # CoDEx-S, 1,000 test triples, d = 200
    python benchmarks/models.py --models TransE,TuckER --triples 200
    python benchmarks/models.py --dataset FB15k-237 --models ConvE --inverse no
    python benchmarks/models.py --quick                            # Nations, d = 8, a few models: the test's run

Figures: docs/measurements.md ("Every PyKEEN interaction").
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (
    contender,
    format_table,
    load_average,
    machine,
    peak_rss_mib,
    rss_mib,
    run_contender,
    run_worker,
    scored_through,
)

#: interaction -> (PyKEEN model name or None for ``make_model_cls``, model keyword arguments); ``{dim}`` in a value
#: is the dimension. Wrapper interactions (Clamped, DirectionAverage, MonotonicAffineTransformation) take the form of
#: what they wrap, when kgeval gives them one; their rows use a plain model that exercises them (SimplE: clamped and
#: direction-averaged).
MODELS: dict[str, tuple[str | None, dict[str, Any]]] = {
    "AutoSF": ("autosf", {"embedding_dim": "{dim}"}),
    "BoxE": ("boxe", {"embedding_dim": "{dim}"}),
    "CP": ("cp", {"embedding_dim": "{dim}", "rank": 64}),
    "ComplEx": ("complex", {"embedding_dim": "{dim}"}),
    "ConvE": ("conve", {"embedding_dim": "{dim}"}),
    "ConvKB": ("convkb", {"embedding_dim": "{dim}", "num_filters": 32}),
    "CrossE": ("crosse", {"embedding_dim": "{dim}"}),
    "DistMA": ("distma", {"embedding_dim": "{dim}"}),
    "DistMult": ("distmult", {"embedding_dim": "{dim}"}),
    "ERMLP": ("ermlp", {"embedding_dim": "{dim}"}),
    "ERMLPE": ("ermlpe", {"embedding_dim": "{dim}"}),
    "HolE": ("hole", {"embedding_dim": "{dim}"}),
    "KG2E": ("kg2e", {"embedding_dim": "{dim}"}),
    "LineaRE": (None, {"dimensions": "{dim}", "interaction": "lineare", "interaction_kwargs": {"p": 1}}),
    "MultiLinearTucker": (
        None,
        {
            "dimensions": {"d": 32, "e": 32, "f": 32},
            "interaction": "multilineartucker",
            "interaction_kwargs": {"head_dim": 32, "relation_dim": 32, "tail_dim": 32},
        },
    ),
    "MuRE": ("mure", {"embedding_dim": "{dim}"}),
    "NTN": ("ntn", {"embedding_dim": "{dim}", "num_slices": 4}),
    "PairRE": ("pairre", {"embedding_dim": "{dim}"}),
    "ProjE": ("proje", {"embedding_dim": "{dim}"}),
    "QuatE": ("quate", {"embedding_dim": "{dim}"}),
    "RESCAL": ("rescal", {"embedding_dim": "{dim}"}),
    "RotatE": ("rotate", {"embedding_dim": "{dim}"}),
    "SE": ("se", {"embedding_dim": "{dim}"}),
    "SimplE": ("simple", {"embedding_dim": "{dim}"}),
    "TorusE": ("toruse", {"embedding_dim": "{dim}"}),
    "TransD": ("transd", {"embedding_dim": "{dim}"}),
    "TransE": ("transe", {"embedding_dim": "{dim}"}),
    "TransF": ("transf", {"embedding_dim": "{dim}"}),
    "TransH": ("transh", {"embedding_dim": "{dim}"}),
    "TransR": ("transr", {"embedding_dim": "{dim}", "relation_dim": 64}),
    "Transformer": (
        None,
        {"dimensions": "{dim}", "interaction": "transformer", "interaction_kwargs": {"input_dim": "{dim}"}},
    ),
    "TripleRE": (None, {"dimensions": "{dim}", "interaction": "triplere"}),
    "TuckER": ("tucker", {"embedding_dim": "{dim}", "relation_dim": 32}),
    "UM": ("um", {"embedding_dim": "{dim}"}),
}
#: PyKEEN's evaluator batch for models whose scoring broadcasts a (batch x entities x ...) tensor: on CPU PyKEEN has
#: no automatic batch size, and at ``--pykeen-batch`` (128) CP's (B, E, rank, d) product and ConvE's / ConvKB's
#: feature maps per (query, candidate) exceed this machine's 24 GiB (the process is killed)
PYKEEN_BATCH: dict[str, int] = {"CP": 8, "ConvE": 16, "ConvKB": 16, "NTN": 16, "KG2E": 32, "BoxE": 32}
#: the wrapper interactions, each a row of its own: an ``ERModel`` of DistMult's representations around DistMult's
#: interaction (Clamped: with PyKEEN SimplE's clamp of +-20, which has no form; without a clamp it is DistMult's row);
#: ``DirectionAverageInteraction`` is measured through SimplE, its subclass: on its own PyKEEN 1.11.1 cannot score it
#: (its ``entity_shape`` declares one representation, its ``forward`` unpacks two: a ValueError in ``score_hrt``)
WRAPPERS: dict[str, dict[str, Any]] = {
    "Clamped(DistMult)": {"interaction": "ClampedInteraction", "interaction_kwargs": {"clamp_score": 20.0}},
    "MonotonicAffineTransformation(DistMult)": {
        "interaction": "MonotonicAffineTransformationInteraction",
        "interaction_kwargs": {},
    },
}
#: what the table says of the one wrapper without a row
UNBUILT: dict[str, str] = {
    "DirectionAverageInteraction": "measured as SimplE (its subclass); PyKEEN cannot score it alone (ValueError)",
}


def _filled(value: Any, dim: int) -> Any:
    """``value`` with every ``"{dim}"`` replaced by the dimension."""
    if value == "{dim}":
        return dim
    if isinstance(value, dict):
        return {key: _filled(inner, dim) for key, inner in value.items()}
    return value


def build_model(name: str, factory: Any, dim: int, inverse: bool) -> Any:
    """The seeded PyKEEN model of interaction ``name`` (:data:`MODELS`) over ``factory``."""
    import pykeen.models as pykeen_models

    if name in WRAPPERS:
        return _wrapper_model(name, factory, dim)
    model_name, kwargs = MODELS[name]
    kwargs = _filled(kwargs, dim)
    if model_name is None:
        cls = pykeen_models.make_model_cls(
            kwargs["dimensions"], kwargs["interaction"], interaction_kwargs=kwargs.get("interaction_kwargs")
        )
        return cls(triples_factory=factory, random_seed=0)
    del inverse  # the factory carries it
    return pykeen_models.model_resolver.make(model_name, triples_factory=factory, random_seed=0, **kwargs)


def _wrapper_model(name: str, factory: Any, dim: int) -> Any:
    """The seeded ``ERModel`` of wrapper ``name`` (:data:`WRAPPERS`) around DistMult's interaction, d = ``dim``."""
    from pykeen.models import ERModel
    from pykeen.nn import modules

    settings = WRAPPERS[name]
    wrapper = getattr(modules, settings["interaction"])
    interaction = wrapper(base=modules.DistMultInteraction(), **settings["interaction_kwargs"])
    return ERModel(triples_factory=factory, interaction=interaction, entity_representations_kwargs={"shape": dim},
                   relation_representations_kwargs={"shape": dim}, random_seed=0)  # fmt: skip


def _data(args: argparse.Namespace) -> tuple[Any, Any, torch.Tensor]:
    """(dataset, PyKEEN triples factory of its training triples, the test triples ranked)."""
    from pykeen.triples import TriplesFactory

    from kgeval.datasets import load_dataset

    data = load_dataset(args.dataset)
    factory = TriplesFactory(
        mapped_triples=data.train,
        entity_to_id={str(i): i for i in range(data.num_entities)},
        relation_to_id={str(i): i for i in range(data.num_relations)},
        create_inverse_triples=args.inverse == "yes",
    )
    return data, factory, data.test[: args.triples]


@contender("pykeen")
def _pykeen(args: argparse.Namespace) -> dict[str, Any]:
    from pykeen.evaluation import RankBasedEvaluator as PyKEENEvaluator

    data, factory, test = _data(args)
    model = build_model(args.model, factory, args.dim, args.inverse == "yes").eval()
    evaluator = PyKEENEvaluator()
    batch = min(args.pykeen_batch, PYKEEN_BATCH.get(args.model, args.pykeen_batch))

    def evaluate(triples: torch.Tensor) -> Any:
        return evaluator.evaluate(model, triples, additional_filter_triples=[data.train, data.valid],
                                  batch_size=batch, use_tqdm=False)  # fmt: skip

    if args.warm_up:
        evaluate(test[: args.warm_up])
    before = rss_mib()
    start = time.perf_counter()
    results = evaluate(test)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "mrr": float(results.get_metric("both.realistic.inverse_harmonic_mean_rank")),
            "peak_rss_mib": peak_rss_mib(), "rss_before_mib": before}  # fmt: skip


@contender("kgeval")
def _kgeval(args: argparse.Namespace) -> dict[str, Any]:
    from kgeval import RankBasedEvaluator

    data, factory, test = _data(args)
    model = build_model(args.model, factory, args.dim, args.inverse == "yes").eval()
    evaluator = RankBasedEvaluator()

    def evaluate(triples: torch.Tensor) -> Any:
        return evaluator.evaluate(model, triples, additional_filter_triples=[data.train, data.valid], use_tqdm=False)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if args.warm_up:
            evaluate(test[: args.warm_up])
        before = rss_mib()
        start = time.perf_counter()
        results = evaluate(test)
        seconds = time.perf_counter() - start
    form = scored_through(model, caught)
    return {"seconds": seconds, "mrr": results.get_metric("both.realistic.inverse_harmonic_mean_rank"),
            "peak_rss_mib": peak_rss_mib(), "rss_before_mib": before, "form": form}  # fmt: skip


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", default="codex-s")
    parser.add_argument("--triples", type=int, default=1000, help="the first N test triples")
    parser.add_argument("--dim", type=int, default=200)
    parser.add_argument("--models", default="all",
                        help="comma-separated interaction names of MODELS or WRAPPERS, or 'all'")  # fmt: skip
    parser.add_argument("--warm-up", type=int, default=0, metavar="N",
                        help="before the timed call, each evaluator ranks the first N test triples once (imports, "
                             "thread pools, caches: a call as in a training loop's later evaluations)")  # fmt: skip
    parser.add_argument("--inverse", choices=("no", "yes"), default="no", help="PyKEEN's create_inverse_triples")
    parser.add_argument("--pykeen-batch", type=int, default=128)
    parser.add_argument("--skip-pykeen", action="store_true", help="kgeval only (PyKEEN's column left empty)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per evaluator and model")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    parser.add_argument("--quick", action="store_true", help="Nations, d = 8, 30 triples, four models")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)


def _row(name: str, pykeen: dict[str, Any], kgeval: dict[str, Any], floor: dict[str, Any]) -> dict[str, Any]:
    """One table row: the times, their ratios and whether the MRRs agree."""
    row: dict[str, Any] = {"interaction": name, "form": kgeval.get("form", kgeval.get("skipped", "?"))}
    row["pykeen_s"] = pykeen.get("seconds", math.nan)
    row["kgeval_s"] = kgeval.get("seconds", math.nan)
    row["speedup"] = row["pykeen_s"] / row["kgeval_s"]
    row["vs_distmult"] = row["kgeval_s"] / floor.get("seconds", math.nan)
    both = "mrr" in pykeen and "mrr" in kgeval
    row["mrr_equal"] = (abs(pykeen["mrr"] - kgeval["mrr"]) <= 1e-6 * max(1.0, abs(pykeen["mrr"]))) if both else None
    row["mrr"] = kgeval.get("mrr", math.nan)
    row["pykeen_peak_mib"] = pykeen.get("peak_rss_mib", math.nan)
    row["kgeval_peak_mib"] = kgeval.get("peak_rss_mib", math.nan)
    row["skipped"] = "; ".join(f"{who}: {part['skipped']}" for who, part in (("pykeen", pykeen), ("kgeval", kgeval))
                               if "skipped" in part)  # fmt: skip
    return row


def _cell(value: Any) -> str:
    """A table cell: floats to three significant digits."""
    if isinstance(value, float):
        return "-" if math.isnan(value) else f"{value:.3g}"
    return str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _options(parser)
    args = parser.parse_args()
    if args.worker:
        run_worker(args)
        return
    if args.quick:
        args.dataset, args.dim, args.triples = "nations", 8, 30
        args.models = args.models if args.models != "all" else "DistMult,TransE,TuckER,ConvE"
    known = [*MODELS, *WRAPPERS]
    names = known if args.models == "all" else [name.strip() for name in args.models.split(",")]
    unknown = [name for name in names if name not in known]
    if unknown:
        parser.error(f"unknown interactions {unknown}; known: {', '.join(known)}")
    common = ["--dataset", args.dataset, "--triples", str(args.triples), "--dim", str(args.dim),
              "--inverse", args.inverse, "--pykeen-batch", str(args.pykeen_batch),
              "--warm-up", str(args.warm_up)]  # fmt: skip
    script = str(Path(__file__).resolve())
    print(f"{machine()}; {os.cpu_count()} cores; "
          f"{args.dataset}, first {args.triples} test triples, d = {args.dim}, inverse triples {args.inverse}, "
          f"warm-up {args.warm_up} triples, load {load_average()}", flush=True)  # fmt: skip
    floor = run_contender(script, "kgeval", [*common, "--model", "DistMult"], args.timeout)
    rows = []
    for name in names:
        kgeval = floor if name == "DistMult" else run_contender(script, "kgeval", [*common, "--model", name],
                                                                args.timeout)  # fmt: skip
        pykeen = {"skipped": "--skip-pykeen"} if args.skip_pykeen else run_contender(
            script, "pykeen", [*common, "--model", name], args.timeout)  # fmt: skip
        rows.append(_row(name, pykeen, kgeval, floor))
        print(json.dumps(rows[-1]), flush=True)
    columns = ["interaction", "form", "pykeen_s", "kgeval_s", "speedup", "vs_distmult", "mrr_equal",
               "pykeen_peak_mib", "kgeval_peak_mib"]  # fmt: skip
    print(format_table([[_cell(row[column]) for column in columns] for row in rows], columns))
    print("; ".join(f"{wrapper}: {why}" for wrapper, why in UNBUILT.items()))
    print(f"load at the end: {load_average()}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
