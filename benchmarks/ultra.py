"""kgeval's pessimistic ranks of a ULTRA checkpoint against ULTRA's own ``test()``, task for task, on ILPC2022-small,
InGram-NL-25 and InGram-WK-25 (test split), with both times.

Usage (ULTRA, github.com/DeepGraphLearning/ULTRA, checked out somewhere; it needs torch_geometric, easydict, jinja2,
pyyaml, and torch_scatter -- a stand-in of ours is used where torch_scatter is not installed)::

    KGEVAL_ULTRA_CHECKOUT=/path/to/ULTRA python benchmarks/ultra.py [--checkpoint ckpts/ultra_4g.pth] [--limit N]

Without ``KGEVAL_ULTRA_CHECKOUT`` it prints this and exits 0.

ULTRA's side runs ULTRA's code unchanged, imported from the checkout: the model is ``ultra.models.Ultra`` built from
``config/inductive/inference.yaml`` (read with ULTRA's ``util.load_config``) and the checkpoint; the data are built
by ULTRA's own dataset classes (``ILPC2022(version="small")``, ``NLIngram("25")``, ``WKIngram("25")``) from the
shared data files, written (decompressed) into the raw folders those classes read, so they download nothing and
process the files themselves; the evaluation is ``test()`` of ``script/run.py``, imported as a module, with the
filter graph its ``__main__`` builds for ILPC / InGram sets (inference graph with inverse edges, validation and
test triples: five lines of ``__main__`` repeated here). What is replaced or watched:

- ULTRA's datasets ``torch.load`` the files they have just processed: the PyG classes stored in them are allowed
  (``torch.serialization.safe_globals``), since torch >= 2.6 loads weights only by default;
- ``tasks.all_negative`` and ``tasks.compute_ranking`` are wrapped while ``test()`` runs, to record each batch's
  triples and ranks (``test()`` keeps only the concatenated ranking): the recorded ranks are the ones its metrics
  are computed from, and the MRR of the recorded ranks is checked against the MRR ``test()`` returns;
- ULTRA's layers pass messages through its own fused ``rspmm`` extension (a C++ extension on the CPU, compiled at
  first use: ``pip install ninja``), which aggregates from ``edge_index[1]`` into ``edge_index[0]`` -- the direction
  the checkpoints were trained in. ``--generic-propagation`` gives each ``GeneralizedRelationalConv`` PyG's generic
  ``MessagePassing.propagate`` with ``flow = "target_to_source"`` instead (the same direction, no compiler needed;
  PyG's default flow runs the other way and turns the pretrained model into another function). Both sides score
  with this same model object;
- ``--limit N`` ranks the first N test triples (file order) on both sides, all of them still filtering.

kgeval's side evaluates the same model object through :class:`kgeval.adapters.ultra.UltraAdapter` and
:func:`kgeval.adapters.graph.on_graphs` on kgeval's own reading of the same files (``load_dataset``; its ids sort
labels, ULTRA's number them by first appearance: the triples are matched by label), filtered as ULTRA filters
(``evaluation_kwargs("test")``: the inference graph and the validation triples, plus the test triples). Ranks are
compared as sorted lists of (triple, side, rank); ULTRA's rank is kgeval's pessimistic one.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import importlib
import importlib.util
import logging
import os
import shutil
import sys
import tempfile
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kgeval import RankBasedEvaluator
from kgeval.adapters.graph import on_graphs
from kgeval.adapters.ultra import UltraAdapter
from kgeval.datasets import load_dataset, shared_data_dir

STANDIN = Path(__file__).resolve().parent / "_torch_scatter_standin"
#: kgeval's name -> (ULTRA's dataset class, its version, the shared files in the order of ULTRA's raw_file_names)
SETS = {
    "ILPC2022-small": ("ILPC2022", "small", ("train", "inference", "inference_validation", "inference_test")),
    "InGram-NL-25": ("NLIngram", "25", ("train", "msg", "valid", "test")),
    "InGram-WK-25": ("WKIngram", "25", ("train", "msg", "valid", "test")),
}


def import_ultra(checkout: Path) -> tuple[Any, Any, bool]:
    """ULTRA's package and its ``script/run.py`` as a module; whether the torch_scatter stand-in was needed.
    torch_geometric is imported first, so that it does not take the stand-in for torch_scatter."""
    import torch_geometric  # noqa: F401

    standin = False
    try:
        import torch_scatter  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(STANDIN))
        standin = True
    sys.path.insert(0, str(checkout))
    import ultra.datasets
    import ultra.layers
    import ultra.models
    import ultra.tasks
    import ultra.util

    spec = importlib.util.spec_from_file_location("ultra_run_script", checkout / "script" / "run.py")
    assert spec is not None
    assert spec.loader is not None
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    return ultra, run, standin


def ultra_model(ultra: Any, checkout: Path, checkpoint: Path) -> tuple[Any, Any]:
    """ULTRA's model of its inductive inference config, with the checkpoint's weights, in evaluation mode."""
    context = {"dataset": "ILPC2022", "version": "small", "gpus": None, "epochs": 0, "bpe": None,
               "ckpt": str(checkpoint)}  # fmt: skip
    cfg = ultra.util.load_config(str(checkout / "config" / "inductive" / "inference.yaml"), context=context)
    model = ultra.models.Ultra(rel_model_cfg=cfg.model.relation_model, entity_model_cfg=cfg.model.entity_model)
    model.load_state_dict(torch.load(cfg.checkpoint, map_location="cpu")["model"])
    return model.eval(), cfg


def propagation(ultra: Any, model: torch.nn.Module, generic: bool) -> str:
    """How the model's GeneralizedRelationalConv layers pass messages, in one phrase. By default ULTRA's own path:
    its fused ``rspmm`` extension (C++ on the CPU, compiled at first use -- ninja and a compiler needed), which
    aggregates along each edge from ``edge_index[1]`` into ``edge_index[0]``, the direction ULTRA's checkpoints were
    trained in. ``generic``: PyG's generic ``MessagePassing.propagate`` (ULTRA's own ``message`` / ``aggregate``)
    with ``flow = "target_to_source"``, the same direction -- PyG's default flow runs the other way, and with it
    ULTRA's pretrained layers compute other functions (one layer off by up to 4.4, InGram-NL-25's test MRR 0.179
    where the extension gives ULTRA's published figures)."""
    from torch_geometric.nn.conv import MessagePassing

    layers = [module for module in model.modules() if isinstance(module, ultra.layers.GeneralizedRelationalConv)]
    if not generic:
        importlib.import_module("ultra.rspmm")  # compiles the extension now, not inside the timed run
        return f"{len(layers)} GeneralizedRelationalConv layers on ULTRA's rspmm extension (its own path)"
    for layer in layers:
        layer.propagate = types.MethodType(MessagePassing.propagate, layer)
        layer.flow = "target_to_source"
    return (
        f"{len(layers)} GeneralizedRelationalConv layers on PyG's generic propagate, flow target_to_source "
        "(rspmm's direction; --generic-propagation)"
    )


