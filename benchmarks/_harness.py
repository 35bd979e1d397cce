"""Shared benchmark plumbing: contenders run in their own subprocess, timed, with their peak RSS.

A contender is a function ``(args) -> dict`` registered with :func:`contender`. The parent process runs
``python <script> --worker NAME ...`` once per contender (and per round), so every contender's ``ru_maxrss`` is
its own; the worker prints one JSON line with the best time of its repeats, its peak RSS and the RSS it had
before timing started (after loading data and model), whose difference is the contender's extra memory.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
CONTENDERS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {}


def contender(name: str) -> Callable:
    """Register a contender: a function that sets up, then returns ``measure(callable)``'s result."""

    def register(function: Callable) -> Callable:
        CONTENDERS[name] = function
        return function

    return register


def rss_mib() -> float:
    """Current resident set size of this process in MiB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mib() -> float:
    """Peak resident set size of this process (``ru_maxrss``) in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(run: Callable[[], Any], repeats: int, **extra: Any) -> dict[str, Any]:
    """Best wall time of ``repeats`` calls of ``run`` (the first call included), with RSS figures."""
    before = rss_mib()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    peak = peak_rss_mib()
    return {"seconds": min(times), "first_seconds": times[0], "peak_rss_mib": peak, "rss_before_mib": before,
            "extra_rss_mib": peak - before, **extra}  # fmt: skip


def median_seconds(run: Callable[[], Any], repeats: int, threads: int | None = None) -> float:
    """The median time of ``repeats`` calls of ``run`` after a first, untimed one, with ``threads`` torch threads
    (None: as the process has them; the process's count restored after)."""
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        run()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
        return statistics.median(times)
    finally:
        torch.set_num_threads(before)


def best_time(run: Callable[[], Any], repeats: int, device: torch.device | None = None) -> tuple[float, Any]:
    """(best wall time, last value) of ``repeats`` calls of ``run``, in this process (no RSS figures); on a CUDA
    ``device`` each call is timed between two synchronisations, so queued kernels count."""

    def synchronize() -> None:
        if device is not None and device.type == "cuda":
            torch.cuda.synchronize(device)

    best, value = float("inf"), None
    for _ in range(repeats):
        synchronize()
        start = time.perf_counter()
        value = run()
        synchronize()
        best = min(best, time.perf_counter() - start)
    return best, value


def seeded_distmult(description: str) -> tuple[argparse.Namespace, Any, Any]:
    """The command line of the one-dataset comparisons (``--dataset``, ``--dim``, ``--repeats``), the dataset it
    names and a seeded DistMult of that dimension over it: (args, dataset, model)."""
    from kgeval.datasets import load_dataset
    from kgeval.models import DistMult

    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="FB15k-237")
    parser.add_argument("--dim", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    data = load_dataset(args.dataset)
    return args, data, DistMult(data.num_entities, data.num_relations, dim=args.dim, seed=0)


def peer_comparison(
    description: str, add_options: Callable[[argparse.ArgumentParser], None]
) -> tuple[argparse.Namespace, Any, torch.Tensor]:
    """The command line of the comparisons with a peer library's own evaluator (``--dataset``, ``--triples``,
    ``--dim``, ``--repeats`` and the peer's options added by ``add_options``), the dataset and the test triples to
    rank; seeds torch for the peer's model initialisation: (args, dataset, test triples)."""
    from kgeval.datasets import load_dataset

    parser = argparse.ArgumentParser(description=description.splitlines()[0])
    parser.add_argument("--dataset", default="umls")
    parser.add_argument("--triples", default="all", help="test triples to rank ('all' or a number)")
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    add_options(parser)
    args = parser.parse_args()
    data = load_dataset(args.dataset)
    test = data.test if args.triples == "all" else data.test[: int(args.triples)]
    torch.manual_seed(0)
    return args, data, test


def run_worker(args: argparse.Namespace) -> None:
    """Worker mode: run one contender and print its JSON line."""
    torch.manual_seed(0)
    result = CONTENDERS[args.worker](args)
    print("RESULT " + json.dumps(result), flush=True)


def run_contender(script: str, name: str, argv: list[str], timeout: float = 3600) -> dict[str, Any]:
    """Run one contender in a fresh subprocess and parse its JSON line (errors become a "skipped" entry)."""
    command = [sys.executable, script, "--worker", name, *argv]
    environment = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environment, check=False)
    except subprocess.TimeoutExpired:
        return {"skipped": f"timed out after {timeout:.0f} s"}
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    reason = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return {"skipped": reason[:200]}


