"""Resumable evaluations (evaluate(..., progress_path=...)): an interrupted evaluation -- a crash in the model, a
SIGKILL, under 2 gloo ranks -- resumed by a later call ends with exactly the uninterrupted results, scoring only what
was left; a progress file of another evaluation is refused; the file is removed on success."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kgeval import RankBasedEvaluator, RankBasedMetricResults, TypeConstraints
from kgeval.datasets import load_shipped_dataset
from kgeval.models import DistMult
from tests.engine.test_distributed import assert_same_results
from tests.support.distributed import Crash, CrashingScores
from tests.support.resume_worker import evaluate as worker_evaluate

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def umls():
    return load_shipped_dataset("umls")


@pytest.fixture(scope="module")
def distmult(umls):
    return DistMult(umls.num_entities, umls.num_relations, dim=16, seed=0)


def crash_and_resume(umls, distmult, tmp_path, fail_after: int, evaluator: RankBasedEvaluator, **kwargs):
    """(uninterrupted results, resumed results, rows the uninterrupted run scored, rows of the crashed + resumed)."""
    kwargs = {"additional_filter_triples": [umls.train, umls.valid], "use_tqdm": False, "batch_size": 64, **kwargs}
    whole = CrashingScores(distmult)
    expected = evaluator.evaluate(whole, umls.test, **kwargs)
    path = tmp_path / "progress.pt"
    first = CrashingScores(distmult, fail_after=fail_after)
    with pytest.raises(Crash):
        evaluator.evaluate(first, umls.test, progress_path=path, save_every=0, **kwargs)
    assert path.exists() == (first.rows > 0)  # saved after each batch, if one was done
    second = CrashingScores(distmult)
    resumed = evaluator.evaluate(second, umls.test, progress_path=path, save_every=0, **kwargs)
    assert not path.exists()  # removed on success
    return expected, resumed, whole.rows, first.rows + second.rows


@pytest.mark.parametrize("fail_after", [0, 1, 200, 400, 700])
@pytest.mark.parametrize("filtered", [True, "both"])
def test_a_crash_resumed_gives_the_uninterrupted_results_scoring_only_what_was_left(
    umls, distmult, tmp_path, fail_after: int, filtered
) -> None:
    expected, resumed, total, scored = crash_and_resume(
        umls, distmult, tmp_path, fail_after, RankBasedEvaluator(filtered=filtered)
    )
    assert resumed == expected
    if filtered == "both":
        assert resumed.raw == expected.raw
    assert scored == total  # nothing scored twice: the crash came between two model calls, each batch saved


def test_type_constraints_groups_resume(umls, distmult, tmp_path) -> None:
    """With type constraints a side is ranked one relation group at a time; a crash inside one resumes there."""
    constraints = TypeConstraints.from_triples(umls.train)
    expected, resumed, total, scored = crash_and_resume(
        umls, distmult, tmp_path, 300, RankBasedEvaluator(), type_constraints=constraints,
        drop_outside_restriction=True,
    )  # fmt: skip
    assert resumed == expected and scored == total


def test_a_progress_file_of_another_evaluation_is_refused(umls, distmult, tmp_path) -> None:
    path = tmp_path / "progress.pt"
    kwargs = {"additional_filter_triples": [umls.train, umls.valid], "use_tqdm": False, "batch_size": 64}
    with pytest.raises(Crash):
        RankBasedEvaluator().evaluate(CrashingScores(distmult, 300), umls.test, progress_path=path, save_every=0,
                                      **kwargs)  # fmt: skip
    saved = path.read_bytes()
    other_model = DistMult(umls.num_entities, umls.num_relations, dim=16, seed=1)
    cases = [
        ("model", lambda: RankBasedEvaluator().evaluate(CrashingScores(other_model), umls.test, progress_path=path,
                                                        **kwargs)),
        ("mapped_triples", lambda: RankBasedEvaluator().evaluate(CrashingScores(distmult), umls.valid,
                                                                 progress_path=path, **kwargs)),
        ("additional_filter_triples", lambda: RankBasedEvaluator().evaluate(
            CrashingScores(distmult), umls.test, progress_path=path, **{**kwargs, "additional_filter_triples": None})),
        ("evaluator_options", lambda: RankBasedEvaluator(ks=(1, 10)).evaluate(CrashingScores(distmult), umls.test,
                                                                              progress_path=path, **kwargs)),
        ("targets", lambda: RankBasedEvaluator().evaluate(CrashingScores(distmult), umls.test, progress_path=path,
                                                          targets=("tail",), **kwargs)),
    ]
    for name, call in cases:
        with pytest.raises(ValueError, match=rf"belongs to another evaluation: .*{name}"):
            call()
        assert path.read_bytes() == saved  # refused, never overwritten
    path.write_text("not a progress file")
    with pytest.raises(ValueError, match="not a kgeval progress file"):
        RankBasedEvaluator().evaluate(CrashingScores(distmult), umls.test, progress_path=path, **kwargs)
    with pytest.raises(ValueError, match="save_every"):
        RankBasedEvaluator().evaluate(distmult, umls.test, progress_path=tmp_path / "p", save_every=-1)
    with pytest.raises(ValueError, match="does not exist"):
        RankBasedEvaluator().evaluate(distmult, umls.test, progress_path=tmp_path / "missing" / "p")


def test_saves_are_throttled(umls, distmult, tmp_path, monkeypatch) -> None:
    """With save_every > 0 the file is written at most that often (here: never within the evaluation's first
    second), so a fast evaluation pays no saves."""
    from kgeval._engine import resume

    saves = []
    monkeypatch.setattr(resume.EvaluationProgress, "save", lambda self: saves.append(1))
    RankBasedEvaluator().evaluate(distmult, umls.test, progress_path=tmp_path / "p", save_every=3600,
                                  use_tqdm=False, batch_size=64)  # fmt: skip
    assert saves == []
    RankBasedEvaluator().evaluate(distmult, umls.test, progress_path=tmp_path / "p", save_every=0,
                                  use_tqdm=False, batch_size=64)  # fmt: skip
    assert len(saves) > 5


def test_two_gloo_ranks_resume(tmp_path, monkeypatch) -> None:
    """Under 2 gloo ranks each rank fails after part of its share; the resuming call returns the single-process
    results, each rank scoring only what it had left (its own progress file, removed at the end)."""
    from tests.support.distributed import SCENARIOS, run_scenarios

    monkeypatch.setenv("KGEVAL_TEST_PROGRESS_DIR", str(tmp_path))
    expected, _ = SCENARIOS["resumed"](None)
    runs = tmp_path / "runs"
    runs.mkdir()
    for outcome in run_scenarios(2, ["resumed"], runs):
        status, value = outcome["resumed"][0], outcome["resumed"][1:]
        assert status == "ok", value
        results, (uninterrupted, failed_rows, resumed_rows, whole_rows, between, after) = value[0]
        assert results == uninterrupted  # exactly the uninterrupted distributed evaluation
        assert_same_results(results, expected)  # the single process's ranks; metrics to float rounding
        assert between and not after
        assert 0 < failed_rows < whole_rows and failed_rows + resumed_rows == whole_rows


@pytest.mark.slow
def test_sigkill_mid_evaluation_then_resume(tmp_path) -> None:
    """A subprocess killed with SIGKILL while evaluating (after some batches were saved) is resumed by a second
    process: the results equal an uninterrupted evaluation's, and at most the batch in flight is scored twice."""
    expected, total_rows = worker_evaluate(None)
    path, out = tmp_path / "progress.pt", tmp_path / "out.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    worker = str(REPO / "tests" / "support" / "resume_worker.py")
    slow = subprocess.Popen([sys.executable, worker, str(path), str(out), "--slow"], stdout=subprocess.PIPE,
                            text=True, env=env)  # fmt: skip
    killed_rows = 0
    deadline = time.monotonic() + 120
    assert slow.stdout is not None
    for line in slow.stdout:
        killed_rows = int(line.split()[1])
        if killed_rows >= total_rows // 2 and path.exists():
            os.kill(slow.pid, signal.SIGKILL)
            break
        assert time.monotonic() < deadline
    slow.wait()
    assert slow.returncode == -signal.SIGKILL and path.exists() and not out.exists()
    done = subprocess.run([sys.executable, worker, str(path), str(out)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    assert RankBasedMetricResults.from_json(report["results"]) == expected
    redone = killed_rows + report["rows"] - total_rows
    assert 0 <= redone <= 64  # the batch in flight when killed (at most 64 query rows), nothing more
    assert report["rows"] < total_rows
    assert not path.exists()