def ultra_dataset(ultra: Any, name: str, root: Path) -> Any:
    """ULTRA's own dataset class for ``name``, its raw files written from the shared data (decompressed)."""
    class_name, version, files = SETS[name]
    cls = getattr(ultra.datasets, class_name)
    probe = cls.__new__(cls)  # the raw folder and file names as the class computes them
    probe.root, probe.version = str(root), version
    raw_dir = Path(probe.raw_dir)
    raw_dir.mkdir(parents=True, exist_ok=True)
    source = shared_data_dir()
    assert source is not None, "no shared data directory"
    for file, target in zip(files, probe.raw_file_names, strict=True):
        with gzip.open(source / name / f"{file}.txt.gz", "rb") as fin, open(raw_dir / target, "wb") as fout:
            shutil.copyfileobj(fin, fout)
    from torch_geometric.data.data import Data, DataEdgeAttr, DataTensorAttr
    from torch_geometric.data.storage import EdgeStorage, GlobalStorage, NodeStorage

    allowed = [Data, DataEdgeAttr, DataTensorAttr, GlobalStorage, EdgeStorage, NodeStorage]
    with torch.serialization.safe_globals(allowed), contextlib.redirect_stdout(sys.stderr):
        return cls(root=str(root), version=version)


def ultra_vocabularies(name: str) -> tuple[list[str], list[str]]:
    """ULTRA's id -> label of the inference graph's entities and relations: numbered by first appearance in the
    inference, validation and test files (its ``InductiveDataset.load_file``; checked against its data below)."""
    files = SETS[name][2][1:]
    entities: dict[str, int] = {}
    relations: dict[str, int] = {}
    source = shared_data_dir()
    assert source is not None
    for file in files:
        with gzip.open(source / name / f"{file}.txt.gz", "rt", encoding="utf-8") as lines:
            for line in lines:
                head, relation, tail = line.split()
                entities.setdefault(head, len(entities))
                entities.setdefault(tail, len(entities))
                relations.setdefault(relation, len(relations))
    return list(entities), list(relations)


