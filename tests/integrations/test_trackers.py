"""log_results against the real trackers in their offline / file modes: a W&B offline run (read back from
``run.summary`` and from the run's ``.wandb`` file), MLflow's file store and SQLite store (``get_metric_history``),
TensorBoard's ``SummaryWriter`` (tensorboard's ``EventAccumulator``) and Lightning's ``CSVLogger`` (its
``metrics.csv``). Every logged value is compared with ``results.to_flat_dict()`` of a real evaluation (DistMult on
the shipped Nations graph). Each tracker's tests skip where its package is not installed; nothing reaches the
network (W&B offline and silent, no telemetry)."""

from __future__ import annotations

import csv
import glob
import json
import math
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from kgeval import RankBasedEvaluator
from kgeval.datasets import load_shipped_dataset
from kgeval.integrations.trackers import HEADLINE_KEYS, MLFLOW_NAME_PATTERN, log_results, select_values
from kgeval.models import DistMult

#: set for every test here, before any tracker starts: nothing leaves the machine
OFFLINE = {
    "WANDB_MODE": "offline",
    "WANDB_SILENT": "true",
    "WANDB_CONSOLE": "off",
    "WANDB_DISABLE_GIT": "true",
    "WANDB_DISABLE_CODE": "true",
    "WANDB_ERROR_REPORTING": "false",
    "MLFLOW_ENABLE_TELEMETRY": "false",
    "DO_NOT_TRACK": "true",
}


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name, value in OFFLINE.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "wandb-cache"))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))


@pytest.fixture(scope="module")
def results() -> Any:
    data = load_shipped_dataset("nations")
    model = DistMult(data.num_entities, data.num_relations, dim=8, seed=3)
    return RankBasedEvaluator().evaluate(model, **data.evaluation_kwargs("test"), use_tqdm=False)


@pytest.fixture(scope="module")
def undefined() -> Any:
    """Results with undefined (NaN) metrics: 3 entities, all scores tied, so Hits@3/5/10 cannot be adjusted."""
    model = DistMult(3, 1, dim=2, seed=0)
    with torch.no_grad():
        model.entity_embeddings.weight.zero_()
    return RankBasedEvaluator().evaluate(model, torch.tensor([[0, 0, 1], [1, 0, 2]]), use_tqdm=False)


def expected(results: Any, keys: str = "all", prefix: str = "") -> dict[str, float]:
    flat = results.to_flat_dict()
    chosen = list(flat) if keys == "all" else [key for key in HEADLINE_KEYS if key in flat]
    return {f"{prefix}{key}": flat[key] for key in chosen if not math.isnan(flat[key])}


# -- selection, checks: no tracker package needed ----------------------------------------------------------------
def test_the_headline_is_small_stable_and_held_by_a_head_and_tail_evaluation(results: Any) -> None:
    flat = results.to_flat_dict()
    assert len(HEADLINE_KEYS) == len(set(HEADLINE_KEYS)) == 22
    assert HEADLINE_KEYS[0] == "both.realistic.inverse_harmonic_mean_rank"
    present = [key for key in HEADLINE_KEYS if key in flat]
    assert present == [key for key in HEADLINE_KEYS if not key.startswith("relation.")]  # 17: no relation side
    assert select_values(results) == {key: flat[key] for key in present}
    assert select_values(results, "all") == flat and len(flat) == 297


def test_requested_keys_in_any_spelling_are_logged_under_their_flat_names(results: Any) -> None:
    got = select_values(results, ["mrr", "tail.best.hits@10", "head.pessimistic.arithmetic_mean_rank"])
    assert got == {
        "both.realistic.inverse_harmonic_mean_rank": results.get_metric("mrr"),
        "tail.optimistic.hits_at_10": results.get_metric("tail.optimistic.hits_at_10"),
        "head.pessimistic.arithmetic_mean_rank": results.get_metric("head.worst.mr"),
    }
    assert list(select_values(results, ["both.realistic.adjusted_hits_at_k"])) == ["both.realistic.adjusted_hits_at_k"]
    with pytest.raises(KeyError):
        select_values(results, ["both.realistic.hits_at_7"])
    with pytest.raises(ValueError, match="'headline', 'all'"):
        select_values(results, "mrr")
    with pytest.raises(TypeError):
        select_values(results, [1, 2])  # type: ignore[list-item]


