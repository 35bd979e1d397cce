"""Benchmark scripts that a later session runs on hardware this one lacks work end to end here, shrunk."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each benchmark runs once, in subprocesses

ROOT = Path(__file__).resolve().parents[1]


def test_the_gpu_benchmark_runs_on_cpu(tmp_path: Path) -> None:
    """benchmarks/gpu.py's synthetic wikikg2-sized part, shrunk, on CPU with every kernel (triton interpreted): the
    script a GPU session will run works end to end. Its GPU figures come from a GPU."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--device", "cpu", "--part", "wikikg2", "--scale",
         "0.0002", "--repeats", "1"],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "kgeval [ eager]" in done.stdout


def test_the_sharding_benchmark_runs_and_checks_its_ranks(tmp_path: Path) -> None:
    """benchmarks/sharding.py, shrunk: 2 gloo ranks rank like one process (the script exits otherwise) and the
    projection is printed."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "sharding.py"), "--entities", "20000", "--dim", "16", "--tasks",
         "20", "--known", "2000", "--kernel", "eager"],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ranks identical to the single process on every rank" in done.stdout
    assert "WikiKG90Mv2" in done.stdout


def test_the_floor_benchmark_runs(tmp_path: Path) -> None:
    """benchmarks/floor.py on the shipped UMLS, one round: it prints the ratio of each kernel to the GEMM floor."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "floor.py"), "--dataset", "umls", "--rounds", "1", "--kernels",
         "eager"],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "[eager] kgeval median" in done.stdout and "kgeval / floor of the same round" in done.stdout


def test_the_tile_shapes_benchmark_runs(tmp_path: Path) -> None:
    """benchmarks/tile_shapes.py, shrunk: every layout it compares is timed and printed."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "tile_shapes.py"), "--rows", "2048", "--candidates", "1100",
         "--dim", "16", "--repeats", "1"],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    for label in ("strided 576:", "contiguous 2048:", "strided 1024 + pass:", "hot 2048:"):
        assert label in done.stdout, label


def test_the_ab_worker_builds_each_model() -> None:
    """benchmarks/ab_trees.py's worker names the --model it is given (TransE: the "l2" fast path)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import ab_trees
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    code = ab_trees.WORKER.format(tree="/x", dataset="umls", dim=8, kernel="eager", repeats=1, model="TransE")
    assert "from kgeval.models import TransE" in code and "model = TransE(" in code


def test_the_count_kernel_benchmark_runs(tmp_path: Path) -> None:
    """benchmarks/count_kernel.py, one repeat: the loops' ns per score, and the interleaved comparison of the compare
    loop with its widening form."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "count_kernel.py"), "--repeats", "1"],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "blocks in bands (numba)" in done.stdout
    assert "64-bit sums (widening)" in done.stdout


def test_the_dispatch_benchmark_counts_every_path(tmp_path: Path) -> None:
    """benchmarks/dispatch.py on UMLS, shrunk: every path counted, the device's (either layout) within its bound of
    reads (tests/engine/test_dispatch_counts.py's: 12, the stability probe's read per side included)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "dispatch.py"), "--dataset", "umls", "--triples", "50"],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    for path in ("device", "device-sorted", "cpu"):
        assert f"path '{path}'" in done.stdout, done.stdout
    for path in ("device", "device-sorted"):
        totals = done.stdout.split(f"path '{path}'")[1].split("\n")[1]  # "N ops, M sync ops"
        assert int(totals.split(" ops, ")[1].split()[0]) <= 12, done.stdout


@pytest.mark.pykeen
def test_the_classification_benchmark_runs_and_agrees_with_pykeen(tmp_path: Path) -> None:
    """benchmarks/classification.py --quick (Nations, d=8): every evaluator measured in its own process, kgeval's
    66 numbers equal to PyKEEN's on the shared triples, TorchKGE's thresholds equal to kgeval's, the rows written."""
    import json

    pytest.importorskip("pykeen")
    pytest.importorskip("torchkge")
    rows = tmp_path / "rows.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "classification.py"), "--quick", "--json", str(rows)],
        capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    agreement = next(line for line in done.stdout.splitlines() if "agreement:" in line)
    assert "66 numbers" in agreement and float(agreement.split("= ")[1].split()[0]) < 1e-12, agreement
    assert "thresholds identical" in done.stdout
    written = json.loads(rows.read_text())["rows"]
    assert len(written) == 6 and all("seconds" in row and "peak_rss_mib" in row for row in written), written


@pytest.mark.pykeen
def test_the_models_benchmark_runs_and_compares_mrrs(tmp_path: Path) -> None:
    """benchmarks/models.py --quick with two interactions and a wrapper (Nations, d=8), after a warm-up: each
    evaluator in its own process, the form kgeval used named, the MRRs of kgeval and PyKEEN's evaluator on the same
    model equal, the rows written."""
    import json

    pytest.importorskip("pykeen")
    rows = tmp_path / "rows.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "models.py"), "--quick", "--models",
         "TransE,NTN,MonotonicAffineTransformation(DistMult)", "--warm-up", "3", "--json", str(rows)],
        capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    written = json.loads(rows.read_text())
    assert [row["interaction"] for row in written] == ["TransE", "NTN", "MonotonicAffineTransformation(DistMult)"]
    assert all(row["mrr_equal"] is True and row["kgeval_s"] > 0 for row in written), written
    assert written[0]["form"] == "query/candidate" and written[2]["form"] == "query/candidate"
    assert written[1]["form"].startswith("own methods")
    assert "| interaction | form |" in done.stdout and "warm-up 3 triples" in done.stdout


def test_the_torchkge_benchmark_runs_and_compares_ranks(tmp_path: Path) -> None:
    """benchmarks/torchkge_compare.py on Nations, d=8: TorchKGE's evaluator and kgeval on the same model object, the
    rows written in --models' order, the ranks equal to TorchKGE's filtered ones, the form kgeval used named (a
    query/candidate form, a relation table; ConvKB has none)."""
    import json

    pytest.importorskip("torchkge")
    rows = tmp_path / "rows.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "torchkge_compare.py"), "--dataset", "nations", "--dim", "8",
         "--triples", "30", "--repeats", "1", "--models", "TransE-L2,TransH,DistMult,ConvKB", "--json", str(rows)],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    written = json.loads(rows.read_text())
    assert [row["model"] for row in written] == ["TransE-L2", "TransH", "DistMult", "ConvKB"]
    assert not [row["error"] for row in written if "error" in row]
    assert all(row["mrr_equal"] is True and row["ranks_differ"] == 0 and row["kgeval_s"] > 0 for row in written)
    assert [row["form"] for row in written[:3]] == ["query/candidate", "relation table", "query/candidate"]
    assert written[3]["form"].startswith("own methods (no form:")
    assert "| model | form |" in done.stdout