@contextlib.contextmanager
def recording(tasks: Any) -> Iterator[dict[str, list[torch.Tensor]]]:
    """``tasks.all_negative`` and ``tasks.compute_ranking`` wrapped: each batch's (h, t, r) triples and each
    ranking (tail, then head, per batch, as ``test()`` calls them) recorded."""
    record: dict[str, list[torch.Tensor]] = {"batches": [], "rankings": []}
    all_negative, compute_ranking = tasks.all_negative, tasks.compute_ranking

    def recorded_all_negative(data: Any, batch: torch.Tensor) -> Any:
        record["batches"].append(batch.cpu())
        return all_negative(data, batch)

    def recorded_compute_ranking(pred: torch.Tensor, target: torch.Tensor, mask: Any = None) -> torch.Tensor:
        ranking = compute_ranking(pred, target, mask)
        record["rankings"].append(ranking.cpu())
        return ranking

    tasks.all_negative, tasks.compute_ranking = recorded_all_negative, recorded_compute_ranking
    try:
        yield record
    finally:
        tasks.all_negative, tasks.compute_ranking = all_negative, compute_ranking


def run_ultra(ultra: Any, run: Any, cfg: Any, model: Any, name: str, root: Path,
              limit: int | None) -> tuple[np.ndarray, float, float, Any]:  # fmt: skip
    """ULTRA's test() on the test split: rows (h, r, t, side, rank) in ULTRA's ids (side 0 head, 1 tail), its MRR,
    its seconds, and the dataset."""
    dataset = ultra_dataset(ultra, name, root)
    valid_data, test_data = dataset[1], dataset[2]
    # script/run.py's __main__, InductiveInference with an ILPC / Ingram class: the filter graph
    full_inference_edges = torch.cat([valid_data.edge_index, valid_data.target_edge_index,
                                      test_data.target_edge_index], dim=1)  # fmt: skip
    full_inference_etypes = torch.cat([valid_data.edge_type, valid_data.target_edge_type, test_data.target_edge_type])
    from torch_geometric.data import Data

    filtered = Data(edge_index=full_inference_edges, edge_type=full_inference_etypes, num_nodes=test_data.num_nodes)
    evaluated = test_data
    if limit is not None:
        evaluated = test_data.clone()
        evaluated.target_edge_index = test_data.target_edge_index[:, :limit]
        evaluated.target_edge_type = test_data.target_edge_type[:limit]
    logger = logging.getLogger("ultra-benchmark")
    with recording(ultra.tasks) as record:
        start = time.perf_counter()
        metrics = run.test(cfg, model, evaluated, device=torch.device("cpu"), logger=logger, filtered_data=filtered,
                           return_metrics=True)  # fmt: skip
        seconds = time.perf_counter() - start
    rows = []
    for index, batch in enumerate(record["batches"]):
        tail_ranking, head_ranking = record["rankings"][2 * index], record["rankings"][2 * index + 1]
        h, t, r = batch.t()
        for side, ranking in ((1, tail_ranking), (0, head_ranking)):
            rows.append(torch.stack([h, r, t, torch.full_like(h, side), ranking], dim=1))
    table = torch.cat(rows).numpy()
    recorded_mrr = float((1.0 / table[:, 4]).mean())
    assert abs(recorded_mrr - float(metrics["mrr"])) < 1e-6, (recorded_mrr, float(metrics["mrr"]))
    assert len(table) == 2 * evaluated.target_edge_index.shape[1]
    return table, float(metrics["mrr"]), seconds, dataset