def test_undefined_values_are_skipped(undefined: Any) -> None:
    flat = undefined.to_flat_dict()
    nan = {key for key, value in flat.items() if math.isnan(value)}
    assert len(nan) > 10
    got = select_values(undefined, "all")
    assert set(got) == set(flat) - nan
    assert all(got[key] == flat[key] for key in got)


@pytest.mark.parametrize("tracker", [object(), {}, print, "wandb", None])
def test_an_unknown_tracker_is_refused_naming_the_supported_ones(results: Any, tracker: Any) -> None:
    with pytest.raises(TypeError, match="wandb Run.*mlflow.*SummaryWriter.*Lightning logger"):
        log_results(results, tracker)


def test_step_and_run_id_are_checked(results: Any) -> None:
    with pytest.raises(TypeError, match="step"):
        log_results(results, object(), step=1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="step"):
        log_results(results, object(), step=-1)
    with pytest.raises(ValueError, match="MlflowClient"):
        log_results(results, object(), run_id="abc")


def test_every_kgeval_key_is_a_valid_mlflow_name(results: Any, undefined: Any) -> None:
    for name in [*results.to_flat_dict(), *undefined.to_flat_dict(), *HEADLINE_KEYS]:
        assert MLFLOW_NAME_PATTERN.fullmatch(f"validation/{name}"), name


def test_the_headline_dict_spells_hits_as_log_results_does_and_mlflow_accepts_it(results: Any) -> None:
    """One spelling of Hits@k: ``results.headline("val")`` names it with the token of the flat keys that
    log_results logs (``hits_at_10``), so every name is one MLflow accepts (it refuses the ``@``)."""
    headline = results.headline("val")
    flat = select_values(results, "all")  # what log_results logs, by name
    assert all(MLFLOW_NAME_PATTERN.fullmatch(name) for name in headline), list(headline)
    for k in results.ks:
        assert headline[f"val/hits_at_{k}"] == flat[f"both.realistic.hits_at_{k}"]
        assert headline[f"val/tail/hits_at_{k}"] == flat[f"tail.realistic.hits_at_{k}"]


