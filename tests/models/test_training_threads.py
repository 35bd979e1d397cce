"""The CPU threads of a training run: ``train_model(threads=...)`` and ``kgeval demo`` (triples, temporal and
inductive), which trains on the cores the machine has free -- as every evaluation picks its threads -- unless
``--threads`` is given. The machine's reading is stubbed (``kgeval._machine``), and the caller's count set by the
test, so no test depends on the CPU that runs it; the caller's count is always given back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import kgeval.models.training as training
from kgeval import _machine
from kgeval.cli import main
from kgeval.datasets import load_shipped_dataset
from kgeval.models import DistMult
from kgeval.models.training import free_threads, train_model, training_threads
from tests.support.many_graphs import make_folders
from tests.test_cli_temporal import write_tkg

#: the caller's count every test starts from, and the cores the stubbed machine has (others keep two busy)
CALLER, CORES, BUSY = 4, 4, 2.0


@pytest.fixture
def caller_threads() -> Iterator[None]:
    """PyTorch at :data:`CALLER` threads for the test, the count before it given back afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(CALLER)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture
def busy_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine of :data:`CORES` cores on which other processes keep :data:`BUSY` threads runnable: 2 cores free."""
    monkeypatch.setattr(_machine, "usable_cores", lambda: CORES)
    monkeypatch.setattr(_machine, "others_running", lambda *args, **kwargs: BUSY)


class Recording(DistMult):
    """DistMult that records PyTorch's thread count whenever it scores (in training and in evaluation)."""

    seen: list[int]

    def score_t(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        self.seen.append(torch.get_num_threads())
        return super().score_t(*args, **kwargs)


def _recording_model() -> Recording:
    data = load_shipped_dataset("nations")
    model = Recording(data.num_entities, data.num_relations, dim=4, seed=0)
    model.seen = []
    return model


@pytest.mark.usefixtures("caller_threads", "busy_machine")
@pytest.mark.parametrize(("threads", "expected"), [("free", 2), (None, CALLER), (3, 3), (1, 1)])
def test_train_model_runs_on_the_threads_asked_and_gives_the_count_back(threads: Any, expected: int) -> None:
    model = _recording_model()
    train_model(model, load_shipped_dataset("nations").train[:64], num_epochs=2, batch_size=32, use_tqdm=False,
                threads=threads)  # fmt: skip
    assert set(model.seen) == {expected}
    assert torch.get_num_threads() == CALLER


@pytest.mark.usefixtures("caller_threads", "busy_machine")
def test_the_count_is_given_back_when_training_fails() -> None:
    model = _recording_model()

    def fail(*args: Any, **kwargs: Any) -> torch.Tensor:
        model.seen.append(torch.get_num_threads())
        raise RuntimeError("a failing model")

    model.score_t = fail  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="a failing model"):
        train_model(model, load_shipped_dataset("nations").train[:8], num_epochs=1, use_tqdm=False, threads="free")
    assert model.seen == [2] and torch.get_num_threads() == CALLER


def test_free_threads_follows_the_evaluation_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_machine, "usable_cores", lambda: CORES)
    for others, requested, expected in [(None, 4, 4), (0.0, 4, 4), (2.0, 4, 2), (3.4, 4, 1), (9.0, 4, 1),
                                        (1.0, 2, 2), (2.0, 3, 2), (5.0, 1, 1)]:  # fmt: skip
        monkeypatch.setattr(_machine, "others_running", lambda *args, o=others, **kwargs: o)
        assert free_threads(requested) == expected, (others, requested)
    with training_threads(None) as kept:
        assert kept == torch.get_num_threads()


@pytest.mark.parametrize("threads", [0, -1, 1.5, True, "all"])
def test_a_bad_thread_count_is_refused(threads: Any) -> None:
    data = load_shipped_dataset("nations")
    with pytest.raises(ValueError, match="threads must be None, 'free' or an int >= 1"):
        train_model(DistMult(data.num_entities, data.num_relations, dim=4), data.train, threads=threads)


@pytest.fixture
def demo_folders(tmp_path: Path) -> dict[str, str]:
    """A dataset of each kind the demo trains on: triples (shipped), quadruples and an inductive folder."""
    write_tkg(tmp_path / "tkg")
    return {"triples": "nations", "temporal": str(tmp_path / "tkg"), "inductive": str(make_folders(tmp_path)[2])}


@pytest.mark.usefixtures("caller_threads", "busy_machine")
@pytest.mark.parametrize("kind", ["triples", "temporal", "inductive"])
def test_the_demo_trains_on_the_free_cores_unless_threads_is_given(
    kind: str, demo_folders: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[int] = []
    run_epoch = training._run_epoch

    def recording_epoch(*args: Any, **kwargs: Any) -> float:
        seen.append(torch.get_num_threads())
        return run_epoch(*args, **kwargs)

    monkeypatch.setattr(training, "_run_epoch", recording_epoch)
    argv = ["demo", "--dataset", demo_folders[kind], "--epochs", "2", "--dim", "4", "--no-progress"]
    assert main(argv) == 0, capsys.readouterr().err
    assert seen == [2, 2]  # the free cores, not the caller's 4
    assert torch.get_num_threads() == CALLER  # given back
    seen.clear()
    assert main([*argv, "--threads", "3"]) == 0, capsys.readouterr().err
    assert seen == [3, 3]  # --threads wins over the machine's reading