def check_vocabularies(dataset: Any, entities: list[str], relations: list[str], name: str) -> None:
    """The label numbering replicated here gives ULTRA's own inference graph and test triples."""
    source = shared_data_dir()
    assert source is not None
    entity_id = {label: index for index, label in enumerate(entities)}
    relation_id = {label: index for index, label in enumerate(relations)}
    test_data = dataset[2]
    graph_file, test_file = SETS[name][2][1], SETS[name][2][3]
    pairs = ((graph_file, test_data.edge_index, test_data.edge_type),
             (test_file, test_data.target_edge_index, test_data.target_edge_type))  # fmt: skip
    for file, edge_index, edge_type in pairs:
        with gzip.open(source / name / f"{file}.txt.gz", "rt", encoding="utf-8") as lines:
            triples = torch.tensor([[entity_id[h], relation_id[r], entity_id[t]]
                                    for h, r, t in (line.split() for line in lines)])  # fmt: skip
        count = len(triples)
        assert torch.equal(edge_index[:, :count], triples[:, [0, 2]].T), f"{name} {file}: ULTRA's ids differ"
        assert torch.equal(edge_type[:count], triples[:, 1]), f"{name} {file}: ULTRA's relation ids differ"
    assert int(test_data.num_nodes) == len(entities), name


def run_kgeval(model: Any, name: str, ultra_rows: np.ndarray, entities: list[str], relations: list[str],
               batch_size: int) -> tuple[np.ndarray, float, float, int]:  # fmt: skip
    """kgeval's evaluation of the triples ULTRA ranked: rows (h, r, t, side, pessimistic rank) in ULTRA's ids, the
    MRR, the seconds, and how many of ULTRA's triples kgeval's reading lacks (none expected)."""
    data = load_dataset(name)
    entity_to_id = data.inference_entity_to_id
    relation_to_id = getattr(data, "inference_relation_to_id", None) or data.relation_to_id
    tail_rows = ultra_rows[ultra_rows[:, 3] == 1]
    ultra_triples = tail_rows[:, :3]
    wanted, missing = [], 0
    for h, r, t in ultra_triples.tolist():
        labels = (entities[h], relations[r], entities[t])
        if labels[0] in entity_to_id and labels[1] in relation_to_id and labels[2] in entity_to_id:
            wanted.append((entity_to_id[labels[0]], relation_to_id[labels[1]], entity_to_id[labels[2]]))
        else:
            missing += 1
    kwargs = data.evaluation_kwargs("test")
    kwargs["mapped_triples"] = torch.tensor(wanted, dtype=torch.long)
    kwargs["additional_filter_triples"] = [*kwargs["additional_filter_triples"], data.test]
    evaluator = RankBasedEvaluator(batch_size=batch_size)
    start = time.perf_counter()
    results = evaluator.evaluate(on_graphs(UltraAdapter(model), data), **kwargs, use_tqdm=False)
    seconds = time.perf_counter() - start
    records = results.records
    assert records is not None
    ultra_entity = {label: index for index, label in enumerate(entities)}
    to_ultra_entity = np.array([ultra_entity.get(label, -1)
                                for label in sorted(entity_to_id, key=entity_to_id.__getitem__)])  # fmt: skip
    ultra_relation = {label: index for index, label in enumerate(relations)}
    to_ultra_relation = np.array([ultra_relation.get(label, -1)
                                  for label in sorted(relation_to_id, key=relation_to_id.__getitem__)])  # fmt: skip
    columns = [to_ultra_entity[records.head], to_ultra_relation[records.relation], to_ultra_entity[records.tail],
               records.side.astype(np.int64), records.pessimistic]  # fmt: skip
    rows = np.stack(columns, axis=1)
    return rows, float(results["both.pessimistic.mrr"]), seconds, missing


def sorted_rows(rows: np.ndarray) -> np.ndarray:
    return rows[np.lexsort(rows.T[::-1])]