def test_importing_the_module_imports_no_tracker() -> None:
    code = (
        "import sys, kgeval.integrations.trackers\n"
        "heavy = ('wandb', 'mlflow', 'tensorboard', 'torch.utils.tensorboard', 'lightning', 'pytorch_lightning')\n"
        "print([name for name in heavy if name in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.strip() == "[]"


# -- Weights & Biases ------------------------------------------------------------------------------------------
def wandb_run(wandb: Any, tmp_path: Path) -> Any:
    wanted = {"x_disable_stats": True, "x_disable_meta": True, "x_disable_machine_info": True, "console": "off"}
    fields = getattr(wandb.Settings, "model_fields", {})
    settings = wandb.Settings(**{key: value for key, value in wanted.items() if key in fields})
    return wandb.init(mode="offline", dir=tmp_path, project="kgeval-test", settings=settings)


def read_wandb_history(path: str, timeout: float = 30.0) -> dict[int, dict[str, Any]]:
    """step -> logged values, from a run's ``.wandb`` file: wandb's LevelDB-style log of protobuf ``Record`` (a
    7-byte file header, then 32 KiB blocks of records with 7-byte headers: CRC, length, FULL/FIRST/MIDDLE/LAST).
    ``run.finish()`` can return before wandb's service has written the file's last block: read until the run's
    ``exit`` record is there."""
    from wandb.proto import wandb_internal_pb2

    deadline = time.monotonic() + timeout
    while True:
        data = Path(path).read_bytes()
        if data[:4] != b":W&B":
            pytest.skip("unknown .wandb file format")
        block, position, pieces, history, ended = 32768, 7, [], {}, False
        while position + 7 <= len(data):
            left = block - position % block
            if left < 7:
                position += left
                continue
            _crc, length, kind = struct.unpack("<IHB", data[position : position + 7])
            if length == 0 and kind == 0:  # zero padding at the end of a block
                position += left
                continue
            pieces.append(data[position + 7 : position + 7 + length])
            position += 7 + length
            if kind in (1, 4):  # FULL, LAST
                record = wandb_internal_pb2.Record()
                record.ParseFromString(b"".join(pieces))
                pieces = []
                what = record.WhichOneof("record_type")
                ended = ended or what == "exit"
                if what == "history":
                    items = {"/".join([item.key, *item.nested_key]).lstrip("/"): json.loads(item.value_json)
                             for item in record.history.item}  # fmt: skip
                    history[record.history.step.num] = items
        if ended or time.monotonic() > deadline:
            return history
        time.sleep(0.05)


def test_wandb_offline_run_summary_holds_the_headline(results: Any, tmp_path: Path) -> None:
    wandb = pytest.importorskip("wandb")
    run = wandb_run(wandb, tmp_path)
    try:
        logged = log_results(results, run)
        assert logged == expected(results, "headline") and len(logged) == 17
        summary = run.summary._as_dict() if hasattr(run.summary, "_as_dict") else dict(run.summary)
        assert {key: summary[key] for key in logged} == logged
    finally:
        run.finish()


def test_wandb_history_holds_every_key_at_its_step(results: Any, tmp_path: Path) -> None:
    wandb = pytest.importorskip("wandb")
    run = wandb_run(wandb, tmp_path)
    try:
        first = log_results(results, run, step=3, prefix="validation/", keys="all")
        second = log_results(results, wandb, step=7, prefix="test/")  # the module: its current run
        sync_file = glob.glob(str(tmp_path / "wandb" / "offline-run-*" / "*.wandb"))
    finally:
        run.finish()
    assert first == expected(results, "all", "validation/") and len(first) == 297
    assert second == expected(results, "headline", "test/")
    history = read_wandb_history(sync_file[0])
    assert {key: history[3][key] for key in first} == first
    assert {key: history[7][key] for key in second} == second
    assert not any(key.startswith("validation/") for key in history[7])
    with pytest.raises(ValueError, match=r"wandb.init\(\)"):
        log_results(results, wandb)  # finished: no current run


# -- MLflow ------------------------------------------------------------------------------------------------------
@pytest.fixture
def mlflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """MLflow with its file store under tmp_path (MLflow 3 wants an opt-in for the file store)."""
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    mlflow.set_tracking_uri((tmp_path / "mlruns").as_uri())
    yield mlflow
    while mlflow.active_run() is not None:
        mlflow.end_run()
    mlflow.set_tracking_uri(None)


def metric_history(client: Any, run_id: str, names: Any) -> dict[str, list[tuple[int, float]]]:
    return {name: [(m.step, m.value) for m in client.get_metric_history(run_id, name)] for name in names}


def test_mlflow_module_logs_every_key_to_the_active_run(results: Any, mlflow: Any) -> None:
    with mlflow.start_run() as run:
        logged = log_results(results, mlflow, step=2, prefix="validation/", keys="all")
        log_results(results, mlflow, step=5, prefix="validation/", keys=["mrr"])
    assert logged == expected(results, "all", "validation/")
    history = metric_history(mlflow.MlflowClient(), run.info.run_id, logged)
    mrr = "validation/both.realistic.inverse_harmonic_mean_rank"
    assert history.pop(mrr) == [(2, logged[mrr]), (5, logged[mrr])]
    assert history == {name: [(2, value)] for name, value in logged.items() if name != mrr}
    assert len(mlflow.MlflowClient().get_run(run.info.run_id).data.metrics) == 297


def test_mlflow_client_with_run_id_and_a_run_object(results: Any, mlflow: Any) -> None:
    client = mlflow.MlflowClient()
    run_id = client.create_run(client.create_experiment("kgeval")).info.run_id
    logged = log_results(results, client, run_id=run_id, step=4)
    assert metric_history(client, run_id, logged) == {name: [(4, value)] for name, value in logged.items()}
    with mlflow.start_run() as active:
        again = log_results(results, active, prefix="val/", keys="all")  # an ActiveRun; step None is MLflow's 0
    assert metric_history(client, active.info.run_id, again) == {name: [(0, value)] for name, value in again.items()}
    with pytest.raises(ValueError, match="run_id"):
        log_results(results, client)


def test_mlflow_refused_names_raise_before_anything_is_logged(results: Any, mlflow: Any) -> None:
    with mlflow.start_run() as run:
        with pytest.raises(mlflow.exceptions.MlflowException):
            mlflow.log_metric("val@mrr", 0.5)  # MLflow's own rule
        for prefix in ("val@", "/val/", "val//"):
            with pytest.raises(ValueError, match="MLflow refuses"):
                log_results(results, mlflow, prefix=prefix)
    assert mlflow.MlflowClient().get_run(run.info.run_id).data.metrics == {}


@pytest.mark.slow  # ~3-7 s: MLflow creates its tables through Alembic's migrations
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # SQLAlchemy's, about MLflow's use of it
def test_mlflow_sqlite_store_without_undefined_values(undefined: Any, tmp_path: Path) -> None:
    """The store MLflow 3 recommends (SQLAlchemy); the NaN metrics of a tie-only evaluation are not logged."""
    mlflow = pytest.importorskip("mlflow")
    pytest.importorskip("sqlalchemy")
    pytest.importorskip("alembic")
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    run_id = client.create_run(client.create_experiment("kgeval")).info.run_id
    logged = log_results(undefined, client, run_id=run_id, step=1, keys="all")
    assert logged == expected(undefined, "all") and len(logged) < 297
    assert client.get_run(run_id).data.metrics == logged


# -- TensorBoard -------------------------------------------------------------------------------------------------
def test_tensorboard_summary_writer(results: Any, tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(tmp_path))
    try:
        every = log_results(results, writer, step=5, prefix="validation/", keys="all")
        headline = log_results(results, writer, step=6, prefix="validation/")
    finally:
        writer.close()
    events = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0})
    events.Reload()
    assert set(events.Tags()["scalars"]) == set(every) and len(every) == 297
    for name, value in every.items():
        got = [(event.step, event.value) for event in events.Scalars(name)]
        stored = float(np.float32(value))  # TensorBoard keeps scalars as float32
        assert got == ([(5, stored), (6, stored)] if name in headline else [(5, stored)]), name


