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


#: query rows of the probe a resumable evaluation scores first (what the model scores identifies it in the progress
#: file: kgeval._fingerprints.ScoreSignature): two queries of each side
PROBE_ROWS = 4


def crash_and_resume(umls, distmult, tmp_path, fail_after: int, evaluator: RankBasedEvaluator, **kwargs):
    """(uninterrupted results, resumed results, rows the uninterrupted run scored, rows of the crashed + resumed
    calls less their identity probes' rows). Give an evaluator with ``check_fast_path=False``: the fast path's
    probes (a few more rows per call) are then off, and the rows counted are the ranking's and the identity
    probe's."""
    kwargs = {"additional_filter_triples": [umls.train, umls.valid], "use_tqdm": False, "batch_size": 64, **kwargs}
    whole = CrashingScores(distmult)
    expected = evaluator.evaluate(whole, umls.test, **kwargs)
    path = tmp_path / "progress.pt"
    first = CrashingScores(distmult, fail_after=fail_after)
    with pytest.raises(Crash):
        evaluator.evaluate(first, umls.test, progress_path=path, save_every=0, **kwargs)
    assert path.exists() == (first.rows > PROBE_ROWS)  # saved after each batch, if one was done
    second = CrashingScores(distmult)
    resumed = evaluator.evaluate(second, umls.test, progress_path=path, save_every=0, **kwargs)
    assert not path.exists()  # removed on success
    probes = min(first.rows, PROBE_ROWS) + PROBE_ROWS  # the crashed call may have stopped in its probe
    return expected, resumed, whole.rows, first.rows + second.rows - probes


@pytest.mark.parametrize("fail_after", [0, 1, 200, 400, 700])
@pytest.mark.parametrize("filtered", [True, "both"])
def test_a_crash_resumed_gives_the_uninterrupted_results_scoring_only_what_was_left(
    umls, distmult, tmp_path, fail_after: int, filtered
) -> None:
    expected, resumed, total, scored = crash_and_resume(
        umls, distmult, tmp_path, fail_after, RankBasedEvaluator(filtered=filtered, check_fast_path=False)
    )
    assert resumed == expected
    if filtered == "both":
        assert resumed.raw == expected.raw
    assert scored == total  # nothing scored twice: the crash came between two model calls, each batch saved