def compare(name: str, ultra_rows: np.ndarray, kgeval_rows: np.ndarray) -> tuple[int, int]:
    """(tasks whose ranks agree, tasks compared): both lists sorted by (h, r, t, side, rank)."""
    if len(ultra_rows) != len(kgeval_rows):
        keys = {tuple(row[:4]) for row in kgeval_rows.tolist()}
        ultra_rows = ultra_rows[[tuple(row[:4]) in keys for row in ultra_rows.tolist()]]
    ultra_sorted, kgeval_sorted = sorted_rows(ultra_rows), sorted_rows(kgeval_rows)
    assert np.array_equal(ultra_sorted[:, :4], kgeval_sorted[:, :4]), f"{name}: the tasks differ"
    equal = ultra_sorted[:, 4] == kgeval_sorted[:, 4]
    for row_u, row_k in zip(ultra_sorted[~equal][:5], kgeval_sorted[~equal][:5], strict=True):
        print(f"  {name}: task (h, r, t, side) {tuple(row_u[:4])}: ULTRA rank {row_u[4]}, kgeval {row_k[4]}")
    return int(equal.sum()), len(equal)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default="ckpts/ultra_4g.pth", help="relative to the checkout, or a path")
    parser.add_argument(
        "--generic-propagation",
        action="store_true",
        help="PyG's generic propagate in rspmm's direction instead of ULTRA's rspmm extension",
    )
    parser.add_argument("--datasets", nargs="+", default=list(SETS), choices=list(SETS))
    parser.add_argument("--limit", type=int, default=None, help="rank the first N test triples of each set only")
    parser.add_argument("--batch-size", type=int, default=16, help="ULTRA's test batch size and kgeval's")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads for both sides")
    args = parser.parse_args()
    checkout_env = os.environ.get("KGEVAL_ULTRA_CHECKOUT")
    if not checkout_env:
        print(__doc__)
        print("KGEVAL_ULTRA_CHECKOUT is not set: nothing run.")
        return
    checkout = Path(checkout_env).expanduser().resolve()
    torch.set_num_threads(args.threads)
    ultra, run, standin = import_ultra(checkout)
    checkpoint = Path(args.checkpoint) if Path(args.checkpoint).is_absolute() else checkout / args.checkpoint
    model, cfg = ultra_model(ultra, checkout, checkpoint)
    cfg.train.batch_size = args.batch_size
    passing = propagation(ultra, model, args.generic_propagation)
    print(f"ULTRA checkout {checkout}, checkpoint {checkpoint.name}; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, CPU, batch size {args.batch_size}")  # fmt: skip
    print(f"torch_scatter: {'the stand-in of benchmarks/_torch_scatter_standin' if standin else 'installed'}; "
          f"{passing}")  # fmt: skip
    if args.limit is not None:
        print(f"--limit {args.limit}: the first {args.limit} test triples of each set (all of them filter)")
    header = (f"{'dataset':16s} {'tasks equal':>13s} {'ULTRA MRR':>10s} {'kgeval MRR':>10s} {'ULTRA s':>9s} "
              f"{'kgeval s':>9s}")  # fmt: skip
    lines = []
    with tempfile.TemporaryDirectory(prefix="ultra-data-") as root:
        for name in args.datasets:
            ultra_rows, ultra_mrr, ultra_seconds, dataset = run_ultra(ultra, run, cfg, model, name, Path(root),
                                                                      args.limit)  # fmt: skip
            entities, relations = ultra_vocabularies(name)
            check_vocabularies(dataset, entities, relations, name)
            kgeval_rows, kgeval_mrr, kgeval_seconds, missing = run_kgeval(model, name, ultra_rows, entities,
                                                                          relations, args.batch_size)  # fmt: skip
            equal, total = compare(name, ultra_rows, kgeval_rows)
            note = f"  ({missing} of ULTRA's triples not in kgeval's reading)" if missing else ""
            line = (f"{name:16s} {f'{equal}/{total}':>13s} {ultra_mrr:10.6f} {kgeval_mrr:10.6f} "
                    f"{ultra_seconds:9.1f} {kgeval_seconds:9.1f}{note}")  # fmt: skip
            print(line, flush=True)
            lines.append(line)
    print(header)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