# -- Lightning loggers -----------------------------------------------------------------------------------------
LIGHTNING_LOGGERS = ["lightning.pytorch.loggers", "pytorch_lightning.loggers", "lightning.fabric.loggers"]


@pytest.mark.parametrize("package", LIGHTNING_LOGGERS)
def test_lightning_csv_logger(results: Any, tmp_path: Path, package: str) -> None:
    loggers = pytest.importorskip(package)
    folder = {"root_dir" if package.startswith("lightning.fabric") else "save_dir": str(tmp_path)}
    logger = loggers.CSVLogger(**folder, name="kgeval")
    every = log_results(results, logger, step=4, prefix="validation/", keys="all")
    headline = log_results(results, logger, step=9, prefix="validation/")
    logger.finalize("success")
    with open(Path(logger.log_dir) / "metrics.csv", newline="") as file:
        rows = {int(row["step"]): row for row in csv.DictReader(file)}
    assert sorted(rows) == [4, 9]
    assert {name: float(rows[4][name]) for name in every} == every == expected(results, "all", "validation/")
    assert {name: float(rows[9][name]) for name in headline} == headline == expected(results, "headline", "validation/")
    assert all(rows[9][name] == "" for name in every if name not in headline)


@pytest.mark.parametrize("package", LIGHTNING_LOGGERS[:2])
def test_a_lightning_logger_needs_a_step(results: Any, tmp_path: Path, package: str) -> None:
    """Without one, CSVLogger numbered each row by the rows not yet saved, and log_results saves: two calls were
    two rows at step 0. A NumPy integer step is an int."""
    loggers = pytest.importorskip(package)
    logger = loggers.CSVLogger(save_dir=str(tmp_path), name="kgeval")
    with pytest.raises(ValueError, match="a Lightning logger needs step="):
        log_results(results, logger, keys=["mrr"])
    log_results(results, logger, step=np.int64(3), keys=["mrr"])
    log_results(results, logger, step=np.int64(4), keys=["mrr", "hits@10"])
    logger.finalize("success")
    with open(Path(logger.log_dir) / "metrics.csv", newline="") as file:
        assert [int(row["step"]) for row in csv.DictReader(file)] == [3, 4]