def test_type_constraints_groups_resume(umls, distmult, tmp_path) -> None:
    """With type constraints a side is ranked one relation group at a time; a crash inside one resumes there."""
    constraints = TypeConstraints.from_triples(umls.train)
    expected, resumed, total, scored = crash_and_resume(
        umls, distmult, tmp_path, 300, RankBasedEvaluator(check_fast_path=False), type_constraints=constraints,
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
    cases = [
        (
            "mapped_triples",
            lambda: RankBasedEvaluator().evaluate(CrashingScores(distmult), umls.valid, progress_path=path, **kwargs),
        ),
        (
            "additional_filter_triples",
            lambda: RankBasedEvaluator().evaluate(
                CrashingScores(distmult), umls.test, progress_path=path, **{**kwargs, "additional_filter_triples": None}
            ),
        ),
        (
            "evaluator_options",
            lambda: RankBasedEvaluator(ks=(1, 10)).evaluate(
                CrashingScores(distmult), umls.test, progress_path=path, **kwargs
            ),
        ),
        (
            "targets",
            lambda: RankBasedEvaluator().evaluate(
                CrashingScores(distmult), umls.test, progress_path=path, targets=("tail",), **kwargs
            ),
        ),
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


def test_a_progress_file_of_another_model_is_started_over_with_a_warning(umls, distmult, tmp_path) -> None:
    """Another model's file (other weights) is not resumed, nor refused: the evaluation starts over, says so in a
    ResumeWarning and ends with the other model's own results (the file replaced, then removed)."""
    from kgeval.exceptions import ResumeWarning

    path = tmp_path / "progress.pt"
    kwargs = {"additional_filter_triples": [umls.train, umls.valid], "use_tqdm": False, "batch_size": 64}
    with pytest.raises(Crash):
        RankBasedEvaluator().evaluate(CrashingScores(distmult, 300), umls.test, progress_path=path, save_every=0,
                                      **kwargs)  # fmt: skip
    other_model = DistMult(umls.num_entities, umls.num_relations, dim=16, seed=1)
    with pytest.warns(ResumeWarning, match=r"holds the ranks of another model \(its weights or buffers differ\)"):
        got = RankBasedEvaluator().evaluate(CrashingScores(other_model), umls.test, progress_path=path, **kwargs)
    assert got == RankBasedEvaluator().evaluate(other_model, umls.test, **kwargs) and not path.exists()


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
        # every call scores the 4 rows of the identity probe first: the failed and the resuming call both did
        assert 0 < failed_rows < whole_rows and failed_rows + resumed_rows == whole_rows + PROBE_ROWS


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


# -- what a review found ------------------------------------------------------------------------------------------
def _crash_then(evaluate_first, evaluate_second, path) -> object:
    """The first call crashes after saving some batches; the second call's outcome (results or the exception)."""
    with pytest.raises(Crash):
        evaluate_first(path)
    assert path.exists()
    try:
        return evaluate_second(path)
    except ValueError as error:
        return error


def test_a_changed_plain_setting_of_the_model_is_started_over(umls, tmp_path) -> None:
    """TransE p=1 crashed, resumed as TransE p=2 with the same weights (p is a plain attribute, not a tensor): the
    file was taken without a word (MRR 0.0519 where 0.0492), then resumed with a warning naming the attribute
    (kgeval could not tell a setting from a counter). Now the probe of what the model scores tells them apart: the
    file is another model's, started over with a ResumeWarning, and the results are TransE p=2's own."""
    from kgeval.exceptions import ResumeWarning
    from kgeval.models import TransE

    kwargs = {"additional_filter_triples": [umls.train, umls.valid], "use_tqdm": False, "batch_size": 64}
    one, two = (TransE(umls.num_entities, umls.num_relations, dim=16, p=p, seed=0) for p in (1, 2))
    path = tmp_path / "progress.pt"
    with pytest.raises(Crash):
        RankBasedEvaluator().evaluate(CrashingScores(one, fail_after=200), umls.test, progress_path=path,
                                      save_every=0, **kwargs)  # fmt: skip
    with pytest.warns(ResumeWarning, match=r"holds the ranks of another model \(it scores otherwise"):
        got = RankBasedEvaluator().evaluate(CrashingScores(two), umls.test, progress_path=path, save_every=0, **kwargs)
    assert got == RankBasedEvaluator().evaluate(two, umls.test, **kwargs)


def test_two_closures_of_one_factory_are_two_score_functions(umls, distmult, tmp_path) -> None:
    """score_fn was identified by its name: +DistMult and -DistMult, both make.<locals>.f, shared a file."""
    import torch

    calls = {"n": 0, "fail": None}

    def make(sign: float):
        def f(h, r, t):
            calls["n"] += 1
            if calls["fail"] is not None and calls["n"] > calls["fail"]:
                raise Crash("the first run's end")
            return sign * distmult.score_hrt(torch.stack([h, r, t], 1)).reshape(-1)

        return f

    kwargs = {"additional_filter_triples": [umls.train, umls.valid], "use_tqdm": False, "batch_size": 64,
              "save_every": 0}  # fmt: skip
    calls["fail"] = 40

    def first(path):
        return RankBasedEvaluator().evaluate(distmult, umls.test, score_fn=make(1.0), progress_path=path, **kwargs)

    def second(path):
        calls["fail"] = None
        return RankBasedEvaluator().evaluate(distmult, umls.test, score_fn=make(-1.0), progress_path=path, **kwargs)

    outcome = _crash_then(first, second, tmp_path / "progress.pt")
    assert isinstance(outcome, ValueError) and "score_fn" in str(outcome)


def test_a_few_swapped_ids_are_another_set_of_triples(umls, distmult, tmp_path) -> None:
    """Heads of four test rows changed by +1, -1, -1, +1 kept the old checksum (weights in arithmetic progression)
    and the other triples' evaluation resumed the first's."""
    kwargs = {"additional_filter_triples": [umls.train, umls.valid], "use_tqdm": False, "batch_size": 64,
              "save_every": 0}  # fmt: skip
    edited = umls.test.clone()
    edited[:4, 0] = (edited[:4, 0] + torch_tensor([1, -1, -1, 1])).clamp(0, umls.num_entities - 1)

    def first(path):
        return RankBasedEvaluator().evaluate(CrashingScores(distmult, fail_after=200), umls.test,
                                             progress_path=path, **kwargs)  # fmt: skip

    def second(path):
        return RankBasedEvaluator().evaluate(CrashingScores(distmult), edited, progress_path=path, **kwargs)

    outcome = _crash_then(first, second, tmp_path / "progress.pt")
    assert isinstance(outcome, ValueError) and "mapped_triples" in str(outcome)


def torch_tensor(values):
    import torch

    return torch.tensor(values)


def test_two_threads_save_to_one_path_without_clashing(umls, distmult, tmp_path) -> None:
    """Two evaluations in two threads of one process, one progress path: their temporary files were one name
    (the process id only), and one thread's rename found the other's file gone."""
    import threading

    from kgeval.models import DistMult

    twin = DistMult(umls.num_entities, umls.num_relations, dim=16, seed=0)  # another object, the same weights
    errors: list[BaseException] = []

    def run(model) -> None:
        try:
            RankBasedEvaluator().evaluate(model, umls.test, additional_filter_triples=[umls.train, umls.valid],
                                          progress_path=tmp_path / "shared.pt", save_every=0, batch_size=16,
                                          use_tqdm=False)  # fmt: skip
        except FileNotFoundError as error:
            errors.append(error)

    threads = [threading.Thread(target=run, args=(model,)) for model in (distmult, twin)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


@pytest.mark.parametrize("seconds", [float("nan"), float("inf"), -1.0])
def test_save_every_is_a_finite_number_of_seconds(umls, distmult, tmp_path, seconds: float) -> None:
    """NaN passed the >= 0 check and then never saved (elapsed >= nan is always False)."""
    with pytest.raises(ValueError, match="save_every must be a finite number of seconds >= 0"):
        RankBasedEvaluator().evaluate(distmult, umls.test[:5], progress_path=tmp_path / "p.pt", save_every=seconds,
                                      use_tqdm=False)  # fmt: skip


def test_a_save_that_runs_out_of_memory_inside_a_retry_records_nothing_twice(
    umls, distmult, tmp_path, monkeypatch
) -> None:
    """A batch's counts are recorded, then its save runs out of memory; the retry re-runs the batch's halves. They
    were recorded again, and the side's counts came out shifted (MRR 0.062213 where 0.062250)."""
    import torch

    from kgeval._engine import resume

    kwargs = {"additional_filter_triples": [umls.train, umls.valid], "use_tqdm": False}
    expected = RankBasedEvaluator().evaluate(distmult, umls.test, **kwargs)
    original = resume.EvaluationProgress.save
    saves = {"n": 0}

    def flaky(self) -> None:
        saves["n"] += 1
        if saves["n"] == 3:
            self.save_every = 1e9  # no save due again before the side ends
            raise torch.OutOfMemoryError("out of memory while saving (simulated)")
        original(self)

    monkeypatch.setattr(resume.EvaluationProgress, "save", flaky)
    from kgeval._engine import loop

    monkeypatch.setattr(loop.batching, "shape_key", lambda *args: "one shape")
    evaluator = RankBasedEvaluator()  # automatic sizes (the retry halves a failing batch), batches of 100 tasks
    evaluator._state.batch_sizes["one shape"] = 100  # as an earlier out-of-memory retry leaves them remembered
    got = evaluator.evaluate(distmult, umls.test, progress_path=tmp_path / "p.pt", save_every=0, **kwargs)
    assert saves["n"] >= 3 and got == expected


@pytest.mark.parametrize(("first", "second"), [({"filtered": "time-aware"}, {"filtered": "static"}),
                                               ({}, {"inverse_relations": 3})])  # fmt: skip
def test_a_temporal_setting_is_part_of_the_evaluation(tmp_path, first: dict, second: dict) -> None:
    """The time-aware and the static filter (both 'filtered' to the engine, with another relation stride), and a
    view with inverse relations, resumed each other's files (MRR 0.18156 where 0.18209)."""
    import torch

    from kgeval.models.temporal import TNTComplEx
    from kgeval.variants.temporal import TemporalRankBasedEvaluator

    generator = torch.Generator().manual_seed(0)
    quadruples = torch.stack([torch.randint(0, 30, (80,), generator=generator),
                              torch.randint(0, 3, (80,), generator=generator),
                              torch.randint(0, 30, (80,), generator=generator),
                              torch.randint(0, 6, (80,), generator=generator)], dim=1)  # fmt: skip
    known = quadruples.clone()
    known[:, 3] = (known[:, 3] + 1) % 6
    model = TNTComplEx(30, 6, 6, dim=8, seed=0).eval()  # 6 relations: 3, and their inverses
    kwargs = {"additional_filter_quadruples": [known], "num_entities": 30, "num_times": 6, "use_tqdm": False,
              "batch_size": 8, "observe": None, "save_every": 0}  # fmt: skip
    options = {"filtered": "time-aware"}

    def call(settings: dict, crash: bool, path):
        evaluator = TemporalRankBasedEvaluator(**{**options, **{k: v for k, v in settings.items() if k == "filtered"}})
        scored = CrashingScores(model, fail_after=40 if crash else None)
        extra = {k: v for k, v in settings.items() if k != "filtered"}
        return evaluator.evaluate(scored, quadruples, progress_path=path, **kwargs, **extra)

    outcome = _crash_then(lambda path: call(first, True, path), lambda path: call(second, False, path),
                          tmp_path / "progress.pt")  # fmt: skip
    assert isinstance(outcome, ValueError) and "belongs to another evaluation" in str(outcome), outcome