def best_of_rounds(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The round with the smallest time (peak RSS: the largest seen)."""
    measured = [r for r in results if "seconds" in r]
    if not measured:
        return results[0]
    best = dict(min(measured, key=lambda r: r["seconds"]))
    best["peak_rss_mib"] = max(r["peak_rss_mib"] for r in measured)
    best["extra_rss_mib"] = max(r["extra_rss_mib"] for r in measured)
    return best


def machine() -> str:
    """One line describing the machine and the software."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    from kgeval._machine import cpu_cache_report

    return (
        f"{cpu}, {os.cpu_count()} cores, {memory:.0f} GiB RAM, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads, CPU capability {torch.backends.cpu.get_cpu_capability()}), "
        f"numba target {numba_target()}, Python {platform.python_version()}; {cpu_cache_report()}"
    )


def numba_target() -> str:
    """The CPU numba compiles for and its widest vectors: the host's, or those ``NUMBA_CPU_NAME`` /
    ``NUMBA_CPU_FEATURES`` hold it to (benchmarks/as_avx2.py)."""
    try:
        import llvmlite.binding as llvm
    except ImportError:
        return "unknown (no llvmlite)"
    name = os.environ.get("NUMBA_CPU_NAME") or llvm.get_host_cpu_name()
    held = os.environ.get("NUMBA_CPU_FEATURES")
    if held:
        enabled = {feature[1:] for feature in held.split(",") if feature.startswith("+")}
    else:
        enabled = {feature for feature, on in llvm.get_host_cpu_features().items() if on}
    widest = "AVX-512" if "avx512f" in enabled else "AVX2" if "avx2" in enabled else "below AVX2"
    return f"{name} ({widest}{', held' if held else ''})"


def load_average() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def scored_through(model: Any, caught: list[Any]) -> str:
    """How kgeval scored ``model``: the form its view offers, or the reason a form was refused (``caught``: the
    warnings its evaluation recorded)."""
    from kgeval._inputs import resolve_model
    from kgeval.exceptions import FastPathWarning

    refused = [str(w.message) for w in caught if issubclass(w.category, FastPathWarning)]
    if refused:
        return "own methods (" + refused[0].split(":", 1)[-1].strip()[:80] + ")"
    view = resolve_model(model, None, None).view
    if hasattr(view, "kgeval_candidates") and hasattr(view, "kgeval_relation_candidates"):
        return "query/candidate tails, relation-table heads"
    if hasattr(view, "kgeval_relation_candidates"):
        return "relation table"
    if hasattr(view, "kgeval_candidates"):
        targets = getattr(view, "kgeval_targets", ("head", "tail"))
        return "query/candidate" + ("" if len(targets) == 2 else f" ({', '.join(targets)} only)")
    return "own methods"


def format_table(rows: list[list[str]], header: list[str]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def run_rounds(script: str, contenders: Sequence[str], argv: list[str], rounds: int) -> list[dict[str, dict[str, Any]]]:
    """``rounds`` rounds, each running every contender of ``script`` once in its own subprocess, in order."""
    return [{name: run_contender(script, name, argv) for name in contenders} for _ in range(rounds)]


def print_rounds(
    rounds: list[dict[str, dict[str, Any]]],
    contenders: Sequence[str],
    ratios: Sequence[tuple[str, str, str]],
    mrr_digits: int = 4,
) -> None:
    """Print the contenders' table (each one's best round, its note: distinct query rows or MRR) and each
    (label, numerator, denominator) ratio, taken within each round; the best round's first."""
    rows = []
    for name in contenders:
        r = best_of_rounds([round_[name] for round_ in rounds])
        if "skipped" in r:
            rows.append([name, "-", "-", "-", r["skipped"]])
            continue
        note = (f"{r['rows']:,} distinct query rows" if "rows" in r
                else f"MRR {r.get('mrr', float('nan')):.{mrr_digits}f}")  # fmt: skip
        rows.append([name, f"{r['seconds']:.3f}", f"{r['peak_rss_mib']:.0f}", f"{r['extra_rss_mib']:.0f}", note])
    print(format_table(rows, ["contender", "best s", "peak RSS MiB", "extra RSS MiB", "note"]))
    print("\n## ratios (within each round; the best round's)\n")
    for label, numerator, denominator in ratios:
        measured = [r[numerator]["seconds"] / r[denominator]["seconds"] for r in rounds
                    if "seconds" in r[numerator] and "seconds" in r[denominator]]  # fmt: skip
        print(f"- {label}: " + (f"{min(measured):.2f}x (rounds: {', '.join(f'{x:.2f}' for x in measured)})"
                                if measured else "not measured"))  # fmt: skip


#: ogbl-wikikg2's sizes: entities, relations, known triples (train + valid + test), test triples
WIKIKG2 = {"entities": 2_500_604, "relations": 535, "known": 16_109_182, "test": 598_543}


def wikikg2_like(scale: float = 1.0, test_triples: int | None = None, seed: int = 0) -> tuple[dict, Any, Any]:
    """A random graph of ogbl-wikikg2's size times ``scale``: (sizes, known triples (m, 3), test triples (n, 3));
    the test triples are drawn from the known ones, ``test_triples`` of them when given."""
    sizes = {key: max(2, int(value * scale)) for key, value in WIKIKG2.items()}
    if scale >= 0.01:
        sizes["relations"] = WIKIKG2["relations"]
    if test_triples is not None:
        sizes["test"] = min(test_triples, sizes["known"])
    generator = torch.Generator().manual_seed(seed)
    known = torch.stack([
        torch.randint(sizes["entities"], (sizes["known"],), generator=generator),
        torch.randint(sizes["relations"], (sizes["known"],), generator=generator),
        torch.randint(sizes["entities"], (sizes["known"],), generator=generator),
    ], dim=1)  # fmt: skip
    test = known[torch.randperm(sizes["known"], generator=generator)[: sizes["test"]]]
    return sizes, known, test