@pytest.mark.parametrize("package", LIGHTNING_LOGGERS[:2])
def test_lightning_mlflow_logger_names_are_checked_as_mlflow_checks_them(
    results: Any, mlflow: Any, tmp_path: Path, package: str
) -> None:
    """Lightning's MLFlowLogger deletes the characters MLflow refuses ('val@' was stored as 'val'; 'val@' and 'val:'
    collided): kgeval refuses such a prefix before anything is logged, as for MLflow's own interfaces, and logs the
    names it returns."""
    loggers = pytest.importorskip(package)
    logger = loggers.MLFlowLogger(experiment_name="kgeval", tracking_uri=f"file:{tmp_path / 'lightning-mlruns'}")
    for prefix in ("val@", "val:", "/val/"):
        with pytest.raises(ValueError, match="MLflow refuses"):
            log_results(results, logger, step=1, prefix=prefix, keys=["mrr"])
    assert logger.experiment.get_run(logger.run_id).data.metrics == {}
    logged = log_results(results, logger, step=2, prefix="val/", keys=["mrr", "hits@10"])
    assert logger.experiment.get_run(logger.run_id).data.metrics == logged


# -- triple classification's results -----------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::kgeval.exceptions.ThresholdFallbackWarning")  # random labels: few per relation
def test_classification_results_log_their_own_headline(tmp_path: Path) -> None:
    """Both classification protocols' results name a headline of their own; every value reaches the tracker."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch.utils.tensorboard import SummaryWriter

    from kgeval.variants.classification import LabelledTriples, classify_all_pairs, classify_scores

    data = load_shipped_dataset("nations")
    model = DistMult(data.num_entities, data.num_relations, dim=8, seed=0)
    pairs = classify_all_pairs(model, data.test, known=[data.train, data.valid], validation=data.valid)
    rng = np.random.default_rng(0)
    test = LabelledTriples(data.test, torch.as_tensor(rng.random(len(data.test)) < 0.5))
    valid = LabelledTriples(data.valid, torch.as_tensor(rng.random(len(data.valid)) < 0.5))
    triples = classify_scores(valid, rng.random(len(data.valid)), test, rng.random(len(data.test)))
    writer = SummaryWriter(log_dir=str(tmp_path))
    try:
        logged = {name: log_results(results, writer, step=1, prefix=f"{name}/")
                  for name, results in (("pairs", pairs), ("triples", triples))}  # fmt: skip
    finally:
        writer.close()
    assert list(logged["pairs"]) == [f"pairs/{key}" for key in pairs.headline_keys]
    assert logged["pairs"]["pairs/both.roc_auc"] == pairs.sides["both"].metrics()["roc_auc"]
    assert list(logged["triples"]) == [f"triples/{key}" for key in triples.headline_keys]
    assert logged["triples"]["triples/micro.accuracy"] == triples.micro["accuracy"]
    events = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0})
    events.Reload()
    assert set(events.Tags()["scalars"]) == set(logged["pairs"]) | set(logged["triples"])
    every = select_values(triples, "all")
    assert "relation.0.accuracy" in every or any(key.startswith("relation.") for key in every)
    with pytest.raises(KeyError, match="not among"):
        select_values(pairs, ["both.mrr"])
